// gbf::scaling_filter on the CPU: the bulk add is exactly the one-key-at-a-time
// chain of RedisBloom (checked against a reference built from plain gbf::filter
// levels), for every layout, batch size, repeats, nulls and string keys; thread
// counts do not change a bit; non-scaling refusal leaves the chain unchanged;
// stats, merge, copies and argument errors. The FPR as the chain grows is in
// test_scaling_promises.cpp; files in tests/io/test_scaling_io.cpp; the GPU in
// tests/gpu/test_gpu_scaling.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gbf/filter.hpp"
#include "gbf/scaling_filter.hpp"
#include "host/filter_access.hpp"
#include "host/scaling_backend.hpp"
#include "tests/support.hpp"

namespace gbf {
namespace {

using test::bools;
using test::message_of;
using test::on_cpu;
using test::random_keys;

// The chain as RedisBloom's SBChain_Add builds it, one key at a time, from
// plain gbf filters sized by the rule written out again here: level i takes
// initial * expansion^i keys at fpp (1 - r) r^i (non-scaling: fpp).
class reference_chain {
 public:
  explicit reference_chain(const scaling_config& c) : c_(c) { open(); }

  /// Inserts `key` when it is new to the chain; returns whether it was.
  template <class Insert, class Contains>
  bool add(const Insert& insert, const Contains& contains) {
    for (const filter& level : levels_)
      if (contains(level)) return false;
    if (keys_.back() >= levels_.back().capacity()) open();
    const bool is_new = insert(levels_.back());
    EXPECT_TRUE(is_new) << "a key absent from every level was not new in the newest";
    ++keys_.back();
    return is_new;
  }
  bool add(std::uint64_t key) {
    return add([key](filter& f) { bool b = false; f.add_new(&key, 1, &b); return b; },
               [key](const filter& f) { bool b = false; f.contains(&key, 1, &b); return b; });
  }
  bool add(const std::string& key) {
    const std::int64_t offsets[2] = {0, static_cast<std::int64_t>(key.size())};
    const string_keys<std::int64_t> k{key.data(), key.size(), offsets, 1, nullptr};
    return add([&](filter& f) { bool b = false; f.add_new(k, &b); return b; },
               [&](const filter& f) { bool b = false; f.contains(k, &b); return b; });
  }

  const std::vector<filter>& levels() const { return levels_; }
  const std::vector<std::uint64_t>& keys() const { return keys_; }

 private:
  void open() {
    const std::size_t i = levels_.size();
    const double fpp = c_.policy.non_scaling || c_.policy.tightening == 1
                           ? c_.fpp
                           : c_.fpp * (1 - c_.policy.tightening) *
                                 std::pow(c_.policy.tightening, static_cast<double>(i));
    const auto capacity = static_cast<std::uint64_t>(
        static_cast<double>(c_.initial_capacity) * std::pow(c_.policy.expansion, i));
    levels_.push_back(filter::create(capacity, fpp, on_cpu(1), c_.s));
    keys_.push_back(0);
  }

  scaling_config c_;
  std::vector<filter> levels_;
  std::vector<std::uint64_t> keys_;
};

scaling_config config_of(std::uint64_t initial, double fpp, shape s = {},
                         std::uint32_t expansion = 2, double tightening = 0.5) {
  scaling_config c;
  c.initial_capacity = initial;
  c.fpp = fpp;
  c.policy.expansion = expansion;
  c.policy.tightening = tightening;
  c.s = s;
  return c;
}

// The chain holds the reference's levels: same layouts, keys and bits.
void expect_same_chain(const scaling_filter& f, const reference_chain& ref, const std::string& what) {
  ASSERT_EQ(f.levels().size(), ref.levels().size()) << what;
  for (std::size_t i = 0; i < ref.levels().size(); ++i) {
    EXPECT_EQ(f.levels()[i].l, ref.levels()[i].layout()) << what << " level " << i;
    EXPECT_EQ(f.levels()[i].keys, ref.keys()[i]) << what << " level " << i;
    EXPECT_EQ(f.levels()[i].capacity, ref.levels()[i].capacity()) << what << " level " << i;
    EXPECT_TRUE(f.level_words(i) == ref.levels()[i].words()) << what << " level " << i << " bits";
  }
}

// Keys from a small range, so that batches repeat keys and keys of earlier batches.
std::vector<std::uint64_t> keys_with_repeats(std::size_t n, std::uint64_t range, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> keys(n);
  for (auto& k : keys) k = rng() % range;
  return keys;
}

TEST(ScalingFilter, BulkAddIsTheOneKeyAtATimeChainForEveryLayout) {
  for (const layout& g : test::all_geometries()) {
    const scaling_config c = config_of(100, 0.02, {g.words_per_block, g.bits_per_key, g.seed});
    scaling_filter f = scaling_filter::create(c, on_cpu(2));
    reference_chain ref(c);
    const auto keys = keys_with_repeats(6'000, 4'000, g.bits_per_key);
    std::size_t done = 0;
    for (std::size_t batch : {1u, 7u, 350u, 1200u, 4442u}) {
      auto is_new = bools(batch);
      const std::uint64_t inserted = f.add_new(keys.data() + done, batch, is_new.get());
      std::uint64_t expected = 0;
      for (std::size_t i = 0; i < batch; ++i) {
        const bool want = ref.add(keys[done + i]);
        expected += want;
        ASSERT_EQ(is_new[i], want) << test::short_name(g) << " key " << done + i;
      }
      EXPECT_EQ(inserted, expected) << test::short_name(g);
      done += batch;
    }
    expect_same_chain(f, ref, test::short_name(g));
    EXPECT_GE(f.levels().size(), 4u) << "the test should grow several levels";
    EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size()) << "false negatives";
  }
}

TEST(ScalingFilter, HeavilyRepeatedKeysAreInsertedOnceAndFillLevelsExactly) {
  // Runs of 50 copies (the deduplication path), then one key repeated 100k times.
  const scaling_config c = config_of(64, 0.01);
  scaling_filter f = scaling_filter::create(c, on_cpu(2));
  reference_chain ref(c);
  std::vector<std::uint64_t> keys;
  for (std::uint64_t k = 0; k < 2'000; ++k) keys.insert(keys.end(), 50, k * 7919);
  keys.insert(keys.end(), 100'000, 123456789);
  auto is_new = bools(keys.size());
  const std::uint64_t inserted = f.add_new(keys.data(), keys.size(), is_new.get());
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const bool want = ref.add(keys[i]);
    expected += want;
    ASSERT_EQ(is_new[i], want) << "key " << i;
  }
  EXPECT_EQ(inserted, expected);
  EXPECT_LE(inserted, 2'001u);
  expect_same_chain(f, ref, "repeats");
}

TEST(ScalingFilter, StringKeysAndNullsFollowTheSameRule) {
  const scaling_config c = config_of(50, 0.05, {8, 8, 3});
  scaling_filter f = scaling_filter::create(c, on_cpu(2));
  reference_chain ref(c);
  auto batch = test::mixed_batch<std::int64_t>(3'000, 9, /*with_mib=*/false);
  for (std::size_t i = 0; i < 300; ++i) batch.push(batch.values[i]);  // repeats
  for (std::size_t i = 0; i < batch.size(); i += 11) batch.set_null(i);
  auto is_new = bools(batch.size());
  f.add_new(batch.keys(), is_new.get());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const bool want = batch.valid(i) && ref.add(batch.values[i]);
    ASSERT_EQ(is_new[i], want) << "string " << i;
  }
  expect_same_chain(f, ref, "strings");
  auto found = bools(batch.size());
  f.contains(batch.keys(), found.get());
  for (std::size_t i = 0; i < batch.size(); ++i)
    EXPECT_EQ(found[i], batch.valid(i) ? true : false) << "string " << i;
  std::uint64_t valid = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) valid += batch.valid(i);
  EXPECT_EQ(f.count(batch.keys()), valid);
}

TEST(ScalingFilter, SelectSkipsNullRows) {
  scaling_filter f = scaling_filter::create(100, 0.01, {}, on_cpu(2));
  const auto keys = random_keys(5'000, 5);
  f.add(keys.data(), keys.size());
  const auto validity = test::random_validity(keys.size(), 6);
  std::vector<std::uint64_t> rows(keys.size());
  const std::uint64_t n = f.select(keys.data(), keys.size(), validity.data(), rows.data());
  std::vector<std::uint64_t> expected;
  for (std::size_t i = 0; i < keys.size(); ++i)
    if ((validity[i / 8] >> (i % 8)) & 1) expected.push_back(i);
  rows.resize(n);
  EXPECT_EQ(rows, expected);
}

TEST(ScalingFilter, ThreadCountsGiveTheSameLevelsBitsAndAnswers) {
  // Batches past 2 * 2^16 keys split over threads (probes by key range, add_new by block).
  const auto keys = keys_with_repeats(700'000, 600'000, 77);
  std::vector<std::vector<std::uint32_t>> first_bits;
  std::vector<bool> first_new;
  std::vector<scaling_level> first_levels;
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    for (cpu_simd simd : {cpu_simd::scalar, cpu_simd::automatic}) {
      scaling_filter f = scaling_filter::create(20'000, 0.01, {}, on_cpu(threads, simd));
      auto is_new = bools(keys.size());
      f.add_new(keys.data(), 300'000, is_new.get());
      f.add_new(keys.data() + 300'000, keys.size() - 300'000, is_new.get() + 300'000);
      std::vector<std::vector<std::uint32_t>> bits;
      for (std::size_t i = 0; i < f.levels().size(); ++i) bits.push_back(f.level_words(i));
      const std::vector<bool> answers = test::as_vector(is_new.get(), keys.size());
      if (first_bits.empty()) {
        first_bits = bits;
        first_new = answers;
        first_levels = f.levels();
        EXPECT_GE(f.levels().size(), 5u);
        continue;
      }
      ASSERT_EQ(f.levels().size(), first_levels.size()) << threads << " threads";
      for (std::size_t i = 0; i < first_levels.size(); ++i)
        EXPECT_EQ(f.levels()[i].keys, first_levels[i].keys) << threads << " threads, level " << i;
      EXPECT_TRUE(bits == first_bits) << threads << " threads: different bits";
      EXPECT_TRUE(answers == first_new) << threads << " threads: different is_new";
    }
  }
}

TEST(ScalingFilter, ContainsCountAndSelectAgreeAndFindEveryKey) {
  scaling_filter f = scaling_filter::create(1'000, 0.01, {}, on_cpu(2));
  const auto keys = random_keys(150'000, 11);
  f.add(keys.data(), keys.size());
  const auto probes = test::probes_for(keys, 300'000, 12);
  auto found = bools(probes.size());
  f.contains(probes.data(), probes.size(), found.get());
  std::uint64_t hits = 0;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    hits += found[i];
    if (i % 2 == 0) {
      ASSERT_TRUE(found[i]) << "false negative at probe " << i;
    }
  }
  EXPECT_EQ(f.count(probes.data(), probes.size()), hits);
  std::vector<std::uint64_t> rows(probes.size());
  const std::uint64_t n = f.select(probes.data(), probes.size(), rows.data());
  ASSERT_EQ(n, hits);
  std::size_t r = 0;
  for (std::size_t i = 0; i < probes.size(); ++i)
    if (found[i]) {
      EXPECT_EQ(rows[r++], i);
    }
  EXPECT_TRUE(f.verify_contains(probes.data(), probes.size(), found.get()).ok());
}

TEST(ScalingFilter, LevelsFollowTheRuleAndStatsAreRedisBloomsInfo) {
  scaling_filter f = scaling_filter::create(1'000, 0.01, {}, on_cpu(2));
  const auto keys = random_keys(10'000, 21);
  // Distinct keys are all new but for the chain's false positives (FPR < 1%: at
  // most 100 expected, 150 is 5 standard deviations above).
  const std::uint64_t inserted = f.add(keys.data(), keys.size());
  EXPECT_LE(inserted, keys.size());
  EXPECT_GE(inserted, keys.size() - 150);
  // 1,000 + 2,000 + 4,000 = 7,000 < ~10,000 <= 15,000: four levels.
  ASSERT_EQ(f.levels().size(), 4u);
  const std::uint64_t capacities[] = {1'000, 2'000, 4'000, 8'000};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f.levels()[i].capacity, capacities[i]);
    EXPECT_DOUBLE_EQ(f.levels()[i].fpp, 0.01 * 0.5 * std::pow(0.5, static_cast<double>(i)));
    EXPECT_EQ(f.levels()[i].l, size_for(capacities[i], f.levels()[i].fpp));
  }
  EXPECT_EQ(f.levels()[3].keys, inserted - 7'000);
  const scaling_stats s = f.stats();
  EXPECT_EQ(s.capacity, 15'000u);
  EXPECT_EQ(s.num_levels, 4u);
  EXPECT_EQ(s.keys_inserted, inserted);
  EXPECT_EQ(f.keys_inserted(), inserted);
  EXPECT_EQ(s.expansion, 2u);
  std::uint64_t bytes = 0;
  double none = 1, sum = 0;
  for (const scaling_level_stats& level : s.levels) {
    bytes += level.level.l.size_bytes();
    EXPECT_EQ(level.bits_set, [&] {
      std::uint64_t bits = 0;
      for (std::uint32_t w : f.level_words(&level - s.levels.data())) bits += __builtin_popcount(w);
      return bits;
    }());
    EXPECT_LE(level.fpr, level.level.fpp * 1.0000001);
    none *= 1 - level.fpr;
    sum += level.fpr;
  }
  EXPECT_EQ(s.size_bytes, bytes);
  EXPECT_DOUBLE_EQ(s.compound_fpr, 1 - none);
  EXPECT_LE(s.compound_fpr, sum);
  EXPECT_LT(sum, 0.01);
}

TEST(ScalingFilter, ExpansionAndTighteningShapeTheLevels) {
  scaling_config c = config_of(500, 0.001, {16, 16, 9}, 4, 0.8);
  scaling_filter f = scaling_filter::create(c, on_cpu(2));
  reference_chain ref(c);
  const auto keys = random_keys(20'000, 31);
  f.add(keys.data(), keys.size());
  for (std::uint64_t k : keys) ref.add(k);
  expect_same_chain(f, ref, "expansion 4, r 0.8");
  ASSERT_EQ(f.levels().size(), 4u);  // 500 + 2,000 + 8,000 < 20,000 <= + 32,000
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f.levels()[i].capacity, 500u << (2 * i));
    EXPECT_DOUBLE_EQ(f.levels()[i].fpp, 0.001 * 0.2 * std::pow(0.8, static_cast<double>(i)));
  }
}

TEST(ScalingFilter, ExpansionOneKeepsEveryLevelTheSameCapacity) {
  scaling_filter f = scaling_filter::create(300, 0.01, {1, 0.5, false}, on_cpu(2));
  const auto keys = random_keys(1'000, 32);
  f.add(keys.data(), keys.size());
  ASSERT_EQ(f.levels().size(), 4u);
  for (const scaling_level& level : f.levels()) EXPECT_EQ(level.capacity, 300u);
  EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size());
}

// ---------------------------------------------------------------------------
// Non-scaling chains
// ---------------------------------------------------------------------------

scaling_filter non_scaling(std::uint64_t capacity, double fpp = 0.01) {
  scaling_policy p;
  p.non_scaling = true;
  return scaling_filter::create(capacity, fpp, p, on_cpu(2));
}

struct snapshot {
  std::vector<scaling_level> levels;
  std::vector<std::uint32_t> bits;
  explicit snapshot(const scaling_filter& f) : levels(f.levels()), bits(f.level_words(0)) {}
  bool same_as(const scaling_filter& f) const {
    if (f.levels().size() != levels.size() || f.level_words(0) != bits) return false;
    return f.levels()[0].keys == levels[0].keys;
  }
};

TEST(ScalingFilter, NonScalingHasOneLevelAtTheWholeFpp) {
  scaling_filter f = non_scaling(1'000, 0.01);
  ASSERT_EQ(f.levels().size(), 1u);
  EXPECT_EQ(f.levels()[0].fpp, 0.01);
  EXPECT_EQ(f.levels()[0].l, size_for(1'000, 0.01));
  EXPECT_EQ(f.stats().expansion, 0u);  // RedisBloom answers nil for NONSCALING
}

// The new keys `batch` would bring to a one-level chain, from a plain filter
// with the level's bits (plain add_new is the sequential count).
std::uint64_t exact_new(const scaling_filter& f, const std::vector<std::uint64_t>& batch) {
  filter twin = filter::from_words(f.levels()[0].l, f.level_words(0).data(), on_cpu(1));
  auto is_new = bools(batch.size());
  twin.add_new(batch.data(), batch.size(), is_new.get());
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) n += is_new[i];
  return n;
}

// Adds `batch` to the non-scaling `f`, expecting acceptance exactly when its new
// keys fit; a refusal must leave levels and bits as they were.
void expect_exact_decision(scaling_filter& f, const std::vector<std::uint64_t>& batch,
                           const std::string& what) {
  const std::uint64_t room = f.levels()[0].capacity - f.levels()[0].keys;
  const std::uint64_t fresh = exact_new(f, batch);
  const snapshot before(f);
  if (fresh <= room) {
    EXPECT_EQ(f.add(batch.data(), batch.size()), fresh) << what;
    EXPECT_EQ(f.levels()[0].keys, before.levels[0].keys + fresh) << what;
  } else {
    try {
      f.add(batch.data(), batch.size());
      ADD_FAILURE() << what << ": accepted " << fresh << " new keys with room for " << room;
    } catch (const filter_full& e) {
      EXPECT_EQ(e.fits(), room) << what;
      const std::string message = e.what();
      EXPECT_NE(message.find("non scaling filter is full"), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(room) + " more fit"), std::string::npos) << message;
      EXPECT_NE(message.find("nothing was added"), std::string::npos) << message;
    }
    EXPECT_TRUE(before.same_as(f)) << what << ": a refused add changed the chain";
  }
  const std::uint64_t found = f.count(batch.data(), batch.size());
  if (fresh <= room) {
    EXPECT_EQ(found, batch.size()) << what << ": false negatives";
  }
}

TEST(ScalingFilter, NonScalingAcceptsExactlyWhatFitsAndRefusesTheRestUntouched) {
  scaling_filter f = non_scaling(1'000);
  const auto inserted = random_keys(990, 41);
  expect_exact_decision(f, inserted, "990 fresh keys");  // the cheapest test: size <= room
  const std::uint64_t room = 1'000 - f.levels()[0].keys;
  ASSERT_GE(room, 10u);

  // Tier 2: many keys, but only `room` of them absent.
  std::vector<std::uint64_t> mostly_present(inserted.begin(), inserted.begin() + 500);
  const auto fresh = random_keys(room, 42);
  mostly_present.insert(mostly_present.end(), fresh.begin(), fresh.begin() + room / 2);
  expect_exact_decision(f, mostly_present, "present keys and a few fresh ones");

  // Tier 3: the batch's absent keys outnumber the room, but they are repeats.
  const std::uint64_t left = 1'000 - f.levels()[0].keys;
  std::vector<std::uint64_t> repeats;
  const auto few = random_keys(left, 43);
  for (std::uint64_t k : few) repeats.insert(repeats.end(), 40, k);
  expect_exact_decision(f, repeats, "repeats of exactly the room's keys");

  // Full (or within a false positive or two of it): more fresh keys are refused.
  expect_exact_decision(f, random_keys(5, 44), "5 fresh keys into a full chain");
  expect_exact_decision(f, random_keys(3'000, 45), "3,000 fresh keys");
  expect_exact_decision(f, inserted, "keys already present");  // 0 new: accepted
}

TEST(ScalingFilter, NonScalingRefusalSaysHowManyFitAndDoesNotTouchIsNew) {
  scaling_filter f = non_scaling(100);
  const auto keys = random_keys(150, 51);
  auto is_new = bools(keys.size());
  try {
    f.add_new(keys.data(), keys.size(), is_new.get());
    FAIL() << "150 fresh keys fit in a chain of capacity 100";
  } catch (const filter_full& e) {
    EXPECT_EQ(e.fits(), 100u);
  }
  EXPECT_EQ(f.levels()[0].keys, 0u);
  for (std::uint32_t w : f.level_words(0)) ASSERT_EQ(w, 0u) << "a refused add set bits";
}

// ---------------------------------------------------------------------------
// Merge, copies, levels from parts
// ---------------------------------------------------------------------------

TEST(ScalingFilter, MergeOfChainsThatFitIsTheLevelwiseUnion) {
  const scaling_config c = config_of(1'000, 0.01);
  scaling_filter a = scaling_filter::create(c, on_cpu(2));
  scaling_filter b = scaling_filter::create(c, on_cpu(1));
  const auto ka = random_keys(400, 61);
  const auto kb = random_keys(500, 62);
  a.add(ka.data(), ka.size());
  b.add(kb.data(), kb.size());
  std::vector<std::uint32_t> expected = a.level_words(0);
  const std::vector<std::uint32_t> theirs = b.level_words(0);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] |= theirs[i];
  a.merge(b);
  EXPECT_EQ(a.level_words(0), expected);
  EXPECT_EQ(a.levels()[0].keys, 900u);  // counted as if the chains shared no key
  EXPECT_EQ(a.count(ka.data(), ka.size()), ka.size());
  EXPECT_EQ(a.count(kb.data(), kb.size()), kb.size());

  // An empty chain merged into a grown one, and a grown one into an empty one.
  scaling_filter grown = scaling_filter::create(c, on_cpu(2));
  const auto many = random_keys(5'000, 63);
  grown.add(many.data(), many.size());
  scaling_filter empty = scaling_filter::create(c, on_cpu(2));
  empty.merge(grown);
  ASSERT_EQ(empty.levels().size(), grown.levels().size());
  for (std::size_t i = 0; i < grown.levels().size(); ++i) {
    EXPECT_EQ(empty.level_words(i), grown.level_words(i));
    EXPECT_EQ(empty.levels()[i].keys, grown.levels()[i].keys);
  }
  const std::vector<scaling_level> before = grown.levels();
  grown.merge(scaling_filter::create(c, on_cpu(2)));
  EXPECT_EQ(grown.levels().size(), before.size());
  const std::uint64_t keys_before = grown.keys_inserted();
  grown.merge(grown);  // x | x
  EXPECT_EQ(grown.keys_inserted(), keys_before);
}

TEST(ScalingFilter, MergeThatWouldOverfillALevelIsRefusedAndChangesNothing) {
  const scaling_config c = config_of(1'000, 0.01);
  scaling_filter a = scaling_filter::create(c, on_cpu(2));
  scaling_filter b = scaling_filter::create(c, on_cpu(2));
  const auto ka = random_keys(3'000, 71);
  const auto kb = random_keys(3'000, 72);
  a.add(ka.data(), ka.size());
  b.add(kb.data(), kb.size());
  const std::vector<scaling_level> before = a.levels();
  const std::vector<std::uint32_t> bits = a.level_words(0);
  EXPECT_THROW(a.merge(b), filter_full);
  EXPECT_NE(message_of([&] { a.merge(b); }).find("capacity"), std::string::npos);
  ASSERT_EQ(a.levels().size(), before.size());
  EXPECT_EQ(a.level_words(0), bits);
  EXPECT_EQ(a.levels()[0].keys, before[0].keys);
}

// A CPU chain whose or_words fails on cue, as a GPU chain's does when its device
// staging cannot be allocated; it counts the levels it holds.
class failing_or_chain final : public detail::scaling_backend {
 public:
  explicit failing_or_chain(std::unique_ptr<detail::scaling_backend> chain) : chain_(std::move(chain)) {}
  std::size_t levels = 0;
  bool fail_or = true;

  backend kind() const noexcept override { return chain_->kind(); }
  void push_level(const layout& l) override { chain_->push_level(l); ++levels; }
  void pop_level() noexcept override { chain_->pop_level(); --levels; }
  std::uint64_t add(const detail::key_batch& keys, bool* is_new, const detail::call_options& call,
                    const scaling_config& config, std::vector<scaling_level>& chain_levels) override {
    return chain_->add(keys, is_new, call, config, chain_levels);
  }
  void contains(const detail::key_batch& keys, bool* found, const detail::call_options& call) const override {
    chain_->contains(keys, found, call);
  }
  std::uint64_t count(const detail::key_batch& keys, std::uint64_t* device_count,
                      const detail::call_options& call) const override {
    return chain_->count(keys, device_count, call);
  }
  std::uint64_t select(const detail::key_batch& keys, std::uint64_t* rows, std::uint64_t* device_count,
                       const detail::call_options& call) const override {
    return chain_->select(keys, rows, device_count, call);
  }
  std::uint64_t popcount(std::size_t level) const override { return chain_->popcount(level); }
  void read_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                  std::uint32_t* out) const override {
    chain_->read_words(level, first, count, out);
  }
  void write_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                   const std::uint32_t* in) override {
    chain_->write_words(level, first, count, in);
  }
  void or_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                const std::uint32_t* in) override {
    if (fail_or) throw allocation_error("injected: no device staging", 4u << 20);
    chain_->or_words(level, first, count, in);
  }
  void begin_trial() override { chain_->begin_trial(); }
  void end_trial(bool keep) noexcept override { chain_->end_trial(keep); }
  void synchronize(const char* what) const override { chain_->synchronize(what); }

 private:
  std::unique_ptr<detail::scaling_backend> chain_;
};

// A merge whose OR into a common level fails drops the levels it pushed: the
// chain's level list and its backend agree, and later adds grow it as a chain
// that never saw the merge (it once kept the pushed levels in the backend only,
// so the merged keys were found while uncounted, and the next level opened
// wrote into the other chain's full copy).
TEST(ScalingFilter, MergeThatFailsMidWayLeavesTheChainAsItWas) {
  const scaling_config c = config_of(1'000, 0.01);
  scaling_filter other = scaling_filter::create(c, on_cpu(1));
  const auto theirs = random_keys(1'500, 64);  // two levels
  other.add(theirs.data(), theirs.size());
  ASSERT_EQ(other.levels().size(), 2u);

  scaling_filter plain = scaling_filter::create(c, on_cpu(1));  // what the chain must stay like
  auto chain = std::make_unique<failing_or_chain>(detail::make_cpu_scaling(c.s, on_cpu(1), nullptr));
  failing_or_chain* injected = chain.get();
  chain->push_level(plain.levels()[0].l);
  scaling_filter ours = detail::filter_access::adopt_chain(c, plain.levels(), std::move(chain));

  EXPECT_THROW(ours.merge(other), allocation_error);
  EXPECT_EQ(ours.levels().size(), 1u);
  EXPECT_EQ(injected->levels, 1u);
  EXPECT_EQ(ours.keys_inserted(), 0u);
  EXPECT_EQ(ours.count(theirs.data(), theirs.size()), plain.count(theirs.data(), theirs.size()));

  const auto mine = random_keys(2'500, 65);  // grows to a second and a third level
  ours.add(mine.data(), mine.size());
  plain.add(mine.data(), mine.size());
  // (Levels an add opens go past the wrapper's count: compared by their words.)
  ASSERT_EQ(ours.levels().size(), plain.levels().size());
  for (std::size_t i = 0; i < plain.levels().size(); ++i) {
    EXPECT_EQ(ours.levels()[i].keys, plain.levels()[i].keys);
    EXPECT_EQ(ours.level_words(i), plain.level_words(i)) << "level " << i;
  }

  // The wrapper itself merges like the plain backend once its OR works.
  auto working = std::make_unique<failing_or_chain>(detail::make_cpu_scaling(c.s, on_cpu(1), nullptr));
  working->fail_or = false;
  working->push_level(plain.levels()[0].l);
  scaling_filter fresh = scaling_filter::create(c, on_cpu(1));
  scaling_filter adopted = detail::filter_access::adopt_chain(c, fresh.levels(), std::move(working));
  adopted.merge(other);
  ASSERT_EQ(adopted.levels().size(), other.levels().size());
  for (std::size_t i = 0; i < other.levels().size(); ++i)
    EXPECT_EQ(adopted.level_words(i), other.level_words(i)) << "level " << i;
}

TEST(ScalingFilter, MergeOfDifferentConfigsNamesTheDifference) {
  scaling_filter a = scaling_filter::create(config_of(1'000, 0.01), on_cpu(1));
  scaling_filter b = scaling_filter::create(config_of(1'000, 0.01, {}, 4), on_cpu(1));
  scaling_filter c = scaling_filter::create(config_of(1'000, 0.01, {8, 8, 5}), on_cpu(1));
  EXPECT_THROW(a.merge(b), layout_mismatch);
  EXPECT_NE(message_of([&] { a.merge(b); }).find("expansion 2 vs 4"), std::string::npos);
  EXPECT_NE(message_of([&] { a.merge(c); }).find("seed 0 vs 5"), std::string::npos);
}

// The chain's levels are plain filters: an AVX-512 request runs the plain AVX-512
// kernels, and throws with the CPU named where it has no AVX-512.
TEST(ScalingFilter, Avx512RequestRunsThePlainAvx512Kernels) {
  if (!cpu_has_avx512()) {
    EXPECT_THROW(scaling_filter::create(500, 0.02, {}, on_cpu(1, cpu_simd::avx512)), invalid_argument);
    return;
  }
  scaling_filter f = scaling_filter::create(500, 0.02, {}, on_cpu(1, cpu_simd::avx512));
  EXPECT_EQ(f.description(), "cpu (avx512, 1 thread)");
  scaling_filter scalar = scaling_filter::create(500, 0.02, {}, on_cpu(1, cpu_simd::scalar));
  const auto keys = random_keys(4'000, 83);
  f.add(keys.data(), keys.size());
  scalar.add(keys.data(), keys.size());
  ASSERT_EQ(f.levels().size(), scalar.levels().size());
  for (std::size_t i = 0; i < f.levels().size(); ++i) EXPECT_EQ(f.level_words(i), scalar.level_words(i));
}

TEST(ScalingFilter, CopyToAndFromLevelsKeepLevelsAndBits) {
  scaling_filter f = scaling_filter::create(500, 0.02, {}, on_cpu(2), {4, 6, 1});
  const auto keys = random_keys(4'000, 81);
  f.add(keys.data(), keys.size());
  const scaling_filter g = f.copy_to(backend::cpu, on_cpu(1, cpu_simd::scalar));
  ASSERT_EQ(g.levels().size(), f.levels().size());
  for (std::size_t i = 0; i < f.levels().size(); ++i) {
    EXPECT_EQ(g.level_words(i), f.level_words(i));
    EXPECT_EQ(g.levels()[i].keys, f.levels()[i].keys);
  }
  EXPECT_EQ(g.description(), "cpu (scalar, 1 thread)");
  // Growing the copy does not touch the original.
  const auto more = random_keys(10'000, 82);
  scaling_filter h = f.copy_to(backend::cpu);
  h.add(more.data(), more.size());
  EXPECT_GT(h.levels().size(), f.levels().size());
  EXPECT_EQ(f.keys_inserted(), g.keys_inserted());
}

TEST(ScalingFilter, FromLevelsRefusesChainsTheRuleCannotGrow) {
  scaling_filter f = scaling_filter::create(100, 0.01, {}, on_cpu(1));
  const auto keys = random_keys(500, 91);
  f.add(keys.data(), keys.size());
  std::vector<std::vector<std::uint32_t>> bits;
  std::vector<const std::uint32_t*> words;
  for (std::size_t i = 0; i < f.levels().size(); ++i) bits.push_back(f.level_words(i));
  for (const auto& b : bits) words.push_back(b.data());
  EXPECT_NO_THROW(scaling_filter::from_levels(f.config(), f.levels(), words, on_cpu(1)));

  const auto refused = [&](std::vector<scaling_level> levels, const char* says) {
    const std::string m = message_of([&] {
      scaling_filter::from_levels(f.config(), levels, words, on_cpu(1));
    });
    EXPECT_NE(m.find(says), std::string::npos) << m;
  };
  auto levels = f.levels();
  levels[1].capacity = 300;
  refused(levels, "is not initial * expansion^1 = 200");
  levels = f.levels();
  levels[0].keys = 99;
  refused(levels, "yet a newer level exists");
  levels = f.levels();
  levels.back().keys = levels.back().capacity + 1;
  refused(levels, "exceed its capacity");
  levels = f.levels();
  levels[0].l.seed = 3;
  refused(levels, "is not the chain's");
  levels = f.levels();
  levels[2].fpp *= 2;
  refused(levels, "is not the rule's");
  // A level smaller than its capacity and fpp need breaks the chain's bound.
  levels = f.levels();
  levels[1].l.num_blocks = 1;
  refused(levels, "level 1: 1 blocks give an FPR of");
  // One larger than needed is harmless, and taken.
  levels = f.levels();
  levels.back().l.num_blocks *= 2;
  std::vector<std::uint32_t> wider(levels.back().l.num_words(), 0);
  std::vector<const std::uint32_t*> with_wider = words;
  with_wider.back() = wider.data();
  EXPECT_NO_THROW(scaling_filter::from_levels(f.config(), levels, with_wider, on_cpu(1)));
  EXPECT_NE(message_of([&] {
              scaling_filter::from_levels(f.config(), f.levels(), {words[0]}, on_cpu(1));
            }).find("word arrays"),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// Arguments, limits, backends
// ---------------------------------------------------------------------------

TEST(ScalingFilter, BadConfigsAreRefusedNamingTheProblem) {
  const auto says = [](scaling_config c, const char* what) {
    const std::string m = message_of([&] { scaling_filter::create(c, on_cpu(1)); });
    EXPECT_NE(m.find(what), std::string::npos) << m;
  };
  says(config_of(0, 0.01), "initial capacity must be at least 1");
  says(config_of(10, 0), "fpp must be in (0, 1)");
  says(config_of(10, 1), "fpp must be in (0, 1)");
  says(config_of(10, std::nan("")), "fpp must be in (0, 1)");
  says(config_of(10, 0.01, {}, 0), "expansion must be at least 1");
  says(config_of(10, 0.01, {}, 2, 0), "tightening ratio must be in (0, 1]");
  says(config_of(10, 0.01, {}, 2, 1.5), "tightening ratio must be in (0, 1]");
  says(config_of(10, 0.01, {}, 2, std::nan("")), "tightening ratio must be in (0, 1]");
  says(config_of(10, 0.01, {8, 4, 0}), "bits_per_key must be at least words_per_block");
  says(config_of(10, 0.01, {3, 8, 0}), "words_per_block must be one of");
  says(config_of(std::uint64_t{1} << 62, 1e-9), "cannot open level 0");
  // The sizing message names the capacity and fpp once.
  const std::string m = message_of([&] { scaling_filter::create(config_of(10, 1e-300), on_cpu(1)); });
  const std::string phrase = "capacity 10 at fpp";
  ASSERT_NE(m.find(phrase), std::string::npos) << m;
  EXPECT_EQ(m.find(phrase, m.find(phrase) + 1), std::string::npos) << m;
}

TEST(ScalingFilter, LevelsThatCannotExistAreFilterFull) {
  scaling_config c = config_of(std::uint64_t{1} << 62, 0.01);
  EXPECT_EQ(detail::level_capacity(c, 1), std::uint64_t{1} << 63);
  EXPECT_EQ(detail::level_capacity(c, 2), 0u);  // past 2^64
  EXPECT_THROW(detail::plan_level(c, 2), filter_full);
  EXPECT_NE(message_of([&] { detail::plan_level(c, 2); }).find("passes 2^64"), std::string::npos);
  c = config_of(1, 0.01, {}, 1);
  EXPECT_NE(message_of([&] { detail::plan_level(c, 64); }).find("at most 64 levels"),
            std::string::npos);
  c.policy.tightening = 1e-200;
  EXPECT_NE(message_of([&] { detail::plan_level(c, 3); }).find("underflows"), std::string::npos);
}

// With expansion 1 every level holds the same keys at a target half the last, and
// (k fixed) past about one key per block each level doubled: a chain of capacity 1
// grew until the OOM killer ended it. Levels past 4096 bits per key do not open.
TEST(ScalingFilter, ALevelPastItsBitsPerKeyBoundIsFilterFullNotAnEndlessGrowth) {
  scaling_policy p;
  p.expansion = 1;
  scaling_filter f = scaling_filter::create(1, 0.01, p, on_cpu(1));
  std::uint64_t added = 0;
  std::string message;
  try {
    for (std::uint64_t i = 0; i < 200; ++i) {
      const std::uint64_t key = i * 2654435761u + 1;
      added += f.add(&key, 1);
    }
  } catch (const filter_full& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("bits per key with k = 8, more than 4096"), std::string::npos) << message;
  EXPECT_NE(message.find("(create the chain with a larger capacity or expansion, a tightening nearer 1, or a "
                         "larger k)"),
            std::string::npos)
      << message;
  // Level 0's target is fpp (1 - r): capacity and expansion do not change it, and
  // r nearer 1 makes it stricter, so the advice for it is another.
  const std::string first = message_of([] { scaling_filter::create(100, 1e-12, {}, on_cpu(1)); });
  EXPECT_NE(first.find("cannot open level 0 of the chain: its target fpp 5e-13 needs"), std::string::npos) << first;
  EXPECT_NE(first.find("(create the chain with a larger fpp, a tightening nearer 0, or a larger k)"),
            std::string::npos)
      << first;
  const scaling_stats s = f.stats();
  EXPECT_EQ(s.keys_inserted, added);
  std::uint64_t bytes = 0;
  for (const scaling_level& level : f.levels()) {
    EXPECT_LE(bits_per_key_at(level.l, level.capacity), 4096.0);
    bytes += level.l.size_bytes();
  }
  EXPECT_LE(bytes, 512 * f.levels().size());  // capacity 1 per level
  std::vector<std::uint64_t> keys;  // what went in stays found
  for (std::uint64_t i = 0; i < added; ++i) keys.push_back(i * 2654435761u + 1);
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  f.contains(keys.data(), keys.size(), found.get());
  EXPECT_TRUE(std::all_of(found.get(), found.get() + keys.size(), [](bool b) { return b; }));
}

// Hadoop's DynamicBloomFilter: tightening 1 and expansion 1 give rows of one
// size, each at the whole fpp; the chain's FPR is then 1 - (1 - fpp)^rows, which
// stats() reports and a probe of absent keys measures.
TEST(ScalingFilter, TighteningOneKeepsEveryLevelAtTheFppAsHadoopsDynamicFilter) {
  for (const std::uint32_t expansion : {1u, 2u}) {
    scaling_policy p;
    p.expansion = expansion;
    p.tightening = 1;
    scaling_filter f = scaling_filter::create(20'000, 0.01, p, on_cpu(2));
    const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(expansion == 1 ? 100'000 : 140'000, 90 + expansion);
    // A key that tests present (a false positive of an earlier row) is not inserted.
    EXPECT_GT(f.add(keys.data(), keys.size()), keys.size() * 95 / 100);
    ASSERT_GE(f.levels().size(), 3u);
    for (const scaling_level& level : f.levels()) {
      EXPECT_EQ(level.fpp, 0.01);
      if (expansion == 1) {
        EXPECT_EQ(level.l, f.levels().front().l);  // rows of one size
      }
    }
    EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size());
    const scaling_stats s = f.stats();
    const double rows = static_cast<double>(f.levels().size());
    EXPECT_GT(s.compound_fpr, 0.01);  // no bound: more rows, more false positives
    EXPECT_LT(s.compound_fpr, 1 - std::pow(1 - 0.01, rows) + 0.002);
    const std::vector<std::uint64_t> absent = random_keys<std::uint64_t>(400'000, 190 + expansion);
    const double measured = static_cast<double>(f.count(absent.data(), absent.size())) / 400'000.0;
    EXPECT_NEAR(measured, s.compound_fpr, 0.15 * s.compound_fpr) << rows << " rows";
  }
}

// A batch that outgrows the chain's last possible level keeps what went in and
// says how many of its keys the chain lacks (it once said not_inserted = 0).
TEST(ScalingFilter, ABatchStoppedByALevelThatCannotOpenCountsTheKeysLeftOut) {
  for (const std::uint64_t seed : {6u, 7u, 8u}) {
    scaling_policy p;
    p.expansion = 1;
    scaling_filter f = scaling_filter::create(500, 0.1, p, on_cpu(2));
    const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(40'000, seed);
    std::string message;
    std::uint64_t not_inserted = 0;
    try {
      f.add(keys.data(), keys.size());
      FAIL() << "40,000 keys fit a chain of capacity-500 levels";
    } catch (const filter_full& e) {
      message = e.what();
      not_inserted = e.not_inserted();
      EXPECT_EQ(e.fits(), 0u);
    }
    std::unique_ptr<bool[]> found(new bool[keys.size()]);
    f.contains(keys.data(), keys.size(), found.get());
    const auto held = static_cast<std::uint64_t>(std::count(found.get(), found.get() + keys.size(), true));
    EXPECT_EQ(not_inserted, keys.size() - held) << message;
    EXPECT_GT(not_inserted, 0u);
    EXPECT_GE(held, f.stats().keys_inserted);  // what went in stays (plus false positives)
    EXPECT_NE(message.find(std::to_string(f.stats().keys_inserted) + " keys of the batch were inserted"),
              std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(not_inserted) + " are not in the chain"), std::string::npos) << message;
    EXPECT_EQ(message.find("0.000000"), std::string::npos) << message;  // the level's tiny target, readable
  }
}

TEST(ScalingFilter, CpuChainRefusesDeviceOnlyCallsAndExplicitGpuWithoutOne) {
  scaling_filter f = scaling_filter::create(100, 0.01, {}, on_cpu(1));
  std::uint64_t key = 1;
  bool found = false;
  std::uint64_t count = 0;
  EXPECT_THROW(f.contains_async(&key, 1, &found, nullptr), wrong_backend);
  EXPECT_THROW(f.count_async(&key, 1, &count, nullptr), wrong_backend);
  EXPECT_NO_THROW(f.synchronize());
  EXPECT_EQ(f.where(), backend::cpu);
  if (query_gpu().available) return;
  options gpu;
  gpu.where = backend::gpu;
  EXPECT_THROW(scaling_filter::create(100, 0.01, {}, gpu), no_gpu);
  const scaling_filter automatic = scaling_filter::create(100, 0.01);
  EXPECT_NE(automatic.description().find("auto: no GPU"), std::string::npos)
      << automatic.description();
}

TEST(ScalingFilter, EmptyBatchesAndBadArgumentsChangeNothing) {
  scaling_filter f = scaling_filter::create(100, 0.01, {}, on_cpu(1));
  EXPECT_EQ(f.add(static_cast<const std::uint64_t*>(nullptr), 0), 0u);
  EXPECT_THROW(f.add(static_cast<const std::uint64_t*>(nullptr), 5), invalid_argument);
  EXPECT_THROW(f.level_words(1), invalid_argument);
  EXPECT_EQ(f.keys_inserted(), 0u);
}

}  // namespace
}  // namespace gbf
