// A load holds the filter it makes and a few MiB of staging, never a second
// copy of the file's array: each kind's load is run under an address-space
// limit of what the filter itself takes plus half its payload. And the staged
// copies behind loads, saves and copy_to keep every word of arrays of many
// 4 MiB steps; a chain merge stages the other chain the same way.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gbf/counting_filter.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"
#include "gbf/scaling_filter.hpp"
#include "tests/io/io_support.hpp"
#include "tests/support.hpp"

namespace gbf::test {
namespace {

/// Mapped address space of this process (VmSize), in bytes; 0 when unknown.
std::uint64_t address_space_bytes() {
  std::ifstream status("/proc/self/status");
  std::string name;
  std::uint64_t kib = 0;
  while (status >> name) {
    if (name == "VmSize:" && status >> kib) return kib * 1024;
    status.ignore(1 << 16, '\n');
  }
  return 0;
}

// 64 MiB payloads: a second copy would pass the limit by 32 MiB, while the
// loads' staging (4 MiB of words, 256 KiB of bytes) stays far inside it.
constexpr std::uint64_t payload_bytes = std::uint64_t{64} << 20;
const std::vector<std::uint64_t> kept_keys = {1, 2, 3, 1'000'003, 0xfedcba9876543210ULL};

/// Saves make()'s filter (with kept_keys added) to a file, measures the address
/// space an empty filter of the same shape takes, and loads the file under a
/// limit of that plus half the payload; check(loaded) then holds.
template <class Filter>
void expect_load_within_one_copy(const std::function<Filter()>& make,
                                 const std::function<void(const Filter&, const std::string&)>& save,
                                 const std::function<Filter(const std::string&)>& load) {
  temp_dir dir;
  const std::string path = dir.file("f.gbf");
  {
    Filter f = make();
    f.add(kept_keys.data(), kept_keys.size());
    save(f, path);
  }
  ::malloc_trim(0);
  const std::uint64_t before = address_space_bytes();
  if (before == 0) GTEST_SKIP() << "no VmSize in /proc/self/status";
  std::uint64_t held = 0;
  {
    Filter empty = make();
    held = address_space_bytes() - before;
  }
  ::malloc_trim(0);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &saved), 0);
  rlimit capped = saved;
  capped.rlim_cur = address_space_bytes() + held + payload_bytes / 2;
  if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < capped.rlim_cur)
    GTEST_SKIP() << "the address space is already limited below what the test sets";
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &capped), 0);
  std::string failure;
  std::vector<bool> found;
  try {
    const Filter loaded = load(path);
    std::unique_ptr<bool[]> answers(new bool[kept_keys.size()]);
    loaded.contains(kept_keys.data(), kept_keys.size(), answers.get());
    found.assign(answers.get(), answers.get() + kept_keys.size());
  } catch (const std::exception& e) {
    failure = e.what();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &saved), 0);
  EXPECT_EQ(failure, "") << "the filter takes " << held << " bytes, the limit allowed "
                         << payload_bytes / 2 << " more";
  if (failure.empty()) {
    EXPECT_EQ(found, std::vector<bool>(kept_keys.size(), true));
  }
}

// One thread: a worker's malloc arena alone reserves 64 MiB of address space.
options one_thread() { return on_cpu(1); }

TEST(LoadMemory, APlainFilterLoadHoldsOneCopyOfThePayload) {
  const layout l{8, 8, 0, payload_bytes / 32};
  expect_load_within_one_copy<filter>(
      [&] { return filter(l, one_thread()); },
      [](const filter& f, const std::string& path) { save(f, path); },
      [](const std::string& path) { return load(path, one_thread()); });
}

TEST(LoadMemory, AParquetSbbfLoadHoldsOneCopyOfThePayload) {
  const layout l{8, 8, 0, payload_bytes / 32};  // a power of two within Parquet's 128 MiB
  expect_load_within_one_copy<filter>(
      [&] { return filter(l, one_thread()); },
      [](const filter& f, const std::string& path) { save_parquet_sbbf(f, path); },
      [](const std::string& path) { return load_parquet_sbbf(path, true, one_thread()); });
}

TEST(LoadMemory, ACountingFilterLoadHoldsOneCopyOfThePayload) {
  // 4-bit counters: 4 counter words a plain word, and the CPU's projection beside them.
  const layout l{8, 8, 0, payload_bytes / (32 * 4)};
  expect_load_within_one_copy<counting_filter>(
      [&] { return counting_filter(l, one_thread(), 0, 4); },
      [](const counting_filter& f, const std::string& path) { save(f, path); },
      [](const std::string& path) { return load_counting(path, one_thread()); });
}

TEST(LoadMemory, ACuckooFilterLoadHoldsOneCopyOfThePayload) {
  cuckoo_layout l;
  l.tag_bits = 16;
  l.num_buckets = payload_bytes / 32;
  expect_load_within_one_copy<cuckoo_filter>(
      [&] { return cuckoo_filter(l, one_thread()); },
      [](const cuckoo_filter& f, const std::string& path) { save(f, path); },
      [](const std::string& path) { return load_cuckoo(path, one_thread()); });
}

TEST(LoadMemory, AScalingChainLoadHoldsOneCopyOfThePayload) {
  // One level of about 64 MiB (a non-scaling chain sized for 50 million keys).
  scaling_policy policy;
  policy.non_scaling = true;
  expect_load_within_one_copy<scaling_filter>(
      [&] { return scaling_filter::create(50'000'000, 0.01, policy, one_thread()); },
      [](const scaling_filter& f, const std::string& path) { save(f, path); },
      [](const std::string& path) { return load_scaling_filter(path, one_thread()); });
}

// 2.5 staging steps of words (host/word_range.hpp), so the last step is partial.
constexpr std::uint64_t staged_words = (std::uint64_t{5} << 20) / 2;

TEST(StagedCopy, APlainFilterOfManyStepsKeepsEveryWordThroughCopyToAndFiles) {
  filter f(layout{8, 8, 0, staged_words / 8}, one_thread(), 123);
  const auto keys = random_keys<std::uint64_t>(200'000, 5);
  f.add(keys.data(), keys.size());
  const std::vector<std::uint32_t> words = f.words();
  const filter copy = f.copy_to(backend::cpu);
  EXPECT_EQ(copy.words(), words);
  EXPECT_EQ(copy.stats().keys_added, 200'000u);
  EXPECT_EQ(copy.capacity(), 123u);
  const std::vector<std::uint8_t> file = serialize(f);
  EXPECT_EQ(deserialize(file.data(), file.size(), one_thread()).words(), words);
}

TEST(StagedCopy, ACountingFilterOfManyStepsKeepsCountersAndProjection) {
  counting_filter f(layout{8, 8, 0, staged_words / (8 * 4)}, one_thread(), 0, 4);
  const auto keys = random_keys<std::uint64_t>(100'000, 6);
  f.add(keys.data(), keys.size());
  f.remove(keys.data(), 1'000);
  const std::vector<std::uint32_t> counters = f.counters();
  const std::vector<std::uint32_t> projected = f.projection().words();
  const counting_filter copy = f.copy_to(backend::cpu);
  const std::vector<std::uint8_t> file = serialize(f);
  const counting_filter loaded = deserialize_counting(file.data(), file.size(), one_thread());
  for (const counting_filter* g : {&copy, &loaded}) {
    EXPECT_EQ(g->counters(), counters);
    // The CPU's projection is derived slice by slice as the counters arrive.
    EXPECT_EQ(g->projection().words(), projected);
    EXPECT_EQ(g->stats().keys_added, 100'000u);
    EXPECT_EQ(g->stats().keys_removed, 1'000u);
    EXPECT_EQ(g->count(keys.data(), keys.size()), f.count(keys.data(), keys.size()));
  }
}

TEST(StagedCopy, ACuckooFilterOfManyStepsKeepsTableAndTotals) {
  cuckoo_layout l;
  l.num_buckets = staged_words / 8;
  cuckoo_filter f(l, one_thread());
  const auto keys = random_keys<std::uint64_t>(200'000, 7);
  f.add(keys.data(), keys.size());
  f.remove(keys.data(), 10);
  const std::vector<std::uint32_t> table = f.words();
  const cuckoo_filter copy = f.copy_to(backend::cpu);
  const std::vector<std::uint8_t> file = serialize(f);
  const cuckoo_filter loaded = deserialize_cuckoo(file.data(), file.size(), one_thread());
  for (const cuckoo_filter* g : {&copy, &loaded}) {
    EXPECT_EQ(g->words(), table);
    EXPECT_EQ(g->stats().keys_added, 200'000u);
    EXPECT_EQ(g->stats().keys_removed, 10u);
  }
}

TEST(StagedCopy, AScalingChainOfManyStepsKeepsEveryLevel) {
  // Level 0 of 2.5 steps, level 1 of 5.
  const std::uint64_t capacity = staged_words * 32 / 10;
  scaling_filter f = scaling_filter::create(capacity, 0.01, {}, one_thread());
  // Keys a level already answers for are not counted: 5% more than level 0 holds.
  const auto keys = random_keys<std::uint64_t>(capacity + capacity / 20, 8);
  f.add(keys.data(), keys.size());
  ASSERT_EQ(f.levels().size(), 2u);
  ASSERT_GT(f.levels()[0].l.num_words(), 2 * (std::uint64_t{1} << 20));
  const scaling_filter copy = f.copy_to(backend::cpu);
  const std::vector<std::uint8_t> file = serialize(f);
  const scaling_filter loaded = deserialize_scaling_filter(file.data(), file.size(), one_thread());
  for (const scaling_filter* g : {&copy, &loaded}) {
    ASSERT_EQ(g->levels().size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(g->level_words(i), f.level_words(i)) << "level " << i;
      EXPECT_EQ(g->levels()[i].keys, f.levels()[i].keys);
    }
  }
  // copy_level_words gives slices of level_words and refuses what lies past them.
  const std::vector<std::uint32_t> level1 = f.level_words(1);
  std::vector<std::uint32_t> slice(1'000);
  f.copy_level_words(1, level1.size() - 1'000, 1'000, slice.data());
  EXPECT_TRUE(std::equal(slice.begin(), slice.end(), level1.end() - 1'000));
  EXPECT_THROW(f.copy_level_words(1, level1.size() - 999, 1'000, slice.data()), invalid_argument);
  EXPECT_THROW(f.copy_level_words(2, 0, 1, slice.data()), invalid_argument);
  EXPECT_THROW(f.copy_level_words(0, 0, 1, nullptr), invalid_argument);
}

// A merge brings the other chain's words over a step at a time: the levels
// only it has, made here, and one 4 MiB staging buffer are all the memory it
// takes (it used to copy every level of the other chain first). And a level
// that cannot be made leaves this chain as it was: the levels already made for
// the merge are dropped again before anything is ORed.
class ChainMerge : public ::testing::Test {
 protected:
  void SetUp() override {
    scaling_policy policy;
    policy.expansion = 8;  // levels of about 0.2, 1.5 and 12.9 MB
    other_ = std::make_unique<scaling_filter>(scaling_filter::create(100'000, 0.01, policy, one_thread()));
    const auto keys = random_keys<std::uint64_t>(1'000'000, 9);
    other_->add(keys.data(), keys.size());
    ASSERT_EQ(other_->levels().size(), 3u);
    // Only an empty level 0 can take another chain's full one.
    chain_ = std::make_unique<scaling_filter>(scaling_filter::create(100'000, 0.01, policy, one_thread()));
    ::malloc_trim(0);
    if (address_space_bytes() == 0) GTEST_SKIP() << "no VmSize in /proc/self/status";
  }

  /// Runs chain_->merge(*other_) under an address-space limit of `room` bytes
  /// more than the process maps now; what it threw ("" when nothing).
  std::string merge_with_room(std::uint64_t room) {
    rlimit saved{};
    if (::getrlimit(RLIMIT_AS, &saved) != 0) return "getrlimit failed";
    rlimit capped = saved;
    capped.rlim_cur = address_space_bytes() + room;
    if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < capped.rlim_cur) return "already limited";
    if (::setrlimit(RLIMIT_AS, &capped) != 0) return "setrlimit failed";
    std::string failure;
    try {
      chain_->merge(*other_);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    ::setrlimit(RLIMIT_AS, &saved);
    return failure;
  }

  std::uint64_t level_bytes(std::size_t level) const { return other_->levels()[level].l.size_bytes(); }

  std::unique_ptr<scaling_filter> other_;
  std::unique_ptr<scaling_filter> chain_;
};

constexpr std::uint64_t staging_bytes = std::uint64_t{4} << 20;
// A level of 2 MiB or more maps whole huge pages, plus one while it aligns.
constexpr std::uint64_t slack_bytes = std::uint64_t{6} << 20;

TEST_F(ChainMerge, TakesTheNewLevelsAndOneStagingBufferNoCopyOfTheOtherChain) {
  // A copy of the other chain's levels first would need another 14.6 MB.
  EXPECT_EQ(merge_with_room(level_bytes(1) + level_bytes(2) + staging_bytes + slack_bytes), "");
  ASSERT_EQ(chain_->levels().size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(chain_->level_words(i), other_->level_words(i)) << "level " << i;
    EXPECT_EQ(chain_->levels()[i].keys, other_->levels()[i].keys) << "level " << i;
  }
}

TEST_F(ChainMerge, ALevelThatCannotBeMadeLeavesTheChainAsItWas) {
  const std::string failure = merge_with_room(level_bytes(1) + staging_bytes + slack_bytes);
  EXPECT_NE(failure, "") << "level 2 (" << level_bytes(2) << " bytes) fit after all";
  ASSERT_EQ(chain_->levels().size(), 1u) << failure;
  EXPECT_EQ(chain_->keys_inserted(), 0u);
  for (const std::uint32_t word : chain_->level_words(0)) ASSERT_EQ(word, 0u) << "a failed merge ORed level 0";
  // Nothing is left half-made: the same merge with room succeeds.
  chain_->merge(*other_);
  ASSERT_EQ(chain_->levels().size(), 3u);
  EXPECT_EQ(chain_->level_words(2), other_->level_words(2));
}

}  // namespace
}  // namespace gbf::test
