// Cuckoo filter files: the version-2 gbf container (host/io/container.hpp),
// kind cuckoo (4), revision 1. The kind's fields, little-endian:
//
//   offset  size  field
//   32      4     tag_bits (8, 16 or 32)
//   36      4     max_kicks (1 .. cuckoo_max_kicks_limit)
//   40      8     seed
//   48      8     num_buckets (1 .. 2^32 - 1)
//   56      8     capacity (0 = unknown)
//   64      8     target fpp, f64 (0 = unknown, else in (0, 1))
//   72      8     keys added
//   80      8     keys removed
//   88      8     evictions
//   96      8     failed inserts
//
// then the payload, num_buckets * 8 words (the table, gbf/cuckoo_layout.hpp),
// and the container's xxh64 checksum. Every field is checked before the
// payload is allocated; any table is a valid one, so the words are not.
#include <string>
#include <vector>

#include "gbf/cuckoo_filter.hpp"
#include "host/io/atomic_file.hpp"
#include "host/io/byte_io.hpp"
#include "host/io/container.hpp"
#include "host/filter_access.hpp"
#include "host/number_text.hpp"

namespace gbf {
namespace {

using detail::byte_sink;
using detail::byte_source;
using detail::container_reader;
using detail::container_writer;
using detail::field_reader;
using detail::field_writer;

constexpr std::uint32_t cuckoo_revision = 1;

/// The kind's fields of `f`, recording `fpp`.
field_writer cuckoo_fields(const cuckoo_filter& f, double fpp) {
  f.where();  // a moved-from filter throws invalid_argument, as its other calls do, not stale fields
  const cuckoo_layout& l = f.layout();
  const cuckoo_totals t = f.totals();
  field_writer fields;
  fields.u32(l.tag_bits);
  fields.u32(f.max_kicks());
  fields.u64(l.seed);
  fields.u64(l.num_buckets);
  fields.u64(f.capacity());
  fields.f64(fpp);
  fields.u64(t.keys_added);
  fields.u64(t.keys_removed);
  fields.u64(t.evictions);
  fields.u64(t.failed_inserts);
  return fields;
}

void write_cuckoo(const cuckoo_filter& f, double fpp, byte_sink& out) {
  const cuckoo_layout& l = f.layout();
  container_writer writer(out, detail::filter_kind::cuckoo, cuckoo_revision, cuckoo_fields(f, fpp).bytes(),
                          l.size_bytes());
  writer.write_words_from(l.num_words(), [&](std::uint64_t first, std::uint64_t count, std::uint32_t* slice) {
    f.copy_words(first, count, slice);
  });
  writer.finish();
}

cuckoo_filter read_cuckoo(byte_source& in, const options& opts, cuckoo_file_metadata* metadata) {
  container_reader reader(in, detail::filter_kind::cuckoo);
  if (reader.revision() != cuckoo_revision)
    in.fail("cuckoo filter revision " + std::to_string(reader.revision()) +
            " is not supported (this library reads revision 1)");
  field_reader fields(reader.fields(), in);
  cuckoo_file_metadata m;
  m.l.tag_bits = fields.u32("tag_bits");
  m.max_kicks = fields.u32("max_kicks");
  m.l.seed = fields.u64("seed");
  m.l.num_buckets = fields.u64("num_buckets");
  m.capacity = fields.u64("capacity");
  m.fpp = fields.f64("fpp");
  m.totals.keys_added = fields.u64("keys added");
  m.totals.keys_removed = fields.u64("keys removed");
  m.totals.evictions = fields.u64("evictions");
  m.totals.failed_inserts = fields.u64("failed inserts");
  if (const char* problem = cuckoo_layout_problem(m.l))
    in.fail(std::string("impossible cuckoo layout: ") + problem);
  if (m.max_kicks < 1 || m.max_kicks > cuckoo_max_kicks_limit)
    in.fail("max_kicks " + std::to_string(m.max_kicks) + " is not between 1 and " +
            std::to_string(cuckoo_max_kicks_limit));
  if (!detail::recordable_fpp(m.fpp))
    in.fail("target fpp " + detail::number_text(m.fpp) + " is neither 0 (unknown) nor in (0, 1)");
  // The layout is valid, so size_bytes() <= 2^32 * 32 cannot overflow.
  if (reader.payload_bytes() != m.l.size_bytes())
    in.fail("payload size " + std::to_string(reader.payload_bytes()) +
            " bytes does not match the table (num_buckets * 32 = " +
            std::to_string(m.l.size_bytes()) + ")");
  // The checked allocation first, then the table streamed into it.
  cuckoo_filter f(m.l, opts, m.capacity, m.max_kicks);
  reader.read_words_to(m.l.num_words(),
                       [&f](std::uint64_t first, std::uint64_t count, const std::uint32_t* words) {
                         detail::filter_access::write_words(f, first, count, words);
                       });
  reader.finish();
  detail::filter_access::set_totals(f, m.totals);
  if (metadata != nullptr) *metadata = m;
  return f;
}

}  // namespace

std::uint64_t serialized_size(const cuckoo_filter& f) {
  return detail::container_file_bytes(cuckoo_fields(f, 0).bytes(), f.layout().size_bytes());
}

std::vector<std::uint8_t> serialize(const cuckoo_filter& f, double fpp) {
  detail::check_recordable_fpp("serialize", fpp);
  detail::vector_sink out(static_cast<std::size_t>(serialized_size(f)));
  write_cuckoo(f, fpp, out);
  return out.take();
}

void serialize_into(const cuckoo_filter& f, std::uint8_t* out, std::size_t size, double fpp) {
  detail::check_recordable_fpp("serialize_into", fpp);
  detail::check_serialize_buffer("serialize_into", out, size, serialized_size(f));
  detail::span_sink sink(out, size);
  write_cuckoo(f, fpp, sink);
}

cuckoo_filter deserialize_cuckoo(const std::uint8_t* data, std::size_t size, const options& opts,
                                 cuckoo_file_metadata* metadata) {
  detail::check_buffer("deserialize_cuckoo", data, size);
  detail::memory_source in("gbf data", data, size);
  return read_cuckoo(in, opts, metadata);
}

void save(const cuckoo_filter& f, const std::string& path, double fpp) {
  detail::check_recordable_fpp("save", fpp);
  detail::atomic_file_sink out(path);
  write_cuckoo(f, fpp, out);
  out.commit();
}

cuckoo_filter load_cuckoo(const std::string& path, const options& opts,
                          cuckoo_file_metadata* metadata) {
  detail::file_source in(path);
  return read_cuckoo(in, opts, metadata);
}

}  // namespace gbf
