// Counting filter files: the gbf container (host/io/container.hpp, version 2)
// with kind counting (2), revision 1 of its fields (docs/counting.md):
//
//   offset  size  field
//   32      4     words_per_block W
//   36      4     bits_per_key k
//   40      4     hash id (1 = xxh64)
//   44      4     counter_bits c (4 or 8)
//   48      8     seed
//   56      8     num_blocks
//   64      8     capacity (0 = unknown)
//   72      8     target fpp (f64; 0 = unknown, else in (0, 1))
//   80      8     keys added
//   88      8     keys removed
//   96      P     payload: the num_blocks * W * c counter words, little-endian
//
// One writer and one reader over byte sinks and sources, so the in-memory
// variants (serialize, deserialize_counting) run the code that files do.
#include <string>
#include <vector>

#include "gbf/counting_filter.hpp"
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
using detail::filter_kind;

/// The revision of the counting kind's fields this library writes and reads.
constexpr std::uint32_t counting_revision = 1;

/// The kind's fields of `f`, recording `fpp`.
field_writer counting_fields(const counting_filter& f, double fpp) {
  f.where();  // a moved-from filter throws invalid_argument, as its other calls do, not stale fields
  const layout& l = f.layout();
  field_writer fields;
  fields.u32(l.words_per_block);
  fields.u32(l.bits_per_key);
  fields.u32(static_cast<std::uint32_t>(l.hash));
  fields.u32(f.counter_bits());
  fields.u64(l.seed);
  fields.u64(l.num_blocks);
  fields.u64(f.capacity());
  fields.f64(fpp);
  fields.u64(detail::filter_access::keys_added(f));
  fields.u64(detail::filter_access::keys_removed(f));
  return fields;
}

void write_counting(const counting_filter& f, double fpp, byte_sink& out) {
  const layout& l = f.layout();
  container_writer writer(out, filter_kind::counting, counting_revision, counting_fields(f, fpp).bytes(),
                          counter_bytes(l, f.counter_bits()));
  writer.write_words_from(num_counter_words(l, f.counter_bits()),
                          [&](std::uint64_t first, std::uint64_t count, std::uint32_t* slice) {
                            f.copy_counters(first, count, slice);
                          });
  writer.finish();
}

/// Reads the container header and the kind's fields, and checks them against
/// each other and the payload size; nothing of the payload's size is allocated.
counting_file_metadata read_counting_header(container_reader& reader) {
  const byte_source& in = reader.source();
  if (reader.revision() != counting_revision)
    in.fail("counting filter fields of revision " + std::to_string(reader.revision()) +
            " (this library reads revision " + std::to_string(counting_revision) + ")");
  field_reader fields(reader.fields(), in);
  counting_file_metadata m;
  m.l.words_per_block = fields.u32("words_per_block");
  m.l.bits_per_key = fields.u32("bits_per_key");
  m.l.hash = static_cast<hash_id>(fields.u32("hash id"));
  m.counter_bits = fields.u32("counter_bits");
  m.l.seed = fields.u64("seed");
  m.l.num_blocks = fields.u64("num_blocks");
  m.capacity = fields.u64("capacity");
  m.fpp = fields.f64("fpp");
  m.keys_added = fields.u64("keys added");
  m.keys_removed = fields.u64("keys removed");
  if (const char* problem = counting_layout_problem(m.l, m.counter_bits))
    in.fail(std::string("impossible counting filter layout: ") + problem);
  if (!detail::recordable_fpp(m.fpp))
    in.fail("target fpp " + detail::number_text(m.fpp) + " is neither 0 (unknown) nor in (0, 1)");
  // A valid layout has at most 2^32 * 16 words of 8 counter words: no overflow.
  const std::uint64_t expected = counter_bytes(m.l, m.counter_bits);
  if (reader.payload_bytes() != expected)
    in.fail("payload size " + std::to_string(reader.payload_bytes()) +
            " bytes does not match the layout (num_blocks * words_per_block * counter_bits * 4 = " +
            std::to_string(expected) + ")");
  return m;
}

counting_filter read_counting(byte_source& in, const options& opts,
                              counting_file_metadata* metadata) {
  container_reader reader(in, filter_kind::counting);
  const counting_file_metadata m = read_counting_header(reader);
  // The checked allocation first, then the counters streamed into it.
  counting_filter f(m.l, opts, m.capacity, m.counter_bits);
  reader.read_words_to(num_counter_words(m.l, m.counter_bits),
                       [&f](std::uint64_t first, std::uint64_t count, const std::uint32_t* counters) {
                         detail::filter_access::write_counters(f, first, count, counters);
                       });
  reader.finish();
  detail::filter_access::set_counts(f, m.keys_added, m.keys_removed);
  if (metadata != nullptr) *metadata = m;
  return f;
}

}  // namespace

std::uint64_t serialized_size(const counting_filter& f) {
  return detail::container_file_bytes(counting_fields(f, 0).bytes(), counter_bytes(f.layout(), f.counter_bits()));
}

std::vector<std::uint8_t> serialize(const counting_filter& f, double fpp) {
  detail::check_recordable_fpp("serialize", fpp);
  detail::vector_sink out(static_cast<std::size_t>(serialized_size(f)));
  write_counting(f, fpp, out);
  return out.take();
}

void serialize_into(const counting_filter& f, std::uint8_t* out, std::size_t size, double fpp) {
  detail::check_recordable_fpp("serialize_into", fpp);
  detail::check_serialize_buffer("serialize_into", out, size, serialized_size(f));
  detail::span_sink sink(out, size);
  write_counting(f, fpp, sink);
}

counting_filter deserialize_counting(const std::uint8_t* data, std::size_t size,
                                     const options& opts, counting_file_metadata* metadata) {
  detail::check_buffer("deserialize_counting", data, size);
  detail::memory_source in("gbf data", data, size);
  return read_counting(in, opts, metadata);
}

void save(const counting_filter& f, const std::string& path, double fpp) {
  detail::check_recordable_fpp("save", fpp);
  detail::atomic_file_sink out(path);
  write_counting(f, fpp, out);
  out.commit();
}

counting_filter load_counting(const std::string& path, const options& opts,
                              counting_file_metadata* metadata) {
  detail::file_source in(path);
  return read_counting(in, opts, metadata);
}

counting_file_metadata read_counting_metadata(const std::string& path) {
  detail::file_source in(path);
  container_reader reader(in, filter_kind::counting);
  return read_counting_header(reader);
}

}  // namespace gbf
