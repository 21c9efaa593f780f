// The scaling chain in the gbf file format: a version-2 container
// (host/io/container.hpp) of kind scaling, revision 1. All levels in one
// checksummed file, written atomically.
//
// Fields (little-endian, in this order; docs/scaling.md):
//   u64 initial capacity   f64 fpp   u32 expansion   f64 tightening
//   u32 flags (bit 0: non-scaling; the others 0)
//   u32 words per block    u32 bits per key   u64 seed   u32 hash id
//   u32 number of levels L (1..64; 1 when non-scaling)
//   L times: u64 num_blocks   u64 capacity   f64 target fpp   u64 keys
// Payload: level 0's words, then level 1's, ... (the sum of the level sizes).
//
// The reader checks the fields before it allocates anything: the container
// has checked the payload against the file's size, and the levels' sizes must
// add up to that payload. Then the levels must follow the chain's rule
// (scaling_filter::from_levels), and the checksum must match.
#include <optional>
#include <string>
#include <vector>

#include "gbf/scaling_filter.hpp"
#include "host/io/atomic_file.hpp"
#include "host/io/byte_io.hpp"
#include "host/io/container.hpp"
#include "host/filter_access.hpp"

namespace gbf {
namespace {

using detail::atomic_file_sink;
using detail::byte_sink;
using detail::byte_source;
using detail::container_reader;
using detail::container_writer;
using detail::field_reader;
using detail::field_writer;
using detail::file_source;
using detail::filter_kind;
using detail::memory_source;
using detail::vector_sink;

constexpr std::uint32_t revision = 1;
constexpr std::uint32_t flag_non_scaling = 1;
constexpr std::uint32_t max_levels = 64;

std::uint64_t payload_bytes(const scaling_filter& f) {
  std::uint64_t bytes = 0;
  for (const scaling_level& level : f.levels()) bytes += level.l.size_bytes();
  return bytes;
}

/// The kind's fields of `f`.
field_writer chain_fields(const scaling_filter& f) {
  f.where();  // a moved-from chain (no levels, no backend) throws invalid_argument, as its other calls do
  const scaling_config& c = f.config();
  field_writer fields;
  fields.u64(c.initial_capacity);
  fields.f64(c.fpp);
  fields.u32(c.policy.expansion);
  fields.f64(c.policy.tightening);
  fields.u32(c.policy.non_scaling ? flag_non_scaling : 0);
  fields.u32(c.s.words_per_block);
  fields.u32(c.s.bits_per_key);
  fields.u64(c.s.seed);
  fields.u32(static_cast<std::uint32_t>(hash_id::xxh64));
  fields.u32(static_cast<std::uint32_t>(f.levels().size()));
  for (const scaling_level& level : f.levels()) {
    fields.u64(level.l.num_blocks);
    fields.u64(level.capacity);
    fields.f64(level.fpp);
    fields.u64(level.keys);
  }
  return fields;
}

void write_chain(const scaling_filter& f, byte_sink& out) {
  container_writer writer(out, filter_kind::scaling, revision, chain_fields(f).bytes(), payload_bytes(f));
  for (std::size_t i = 0; i < f.levels().size(); ++i)
    writer.write_words_from(f.levels()[i].l.num_words(),
                            [&f, i](std::uint64_t first, std::uint64_t count, std::uint32_t* slice) {
                              f.copy_level_words(i, first, count, slice);
                            });
  writer.finish();
}

scaling_filter read_chain(byte_source& in, const options& opts) {
  container_reader reader(in, filter_kind::scaling);
  if (reader.revision() != revision)
    in.fail("scaling chain fields of revision " + std::to_string(reader.revision()) +
            "; this library reads revision " + std::to_string(revision));
  field_reader fields(reader.fields(), reader.source());
  scaling_config c;
  c.initial_capacity = fields.u64("initial capacity");
  c.fpp = fields.f64("fpp");
  c.policy.expansion = fields.u32("expansion");
  c.policy.tightening = fields.f64("tightening");
  const std::uint32_t flags = fields.u32("flags");
  c.s.words_per_block = fields.u32("words per block");
  c.s.bits_per_key = fields.u32("bits per key");
  c.s.seed = fields.u64("seed");
  const std::uint32_t hash = fields.u32("hash id");
  const std::uint32_t num_levels = fields.u32("number of levels");
  if ((flags & ~flag_non_scaling) != 0)
    in.fail("unknown flags " + std::to_string(flags) + " (only bit 0, non-scaling, is defined)");
  c.policy.non_scaling = (flags & flag_non_scaling) != 0;
  if (hash != static_cast<std::uint32_t>(hash_id::xxh64))
    in.fail("unknown hash id " + std::to_string(hash) + " (only xxh64 = 1 is defined)");
  if (num_levels == 0 || num_levels > max_levels)
    in.fail(std::to_string(num_levels) + " levels; a chain has 1 to " +
            std::to_string(max_levels));

  std::vector<scaling_level> levels(num_levels);
  std::uint64_t bytes = 0;
  for (std::uint32_t i = 0; i < num_levels; ++i) {
    scaling_level& level = levels[i];
    level.l.words_per_block = c.s.words_per_block;
    level.l.bits_per_key = c.s.bits_per_key;
    level.l.seed = c.s.seed;
    level.l.num_blocks = fields.u64("level num_blocks");
    level.capacity = fields.u64("level capacity");
    level.fpp = fields.f64("level fpp");
    level.keys = fields.u64("level keys");
    if (const char* problem = layout_problem(level.l))
      in.fail("level " + std::to_string(i) + ": impossible layout: " + problem);
    bytes += level.l.size_bytes();  // <= 64 levels of <= 2^38 bytes: no overflow
  }
  if (fields.remaining() >= 8)
    in.fail(std::to_string(fields.remaining()) + " bytes after the last level's fields");
  if (bytes != reader.payload_bytes())
    in.fail("the levels hold " + std::to_string(bytes) + " bytes but the payload has " +
            std::to_string(reader.payload_bytes()));

  // The chain is checked and allocated (zeroed) first, then the levels streamed in.
  std::optional<scaling_filter> chain;
  try {
    chain.emplace(detail::filter_access::zeroed_chain(c, levels, opts));
  } catch (const invalid_argument& e) {
    // The fields are consistent with the file but not with the chain's rule.
    in.fail(std::string("not a valid chain: ") + e.what());
  }
  for (std::size_t i = 0; i < levels.size(); ++i)
    reader.read_words_to(levels[i].l.num_words(),
                         [&chain, i](std::uint64_t first, std::uint64_t count, const std::uint32_t* words) {
                           detail::filter_access::write_words(*chain, i, first, count, words);
                         });
  reader.finish();
  return std::move(*chain);
}

}  // namespace

std::uint64_t serialized_size(const scaling_filter& f) {
  return detail::container_file_bytes(chain_fields(f).bytes(), payload_bytes(f));
}

std::vector<std::uint8_t> serialize(const scaling_filter& f) {
  vector_sink out(static_cast<std::size_t>(serialized_size(f)));
  write_chain(f, out);
  return out.take();
}

void serialize_into(const scaling_filter& f, std::uint8_t* out, std::size_t size) {
  detail::check_serialize_buffer("serialize_into", out, size, serialized_size(f));
  detail::span_sink sink(out, size);
  write_chain(f, sink);
}

scaling_filter deserialize_scaling_filter(const std::uint8_t* data, std::size_t size,
                                          const options& opts) {
  detail::check_buffer("deserialize_scaling_filter", data, size);
  memory_source in("gbf data", data, size);
  return read_chain(in, opts);
}

void save(const scaling_filter& f, const std::string& path) {
  f.where();  // before anything touches the file
  atomic_file_sink out(path);
  write_chain(f, out);
  out.commit();
}

scaling_filter load_scaling_filter(const std::string& path, const options& opts) {
  file_source in(path);
  return read_chain(in, opts);
}

}  // namespace gbf
