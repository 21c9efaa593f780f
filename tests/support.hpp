// Helpers shared by the test files (host code only: every test binary, with or
// without CUDA, can include it). GPU helpers live in tests/gpu/gpu_test.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gbf/backend.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"

namespace gbf::test {

/// `n` keys drawn from mt19937_64(seed): reproducible, and distinct with
/// overwhelming probability for 64-bit keys.
template <class Key = std::uint64_t>
std::vector<Key> random_keys(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Key> keys(n);
  for (Key& key : keys) key = static_cast<Key>(rng());
  return keys;
}

/// A random Arrow validity bitmap for `n` keys (about half of them null).
inline std::vector<std::uint8_t> random_validity(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> bits((n + 7) / 8);
  for (std::uint8_t& byte : bits) byte = static_cast<std::uint8_t>(rng());
  return bits;
}

/// Probes for a filter holding `added`: the even ones are added keys, the odd
/// ones random (absent but for false positives).
template <class Key>
std::vector<Key> probes_for(const std::vector<Key>& added, std::size_t n, std::uint64_t seed) {
  std::vector<Key> probes = random_keys<Key>(n, seed);
  for (std::size_t i = 0; i < n; i += 2) probes[i] = added[(i / 2) % added.size()];
  return probes;
}

/// A zeroed host array of `n` bools: results need a bool*, which std::vector<bool> lacks.
inline std::unique_ptr<bool[]> bools(std::size_t n) {
  return std::unique_ptr<bool[]>(new bool[n]());
}

/// The first `n` answers as a vector, for whole-array comparisons.
inline std::vector<bool> as_vector(const bool* answers, std::size_t n) {
  return std::vector<bool>(answers, answers + n);
}

/// Index of the first differing answer of a and b, or n when they agree.
inline std::size_t first_difference(const bool* a, const bool* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return i;
  }
  return n;
}

/// Options of a CPU filter: `threads` workers (0: all hardware threads), kernel `simd`.
inline options on_cpu(unsigned threads = 0, cpu_simd simd = cpu_simd::automatic) {
  options opts;
  opts.where = backend::cpu;
  opts.cpu_threads = threads;
  opts.simd = simd;
  return opts;
}

/// A layout of W words per block, k bits per key, `num_blocks` blocks and `seed`.
inline layout layout_of(std::uint32_t w, std::uint32_t k, std::uint64_t num_blocks,
                        std::uint64_t seed = 0) {
  layout l;
  l.words_per_block = w;
  l.bits_per_key = k;
  l.num_blocks = num_blocks;
  l.seed = seed;
  return l;
}

/// `l` with `num_blocks` blocks.
inline layout with_blocks(layout l, std::uint64_t num_blocks) {
  l.num_blocks = num_blocks;
  return l;
}

/// Every geometry the layout sweeps cover: each W with k in {W, W+1, 2W, 32}
/// (within [W, 32]), a nonzero seed per geometry, one block (callers resize).
inline std::vector<layout> all_geometries() {
  std::vector<layout> geometries;
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    std::vector<std::uint32_t> ks = {w, w + 1, 2 * w, max_bits_per_key};
    std::sort(ks.begin(), ks.end());
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
    for (std::uint32_t k : ks) {
      if (k > max_bits_per_key) continue;
      geometries.push_back(layout_of(w, k, 1, 0x5eed0000u + w * 64 + k));
    }
  }
  return geometries;
}

/// "W8k8": a layout's geometry, short enough for test names and traces.
inline std::string short_name(const layout& l) {
  return "W" + std::to_string(l.words_per_block) + "k" + std::to_string(l.bits_per_key);
}

/// "W8k8 blocks=1000": the geometry and the block count.
inline std::string name_of(const layout& l) {
  return short_name(l) + " blocks=" + std::to_string(l.num_blocks);
}

/// The message of the gbf::error that `fn` throws, or "(no error)".
/// The contract of the slice copies (filter::copy_words, counting_filter::
/// copy_counters, cuckoo_filter::copy_words): copy(first, count, out) gives
/// all[first, first + count) for slices at both ends, inside and empty, and
/// throws invalid_argument for a slice past the end or a null `out`.
template <class Copy>
void expect_slices_of(const std::vector<std::uint32_t>& all, Copy&& copy) {
  const std::uint64_t n = all.size();
  ASSERT_GT(n, 2000u);
  for (const auto& [first, count] : {std::pair<std::uint64_t, std::uint64_t>{0, n}, {0, 1}, {n - 3, 3},
                                     {17, 1000}, {n / 2, n - n / 2}, {n, 0}}) {
    std::vector<std::uint32_t> slice(count + 1, 0xdeadbeefu);
    copy(first, count, slice.data());
    EXPECT_TRUE(std::equal(slice.begin(), slice.begin() + static_cast<std::ptrdiff_t>(count),
                           all.begin() + static_cast<std::ptrdiff_t>(first)))
        << first << "+" << count;
    EXPECT_EQ(slice[count], 0xdeadbeefu) << "wrote past the slice " << first << "+" << count;
  }
  std::uint32_t word = 0;
  EXPECT_THROW(copy(n, 1, &word), invalid_argument);
  EXPECT_THROW(copy(1, n, &word), invalid_argument);
  EXPECT_THROW(copy(~std::uint64_t{0}, 2, &word), invalid_argument);
  EXPECT_THROW(copy(0, 1, nullptr), invalid_argument);
}

inline std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

/// The 32-byte SBBF parquet-mr/Spark wrote for the strings "a0".."a9" (the fixture
/// arrow-rs tests its reader with): the default layout with one block.
inline const std::vector<std::uint8_t>& parquet_a0_to_a9() {
  static const std::vector<std::uint8_t> bytes = {200, 1,   80, 20,  64, 68, 8,   109,
                                                  6,   37,  4,  67,  144, 80, 96, 32,
                                                  8,   132, 43, 33,  0,  5,  99,  65,
                                                  2,   0,   224, 44, 64, 78, 96,  4};
  return bytes;
}

/// The rows f.select picks from host `keys` (with an optional host bitmap),
/// checking that it writes no more than it reports.
template <class Key>
std::vector<std::uint64_t> selected_rows(const filter& f, const std::vector<Key>& keys,
                                         const std::uint8_t* validity = nullptr) {
  std::vector<std::uint64_t> rows(keys.size() + 1, ~std::uint64_t{0});
  const std::uint64_t n = validity == nullptr
                              ? f.select(keys.data(), keys.size(), rows.data())
                              : f.select(keys.data(), keys.size(), validity, rows.data());
  EXPECT_LE(n, keys.size());
  EXPECT_EQ(rows[keys.size()], ~std::uint64_t{0}) << "select wrote past n rows";
  rows.resize(n);
  return rows;
}

/// A string of `len` random bytes (any byte: non-ASCII, NULs).
inline std::string random_string(std::mt19937_64& rng, std::size_t len) {
  std::string s(len, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

/// A batch of strings in the Arrow layout, owning its buffers.
template <class Offset>
struct string_batch {
  std::vector<unsigned char> data;
  std::vector<Offset> offsets{0};
  std::vector<std::uint8_t> validity;  // empty: no bitmap
  std::vector<std::string> values;     // the keys, for reference

  void push(const std::string& s) {
    data.insert(data.end(), s.begin(), s.end());
    offsets.push_back(static_cast<Offset>(data.size()));
    values.push_back(s);
  }
  std::size_t size() const { return values.size(); }
  /// Marks key i null (allocating an all-valid bitmap on first use).
  void set_null(std::size_t i) {
    if (validity.empty()) validity.assign((size() + 7) / 8 + 1, 0xff);
    validity[i / 8] = static_cast<std::uint8_t>(validity[i / 8] & ~(1u << (i % 8)));
  }
  bool valid(std::size_t i) const {
    return validity.empty() || ((validity[i / 8] >> (i % 8)) & 1u) != 0;
  }
  string_keys<Offset> keys() const {
    string_keys<Offset> k;
    k.data = data.data();
    k.data_bytes = data.size();
    k.offsets = offsets.data();
    k.count = size();
    k.validity = validity.empty() ? nullptr : validity.data();
    return k;
  }
};

/// A mixed-length batch: empty, 1, 7/8/9, 31/32/33, 255/256/257 and 4 KiB strings,
/// non-ASCII bytes and embedded NULs, among `short_keys` random short strings, some
/// long ones, and (with_mib) two strings of about 1 MiB.
template <class Offset>
string_batch<Offset> mixed_batch(std::size_t short_keys, std::uint64_t seed, bool with_mib = true) {
  std::mt19937_64 rng(seed);
  string_batch<Offset> b;
  const std::size_t special[] = {0, 1, 7, 8, 9, 31, 32, 33, 255, 256, 257, 4096};
  for (std::size_t len : special) b.push(random_string(rng, len));
  b.push(std::string("\0a\0b\0", 5));
  b.push("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  b.push("");
  for (std::size_t i = 0; i < short_keys; ++i) {
    b.push(random_string(rng, rng() % 40));
    if (i % 997 == 0) b.push(random_string(rng, 300 + rng() % 3000));  // some long ones
    if (with_mib && i == short_keys / 2) b.push(random_string(rng, std::size_t{1} << 20));
  }
  if (with_mib) b.push(random_string(rng, (std::size_t{1} << 20) + 13));
  return b;
}

/// What a filter did with a string batch: the bits, add_new's answers, and
/// contains and count of a second batch.
struct string_outcome {
  std::vector<std::uint32_t> words;
  std::vector<bool> is_new;
  std::vector<bool> found;
  std::uint64_t count = 0;
};

/// add_new of `b`, then contains and count of `queries` (host batches), on a filter
/// of layout `l` built with `o`; checks that a plain add of `b` sets the same bits.
template <class Offset>
string_outcome run_string_filter(const layout& l, const options& o, const string_batch<Offset>& b,
                                 const string_batch<Offset>& queries) {
  filter f(l, o);
  string_outcome out;
  auto is_new = bools(b.size());
  f.add_new(b.keys(), is_new.get());
  out.is_new = as_vector(is_new.get(), b.size());
  auto found = bools(queries.size());
  f.contains(queries.keys(), found.get());
  out.found = as_vector(found.get(), queries.size());
  out.count = f.count(queries.keys());
  out.words = f.words();
  filter g(l, o);
  g.add(b.keys());
  EXPECT_EQ(g.words(), out.words) << "add and add_new set different bits";
  return out;
}

/// Every synchronous operation refuses `keys` with invalid_argument saying `says`,
/// and leaves `f` unchanged. `results` (room for keys.count answers) lives where
/// the keys do.
template <class Offset>
void expect_rejected(filter& f, const string_keys<Offset>& keys, const std::string& says,
                     bool* results) {
  const std::vector<std::uint32_t> before = f.words();
  const std::uint64_t keys_added = f.stats().keys_added;
  const auto expect_message = [&](auto&& call, const char* op) {
    try {
      call();
      ADD_FAILURE() << op << " accepted a bad batch (expected: " << says << ")";
    } catch (const invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos)
          << op << ": \"" << e.what() << "\" does not say \"" << says << "\"";
    }
  };
  expect_message([&] { f.add(keys); }, "add");
  expect_message([&] { f.add_new(keys, results); }, "add_new");
  expect_message([&] { f.contains(keys, results); }, "contains");
  expect_message([&] { (void)f.count(keys); }, "count");
  EXPECT_EQ(f.words(), before) << "a rejected batch changed the filter";
  EXPECT_EQ(f.stats().keys_added, keys_added);
}

}  // namespace gbf::test
