// A reference model of the counting filter for the tests (host code only; the
// CPU and GPU tests both use it): counters kept per plain bit in a map,
// updated key by key in batch order with the saturation rules written out
// again here, and the counter words laid out by the documented formula
// (docs/counting.md), not by gbf/counting_layout.hpp. It also keeps each
// key's net count (adds minus removes that took effect), from which the
// projection and the no-false-negative promise are checked.
//
// Batches of every key kind come from a key_universe: n distinct keys of one
// kind, a batch being a list of key ids and which of them are null.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/hash.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"

namespace gbf::test {

/// The key kinds a counting test runs over: 32/64-bit integers, strings with
/// int32 offsets (some keys null), strings with int64 offsets.
enum class key_type { u32, u64, str32_with_nulls, str64 };

inline const char* key_type_name(key_type t) {
  switch (t) {
    case key_type::u32: return "u32";
    case key_type::u64: return "u64";
    case key_type::str32_with_nulls: return "str32nulls";
    case key_type::str64: return "str64";
  }
  return "?";
}

/// One batch: key ids of a universe, and which entries are null (strings only).
struct id_batch {
  std::vector<std::size_t> ids;
  std::vector<bool> null;  ///< Same length as ids.
};

/// `n` distinct keys of one type.
class key_universe {
 public:
  key_universe(key_type type, std::size_t n, std::uint64_t seed) : type_(type) {
    std::mt19937_64 rng(seed);
    if (type == key_type::u32) {
      std::map<std::uint32_t, bool> seen;
      while (u32_.size() < n) {
        const auto k = static_cast<std::uint32_t>(rng());
        if (seen.emplace(k, true).second) u32_.push_back(k);
      }
    } else if (type == key_type::u64) {
      u64_ = random_keys<std::uint64_t>(n, seed);
    } else {
      for (std::size_t i = 0; i < n; ++i)  // distinct: the index in front
        strings_.push_back(std::to_string(i) + ":" + random_string(rng, rng() % 24));
    }
  }

  key_type type() const { return type_; }
  std::size_t size() const {
    return type_ == key_type::u32 ? u32_.size() : type_ == key_type::u64 ? u64_.size()
                                                                          : strings_.size();
  }
  bool has_nulls() const { return type_ == key_type::str32_with_nulls; }

  /// The hash the filter computes for key `id` with `seed`.
  std::uint64_t hash(std::size_t id, std::uint64_t seed) const {
    switch (type_) {
      case key_type::u32: return hash_key(u32_[id], seed);
      case key_type::u64: return hash_key(u64_[id], seed);
      default: return hash_key(strings_[id].data(), strings_[id].size(), seed);
    }
  }

  /// A batch of `n` random ids (repeats allowed), about 1 in 8 null where the type allows.
  id_batch random_batch(std::mt19937_64& rng, std::size_t n) const {
    id_batch b;
    for (std::size_t i = 0; i < n; ++i) {
      b.ids.push_back(static_cast<std::size_t>(rng() % size()));
      b.null.push_back(has_nulls() && rng() % 8 == 0);
    }
    return b;
  }

  /// Calls fn with the batch in the filter API's form: (const Key*, n) via
  /// fn.integers(ptr, n), or fn.strings(string_keys<Offset>).
  template <class Fn>
  decltype(auto) with_keys(const id_batch& b, Fn&& fn) const {
    switch (type_) {
      case key_type::u32: {
        std::vector<std::uint32_t> keys;
        for (std::size_t id : b.ids) keys.push_back(u32_[id]);
        return fn.integers(keys.data(), keys.size());
      }
      case key_type::u64: {
        std::vector<std::uint64_t> keys;
        for (std::size_t id : b.ids) keys.push_back(u64_[id]);
        return fn.integers(keys.data(), keys.size());
      }
      case key_type::str32_with_nulls: {
        string_batch<std::int32_t> s = strings_of<std::int32_t>(b);
        return fn.strings(s.keys());
      }
      case key_type::str64:
      default: {
        string_batch<std::int64_t> s = strings_of<std::int64_t>(b);
        return fn.strings(s.keys());
      }
    }
  }

 private:
  template <class Offset>
  string_batch<Offset> strings_of(const id_batch& b) const {
    string_batch<Offset> s;
    for (std::size_t id : b.ids) s.push(strings_[id]);
    for (std::size_t i = 0; i < b.ids.size(); ++i)
      if (b.null[i]) s.set_null(i);
    return s;
  }

  key_type type_;
  std::vector<std::uint32_t> u32_;
  std::vector<std::uint64_t> u64_;
  std::vector<std::string> strings_;
};

/// The operations a batch can run.
enum class batch_op { add, remove, remove_unchecked };

/// The filter calls of apply, contains_of and approximate_counts_of, as
/// with_keys visitors (namespace scope: a local class cannot have member templates).
struct apply_call {
  counting_filter& f;
  batch_op op;
  bool* removed;
  template <class Key>
  remove_report integers(const Key* keys, std::size_t n) {
    if (op == batch_op::add) f.add(keys, n);
    if (op == batch_op::remove_unchecked) f.remove_unchecked(keys, n);
    if (op != batch_op::remove) return {};
    return removed != nullptr ? f.remove_with_status(keys, n, removed) : f.remove(keys, n);
  }
  template <class Offset>
  remove_report strings(const string_keys<Offset>& keys) {
    if (op == batch_op::add) f.add(keys);
    if (op == batch_op::remove_unchecked) f.remove_unchecked(keys);
    if (op != batch_op::remove) return {};
    return removed != nullptr ? f.remove_with_status(keys, removed) : f.remove(keys);
  }
};

struct contains_call {
  const counting_filter& f;
  bool* found;
  template <class Key>
  void integers(const Key* k, std::size_t n) {
    f.contains(k, n, found);
  }
  template <class Offset>
  void strings(const string_keys<Offset>& keys) {
    f.contains(keys, found);
  }
};

struct approximate_count_call {
  const counting_filter& f;
  std::uint8_t* counts;
  template <class Key>
  void integers(const Key* k, std::size_t n) {
    f.approximate_count(k, n, counts);
  }
  template <class Offset>
  void strings(const string_keys<Offset>& keys) {
    f.approximate_count(keys, counts);
  }
};

/// Runs `op` on `f` with the batch; removed[i] (remove only) gets each key's outcome.
inline remove_report apply(counting_filter& f, const key_universe& u, const id_batch& b,
                           batch_op op, bool* removed) {
  return u.with_keys(b, apply_call{f, op, removed});
}

/// found[i] for the batch.
inline std::vector<bool> contains_of(const counting_filter& f, const key_universe& u,
                                     const id_batch& b) {
  auto found = bools(b.ids.size());
  u.with_keys(b, contains_call{f, found.get()});
  return as_vector(found.get(), b.ids.size());
}

/// approximate_count for the batch.
inline std::vector<std::uint8_t> approximate_counts_of(const counting_filter& f,
                                                       const key_universe& u, const id_batch& b) {
  std::vector<std::uint8_t> counts(b.ids.size() + 1, 0xee);  // one guard entry
  u.with_keys(b, approximate_count_call{f, counts.data()});
  EXPECT_EQ(counts.back(), 0xee) << "approximate_count wrote past the batch";
  counts.pop_back();
  return counts;
}

/// The counting filter as the tests model it.
class counting_model {
 public:
  counting_model(const layout& l, std::uint32_t counter_bits, const key_universe& u)
      : l_(l), c_(counter_bits), max_((1u << counter_bits) - 1), net_(u.size(), 0) {
    for (std::size_t id = 0; id < u.size(); ++id) hashes_.push_back(u.hash(id, l.seed));
  }

  /// Applies a batch key by key in batch order; returns the model's removed[i]
  /// (remove) or nothing, and the refusals.
  std::vector<bool> apply(const id_batch& b, batch_op op, std::uint64_t* refused = nullptr) {
    std::vector<bool> removed(b.ids.size(), false);
    std::uint64_t refusals = 0;
    for (std::size_t i = 0; i < b.ids.size(); ++i) {
      if (b.null[i]) continue;
      const std::size_t id = b.ids[i];
      if (op == batch_op::add) {
        for_each_counter(id, [&](std::uint32_t& c) { c += c < max_ ? 1 : 0; });
        ++net_[id];
      } else {
        const bool present = contains(id);
        if (op == batch_op::remove && !present) {
          ++refusals;
          continue;
        }
        if (net_[id] == 0) removed_absent_ = true;  // a false positive (or unchecked) removal
        for_each_counter(id, [&](std::uint32_t& c) { c -= c > 0 && c < max_ ? 1 : 0; });
        net_[id] -= net_[id] > 0 ? 1 : 0;
        removed[i] = true;
      }
    }
    if (refused != nullptr) *refused = refusals;
    return removed;
  }

  bool contains(std::size_t id) const {
    bool all = true;
    const_cast<counting_model*>(this)->for_each_counter(id, [&](std::uint32_t& c) { all &= c > 0; });
    return all;
  }

  std::uint32_t minimum(std::size_t id) const {
    std::uint32_t least = max_;
    const_cast<counting_model*>(this)->for_each_counter(
        id, [&](std::uint32_t& c) { least = c < least ? c : least; });
    return least;
  }

  /// The counter words, laid out as docs/counting.md states.
  std::vector<std::uint32_t> counter_words() const {
    const std::uint32_t per_word = 32 / c_;
    std::vector<std::uint32_t> words(l_.num_words() * c_, 0);
    for (const auto& [bit_index, value] : counters_) {
      const std::uint64_t plain_word = bit_index / 32;  // block * W + w
      const auto bit = static_cast<std::uint32_t>(bit_index % 32);
      words[plain_word * c_ + bit / per_word] |= value << ((bit % per_word) * c_);
    }
    return words;
  }

  /// The projection: bit set where a counter is nonzero.
  std::vector<std::uint32_t> projection_words() const {
    std::vector<std::uint32_t> words(l_.num_words(), 0);
    for (const auto& [bit_index, value] : counters_)
      if (value != 0) words[bit_index / 32] |= 1u << (bit_index % 32);
    return words;
  }

  std::uint64_t saturated() const {
    std::uint64_t n = 0;
    for (const auto& entry : counters_) n += entry.second == max_ ? 1 : 0;
    return n;
  }

  /// Net adds of key `id`.
  std::uint64_t net(std::size_t id) const { return net_[id]; }
  /// Whether some removal took a key whose net count was 0 (it decremented other keys' counters).
  bool removed_absent() const { return removed_absent_; }
  std::uint32_t counter_max() const { return max_; }

 private:
  template <class Fn>
  void for_each_counter(std::size_t id, const Fn& fn) {
    const std::uint64_t h = hashes_[id];
    const std::uint64_t block = block_index(h, l_.num_blocks);
    for (std::uint32_t w = 0; w < l_.words_per_block; ++w) {
      const std::uint32_t mask = word_mask(h, w, l_.words_per_block, l_.bits_per_key);
      for (std::uint32_t bit = 0; bit < 32; ++bit)
        if ((mask >> bit) & 1u) fn(counters_[(block * l_.words_per_block + w) * 32 + bit]);
    }
  }

  layout l_;
  std::uint32_t c_;
  std::uint32_t max_;
  std::vector<std::uint64_t> hashes_;
  std::map<std::uint64_t, std::uint32_t> counters_;  // plain bit index -> counter
  std::vector<std::uint64_t> net_;
  bool removed_absent_ = false;
};

}  // namespace gbf::test
