// gbf::parquet::pruner (gbf/parquet.hpp): packs the row groups' filters, turns
// a caller's keys into the column's Parquet encoding, and hands them to the CPU
// or GPU backend (host/parquet/prune.hpp).
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/parquet.hpp"
#include "host/backend.hpp"
#include "host/cpu/isa.hpp"
#include "host/keys.hpp"
#include "host/parquet/prune.hpp"

namespace gbf::detail {

/// What a pruner holds: the row groups and their filters, packed, and the backend.
struct pruner_state {
  std::vector<std::string> files;
  gbf::parquet::column_info column;
  std::vector<gbf::parquet::row_group_ref> row_groups;
  parquet::packed_filters filters;
  backend where = backend::cpu;
  unsigned threads = 0;
  bool use_avx2 = false;
  std::unique_ptr<parquet::gpu_prune_backend> gpu;
};

}  // namespace gbf::detail

namespace gbf::parquet {

namespace {

namespace dp = gbf::detail::parquet;
using gbf::detail::key_batch;
using gbf::detail::key_kind;

std::string describe_type(const column_info& c) {
  std::string text = to_string(c.type);
  if (c.type == physical_type::fixed_len_byte_array) text += "(" + std::to_string(c.type_length) + ")";
  if (c.is_unsigned) text += " (unsigned)";
  return text;
}

bool same_encoding(const column_info& a, const column_info& b) {
  return a.type == b.type && a.is_unsigned == b.is_unsigned && a.type_length == b.type_length;
}

bool is_integer_column(const column_info& c) {
  return c.type == physical_type::int32 || c.type == physical_type::int64;
}

/// A caller's batch in the column's encoding: either the caller's own arrays
/// (when they already are) or converted copies, with the keys the column cannot
/// hold marked null.
struct encoded_keys {
  key_batch batch;
  std::vector<std::uint32_t> u32;
  std::vector<std::uint64_t> u64;
  std::vector<std::uint8_t> validity;
};

/// Whether an integer key the caller passed (its raw bits `raw`, of kind u32 or
/// u64, signed or not) can be stored in the column, and as which bits.
struct integer_rule {
  bool to_32;      // INT32 column
  bool unsigned_;  // the column is annotated unsigned
  bool signed_keys;
  bool wide_keys;  // u64 batch

  bool representable(std::uint64_t raw) const {
    constexpr std::int64_t int32_min = std::numeric_limits<std::int32_t>::min();
    constexpr std::int64_t int32_max = std::numeric_limits<std::int32_t>::max();
    constexpr std::uint64_t uint32_max = std::numeric_limits<std::uint32_t>::max();
    constexpr std::uint64_t int64_max = std::numeric_limits<std::int64_t>::max();
    if (signed_keys) {
      const std::int64_t v = wide_keys ? static_cast<std::int64_t>(raw)
                                       : static_cast<std::int32_t>(static_cast<std::uint32_t>(raw));
      if (to_32)
        return unsigned_ ? v >= 0 && static_cast<std::uint64_t>(v) <= uint32_max
                         : v >= int32_min && v <= int32_max;
      return !unsigned_ || v >= 0;
    }
    if (to_32) return raw <= (unsigned_ ? uint32_max : static_cast<std::uint64_t>(int32_max));
    return unsigned_ || raw <= int64_max;
  }
};

void set_valid(std::vector<std::uint8_t>& bitmap, std::size_t i, bool valid) {
  if (valid) bitmap[i >> 3] |= static_cast<std::uint8_t>(1u << (i & 7));
}

encoded_keys encode_integers(const column_info& c, const key_batch& keys, bool is_signed) {
  encoded_keys out;
  const bool wide = keys.kind == key_kind::u64;
  const integer_rule rule{c.type == physical_type::int32, c.is_unsigned, is_signed, wide};
  const auto raw_at = [&](std::size_t i) -> std::uint64_t {
    return wide ? static_cast<const std::uint64_t*>(keys.data)[i]
                : static_cast<const std::uint32_t*>(keys.data)[i];
  };
  const auto valid = [&](std::size_t i) {
    return gbf::detail::key_valid(keys.validity, keys.validity_bit, i);
  };
  // A null key needs no representation.
  bool all_representable = true;
  for (std::size_t i = 0; i < keys.count && all_representable; ++i)
    all_representable = !valid(i) || rule.representable(raw_at(i));
  const bool same_width = wide == !rule.to_32;
  out.batch = keys;
  if (same_width && all_representable) return out;  // the caller's keys as they are

  // Parquet stores INT32 values as their 32-bit two's complement (an unsigned
  // INT32 as its 32 bits), INT64 as 64 bits: truncating or extending the raw
  // value gives those bits for every representable key.
  const auto bits64 = [&](std::uint64_t raw) {
    return !wide && is_signed ? static_cast<std::uint64_t>(static_cast<std::int64_t>(
                                    static_cast<std::int32_t>(raw)))
                              : raw;
  };
  if (!all_representable) out.validity.assign((keys.count + 7) / 8, 0);
  if (rule.to_32) {
    out.u32.resize(keys.count);
    for (std::size_t i = 0; i < keys.count; ++i) {
      const std::uint64_t raw = raw_at(i);
      out.u32[i] = static_cast<std::uint32_t>(raw);
      if (!all_representable) set_valid(out.validity, i, rule.representable(raw) && valid(i));
    }
    out.batch.data = out.u32.data();
    out.batch.kind = key_kind::u32;
  } else {
    out.u64.resize(keys.count);
    for (std::size_t i = 0; i < keys.count; ++i) {
      const std::uint64_t raw = raw_at(i);
      out.u64[i] = bits64(raw);
      if (!all_representable) set_valid(out.validity, i, rule.representable(raw) && valid(i));
    }
    out.batch.data = out.u64.data();
    out.batch.kind = key_kind::u64;
  }
  if (!all_representable) {
    out.batch.validity = out.validity.data();
    out.batch.validity_bit = 0;
  }
  return out;
}

/// FIXED_LEN_BYTE_ARRAY: a string of another length is no value of the column.
encoded_keys encode_fixed(const column_info& c, const key_batch& keys) {
  encoded_keys out;
  out.batch = keys;
  bool all_fit = true;
  for (std::size_t i = 0; i < keys.count && all_fit; ++i)
    all_fit = gbf::detail::offset_at(keys, i + 1) - gbf::detail::offset_at(keys, i) ==
              static_cast<std::int64_t>(c.type_length);
  if (all_fit) return out;
  out.validity.assign((keys.count + 7) / 8, 0);
  for (std::size_t i = 0; i < keys.count; ++i) {
    const bool fits = gbf::detail::offset_at(keys, i + 1) - gbf::detail::offset_at(keys, i) ==
                      static_cast<std::int64_t>(c.type_length);
    set_valid(out.validity, i,
              fits && gbf::detail::key_valid(keys.validity, keys.validity_bit, i));
  }
  out.batch.validity = out.validity.data();
  out.batch.validity_bit = 0;
  return out;
}

}  // namespace

pruner::pruner(std::vector<column_filter_set> files, const options& where)
    : state_(std::make_unique<gbf::detail::pruner_state>()) {
  if (files.empty()) throw invalid_argument("parquet::pruner: no files given");
  gbf::detail::pruner_state& s = *state_;
  s.column = files.front().column;
  std::uint64_t total_words = 0;
  std::size_t total_groups = 0;
  for (const column_filter_set& f : files) {
    if (!same_encoding(f.column, s.column))
      throw invalid_argument("parquet::pruner: column '" + f.column.path + "' is " +
                             describe_type(f.column) + " in '" + f.file + "' but '" +
                             s.column.path + "' is " + describe_type(s.column) + " in '" +
                             files.front().file + "'; prune them separately");
    total_groups += f.row_groups.size();
    for (const row_group_filter& g : f.row_groups)
      if (g.bloom.has_value()) {
        const layout& l = g.bloom->layout();
        if (l.words_per_block != dp::sbbf_words || l.bits_per_key != 8 || l.seed != 0)
          throw invalid_argument("parquet::pruner: row group " + std::to_string(g.row_group) +
                                 " of '" + f.file + "' has a filter of layout " + to_string(l) +
                                 ", not Parquet's (8 words/block, 8 bits/key, seed 0)");
        total_words += l.num_words();
      }
  }
  if (total_groups > std::numeric_limits<std::uint32_t>::max())
    throw invalid_argument("parquet::pruner: " + std::to_string(total_groups) +
                           " row groups; at most 2^32 - 1 are numbered");

  dp::packed_filters& p = s.filters;
  p.num_words = total_words;
  p.words = gbf::detail::cpu::allocate_words(std::max<std::uint64_t>(total_words, 1) * 4,
                                             where.cpu_huge_pages, "parquet::pruner filters");
  p.word_offset.reserve(total_groups);
  p.num_blocks.reserve(total_groups);
  s.row_groups.reserve(total_groups);
  std::uint64_t next = 0;
  for (std::size_t file = 0; file < files.size(); ++file) {
    s.files.push_back(files[file].file);
    for (row_group_filter& g : files[file].row_groups) {
      row_group_ref ref{file, g.row_group, g.num_rows, g.column_bytes, g.bloom.has_value()};
      s.row_groups.push_back(ref);
      p.word_offset.push_back(next);
      if (!g.bloom.has_value()) {
        p.num_blocks.push_back(0);
        continue;
      }
      const std::vector<std::uint32_t> words = g.bloom->words();
      std::memcpy(p.words.get() + next, words.data(), words.size() * sizeof(std::uint32_t));
      p.num_blocks.push_back(static_cast<std::uint32_t>(g.bloom->layout().num_blocks));
      next += words.size();
      g.bloom.reset();  // packed: the filter's own copy is no longer needed
    }
  }

  s.threads = where.cpu_threads;
  // The pruner's probe kernel is AVX2 at most.
  s.use_avx2 = gbf::detail::cpu::pick_cpu_isa(where.simd) != gbf::detail::cpu::cpu_isa::scalar;
  // The CPU probes the packed host copy itself: no backend object. An automatic pruner
  // whose filters the GPU cannot hold stays on the CPU (detail::place).
  std::string placement;  // a pruner keeps no description: where() says it
  s.gpu = gbf::detail::place(
      where, placement, [&] { return dp::make_gpu_pruner(p); },
      [] { return std::unique_ptr<dp::gpu_prune_backend>(); });
  s.where = s.gpu ? backend::gpu : backend::cpu;
}

pruner::pruner(pruner&&) noexcept = default;
pruner& pruner::operator=(pruner&&) noexcept = default;
pruner::~pruner() = default;

std::size_t pruner::num_row_groups() const { return state_->row_groups.size(); }
const row_group_ref& pruner::row_group(std::size_t g) const {
  if (g >= state_->row_groups.size())
    throw invalid_argument("parquet::pruner::row_group: " + std::to_string(g) + " is not below " +
                           std::to_string(state_->row_groups.size()));
  return state_->row_groups[g];
}
const std::vector<std::string>& pruner::files() const { return state_->files; }
const column_info& pruner::column() const { return state_->column; }
backend pruner::where() const { return state_->where; }

prune_result pruner::prune_keys(const key_batch& caller_keys, bool is_signed, bool per_key) const {
  const gbf::detail::pruner_state& s = *state_;
  const key_batch keys = gbf::detail::check_batch("parquet::pruner::prune", caller_keys);
  if (keys.count > 0 && keys.space == gbf::detail::memory_space::device)
    throw invalid_argument("parquet::pruner::prune: the keys are in device memory; it takes host keys");
  const bool integer_column = is_integer_column(s.column);
  if (keys.is_string() && integer_column)
    throw invalid_argument("parquet::pruner::prune: column '" + s.column.path + "' is " +
                           describe_type(s.column) +
                           ": probe it with integer keys (Parquet hashes its values' bytes, "
                           "not their text)");
  if (!keys.is_string() && !integer_column)
    throw invalid_argument("parquet::pruner::prune: column '" + s.column.path + "' is " +
                           describe_type(s.column) + ": probe it with byte-string keys");

  encoded_keys encoded;
  if (integer_column) {
    encoded = encode_integers(s.column, keys, is_signed);
  } else if (s.column.type == physical_type::fixed_len_byte_array) {
    encoded = encode_fixed(s.column, keys);
  } else {
    encoded.batch = keys;
  }

  prune_result out;
  if (s.gpu) {
    s.gpu->prune(encoded.batch, per_key, out);
  } else {
    dp::cpu_prune(s.filters, encoded.batch, per_key, s.threads, s.use_avx2, out);
  }
  return out;
}

}  // namespace gbf::parquet
