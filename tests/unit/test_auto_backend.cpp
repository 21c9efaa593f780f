// The automatic backend's router (host/hybrid_backend.cpp), driven without a
// GPU: a CPU backend dressed as one (kind gpu, no host_words, "device" batches
// and _async calls served synchronously) stands in for the device copy. Pinned:
// whatever the routing, the answers and the bits equal a plain filter's after
// every call of random operation sequences; small host batches move to the CPU
// mirror once the time they lose pays for the copy (ski rental), big ones stay
// on the GPU; logged adds are replayed, overflowing logs and device writes force
// copies; the mirror is refused above its memory limit or when it cannot be
// allocated, and device_words pins everything to the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gbf/cost_model.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "host/backend.hpp"
#include "host/hybrid_backend.hpp"
#include "tests/support.hpp"

namespace gbf::detail {
namespace {

using gbf::test::random_keys;
using answers = std::unique_ptr<bool[]>;

/// A CPU backend that calls itself a GPU: device batches are host memory in disguise.
class fake_gpu final : public backend_impl {
 public:
  explicit fake_gpu(const layout& l) : cpu_(make_cpu_backend(l, cpu_simd::scalar, 1, nullptr)) {}

  backend kind() const noexcept override { return backend::gpu; }
  const layout& get_layout() const noexcept override { return cpu_->get_layout(); }
  void add(const key_batch& k) override {
    if (fail_adds) {
      // Half the batch lands, then the "device" fails: a write that fails partway.
      key_batch half = host(k);
      half.count /= 2;
      cpu_->add(half);
      throw cuda_error("add: injected failure", 700);
    }
    cpu_->add(host(k));
  }
  void add_new(const key_batch& k, bool* is_new) override { cpu_->add_new(host(k), is_new); }
  void contains(const key_batch& k, bool* found) const override { cpu_->contains(host(k), found); }
  std::uint64_t count(const key_batch& k) const override { return cpu_->count(host(k)); }
  std::uint64_t select(const key_batch& k, std::uint64_t* rows) const override {
    return cpu_->select(host(k), rows);
  }
  void clear() override { cpu_->clear(); }
  void combine(const backend_impl& other, set_op op) override {
    std::vector<std::uint32_t> words(get_layout().num_words());
    other.read_words(words.data());
    cpu_->combine_host(words.data(), op);
  }
  void combine_host(const std::uint32_t* words, set_op op) override { cpu_->combine_host(words, op); }
  std::uint64_t popcount() const override { return cpu_->popcount(); }
  void read_words(std::uint32_t* out) const override {
    if (fail_reads) throw cuda_error("read_words: injected failure", 700);
    cpu_->read_words(out);
  }
  void write_words(const std::uint32_t* in) override { cpu_->write_words(in); }
  void add_async(const key_batch& k, stream_t) override { cpu_->add(host(k)); }
  void contains_async(const key_batch& k, bool* found, stream_t) const override {
    cpu_->contains(host(k), found);
  }
  void count_async(const key_batch& k, std::uint64_t* count, stream_t) const override {
    *count = cpu_->count(host(k));
  }
  void select_async(const key_batch& k, std::uint64_t* rows, std::uint64_t* count, stream_t) const override {
    *count = cpu_->select(host(k), rows);
  }
  const std::uint32_t* device_words() const override { return cpu_->host_words(); }
  // Stands for the CUDA backend's deferred error of a bad _async string batch.
  void synchronize(const char* what) const override {
    ++synchronizations;
    if (deferred_error) {
      deferred_error = false;
      throw invalid_argument(std::string(what) + ": deferred");
    }
  }
  mutable int synchronizations = 0;
  mutable bool deferred_error = false;
  bool fail_adds = false;
  bool fail_reads = false;

 private:
  static key_batch host(key_batch k) {
    k.space = memory_space::host;
    return k;
  }
  std::unique_ptr<backend_impl> cpu_;
};

/// A model where one call costs fixed + keys / rate on each side, strings free,
/// and a whole-array copy costs `copy_s`.
cost_model model(double gpu_fixed_s, double gpu_rate, double cpu_fixed_s, double cpu_rate, double copy_s) {
  cost_model m;
  cost_point p;
  p.filter_bytes = 1;
  p.cpu_add = p.cpu_probe = {cpu_fixed_s, cpu_rate, 1e30};
  p.gpu_add = p.gpu_probe = {gpu_fixed_s, gpu_rate, 1e30};
  m.points = {p};
  m.copy = {copy_s, 1e30};
  m.source = "test";
  return m;
}

// GPU: 50 us + 1 ns/key; CPU: 1 us + 25 ns/key (crossover near 2,000 keys); copy 1 ms.
const cost_model typical = model(50e-6, 1e9, 1e-6, 40e6, 1e-3);

layout test_layout(std::uint64_t num_blocks = 1024) {
  layout l;
  l.num_blocks = num_blocks;
  return l;
}

std::unique_ptr<backend_impl> hybrid(const layout& l, const cost_model& m,
                                     std::uint64_t mirror_limit = std::uint64_t{1} << 40) {
  return make_hybrid_backend(
      std::make_unique<fake_gpu>(l), [l] { return make_cpu_backend(l, cpu_simd::automatic, 2, nullptr); }, m,
      mirror_limit);
}

/// A hybrid filter over a fake_gpu the test keeps a handle on (to inject failures).
struct observed_hybrid {
  fake_gpu* device;
  std::unique_ptr<backend_impl> filter;
};

observed_hybrid hybrid_observed(const layout& l, const cost_model& m) {
  auto gpu = std::make_unique<fake_gpu>(l);
  fake_gpu* device = gpu.get();
  return {device, make_hybrid_backend(
                      std::move(gpu), [l] { return make_cpu_backend(l, cpu_simd::scalar, 1, nullptr); },
                      m, std::uint64_t{1} << 40)};
}

template <class Key>
key_batch batch_of(const std::vector<Key>& keys, memory_space space = memory_space::host) {
  return key_batch{keys.data(), keys.size(), sizeof(Key) == 4 ? key_kind::u32 : key_kind::u64, space};
}

std::vector<std::uint32_t> words_of(const backend_impl& b) {
  std::vector<std::uint32_t> words(b.get_layout().num_words());
  b.read_words(words.data());
  return words;
}

/// Arrow-layout string keys with int32 offsets and a validity bitmap.
struct strings {
  std::vector<char> data;
  std::vector<std::int32_t> offsets{0};
  std::vector<std::uint8_t> validity;

  strings(std::size_t n, std::uint64_t seed) : validity((n + 7) / 8, 0) {
    std::mt19937_64 rng(seed);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t length = rng() % 40;
      for (std::size_t j = 0; j < length; ++j) data.push_back(static_cast<char>(rng()));
      offsets.push_back(static_cast<std::int32_t>(data.size()));
      if (rng() % 8 != 0) validity[i / 8] |= static_cast<std::uint8_t>(1u << (i % 8));
    }
  }
  key_batch batch() const {
    key_batch b;
    b.kind = key_kind::str32;
    b.count = offsets.size() - 1;
    b.data = data.data();
    b.data_bytes = data.size();
    b.offsets = offsets.data();
    b.validity = validity.data();
    return b;
  }
};

TEST(AutoBackend, RandomOperationSequencesMatchAPlainFilterBitForBit) {
  const cost_model models[] = {
      typical,
      model(50e-6, 1e9, 1e-6, 40e6, 1e-6),   // copies nearly free: the mirror follows eagerly
      model(200e-6, 1e9, 1e-6, 40e6, 5e-4),  // a copy dearer than replaying one or two key kinds
      model(1e-9, 1e12, 1.0, 1.0, 1e-3),     // the GPU always wins
      model(1.0, 1.0, 1e-9, 1e12, 1e-3),     // the CPU always wins (after one copy)
  };
  std::mt19937_64 rng(2026);
  for (std::size_t m = 0; m < std::size(models); ++m) {
    for (const std::uint64_t num_blocks : {1ull, 37ull, 4096ull}) {
      const layout l = test_layout(num_blocks);
      auto routed = hybrid(l, models[m]);
      auto plain = make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
      dispatch_stats last{};
      for (int step = 0; step < 120; ++step) {
        const std::string where = "model " + std::to_string(m) + ", " + std::to_string(num_blocks) +
                                  " blocks, step " + std::to_string(step);
        // Batch sizes spread over 1 .. 100,000 in log scale, so both sides get work.
        const std::size_t n = static_cast<std::size_t>(std::pow(10.0, static_cast<double>(rng() % 500) / 100.0));
        const std::uint64_t seed = rng();
        const auto keys64 = random_keys(n, seed % 50);  // few seeds: repeats and hits happen
        const auto keys32 = random_keys<std::uint32_t>(n, seed % 50);
        const strings text(n, seed % 50);
        const key_batch batches[] = {batch_of(keys64), batch_of(keys32), text.batch(),
                                     batch_of(keys64, memory_space::device)};
        const key_batch& b = batches[rng() % 4];
        key_batch plain_b = b;
        plain_b.space = memory_space::host;
        switch (rng() % 9) {
          case 0:
          case 1:
            routed->add(b);
            plain->add(plain_b);
            break;
          case 2: {
            answers got(new bool[n]), want(new bool[n]);
            routed->add_new(b, got.get());
            plain->add_new(plain_b, want.get());
            ASSERT_TRUE(std::equal(got.get(), got.get() + n, want.get())) << where;
            break;
          }
          case 3:
          case 4: {
            answers got(new bool[n]), want(new bool[n]);
            routed->contains(b, got.get());
            plain->contains(plain_b, want.get());
            ASSERT_TRUE(std::equal(got.get(), got.get() + n, want.get())) << where;
            break;
          }
          case 5:
            ASSERT_EQ(routed->count(b), plain->count(plain_b)) << where;
            break;
          case 6: {
            std::vector<std::uint64_t> got(n), want(n);
            const std::uint64_t hits = routed->select(b, got.data());
            ASSERT_EQ(hits, plain->select(plain_b, want.data())) << where;
            ASSERT_TRUE(std::equal(got.begin(), got.begin() + hits, want.begin())) << where;
            break;
          }
          case 7: {
            // A set operation with another filter's host words (AND clears bits
            // of ours that it lacks), or replacing the words outright.
            auto other = make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
            other->add(batch_of(random_keys(static_cast<std::size_t>(num_blocks) * 4, seed)));
            const std::vector<std::uint32_t> other_words = words_of(*other);
            const unsigned which = rng() % 3;
            if (which == 2) {
              routed->write_words(other_words.data());
              plain->write_words(other_words.data());
            } else {
              const set_op op = which == 0 ? set_op::union_or : set_op::intersect_and;
              routed->combine_host(other_words.data(), op);
              plain->combine_host(other_words.data(), op);
            }
            break;
          }
          case 8:
            if (rng() % 4 == 0) {
              routed->clear();
              plain->clear();
            } else {
              ASSERT_EQ(routed->popcount(), plain->popcount()) << where;
            }
            break;
        }
        ASSERT_EQ(words_of(*routed), words_of(*plain)) << where;
        const dispatch_stats now = routed->dispatch();
        ASSERT_TRUE(now.mirrored);
        ASSERT_GE(now.cpu_batches + now.gpu_batches, last.cpu_batches + last.gpu_batches) << where;
        last = now;
      }
      // Both sides took work under the mixed models.
      if (m <= 2) {
        EXPECT_GT(last.cpu_batches, 0u) << "model " << m;
        EXPECT_GT(last.gpu_batches, 0u) << "model " << m;
      }
      if (m == 2) {
        EXPECT_GT(last.replays, 0u);
      }
      if (m == 3) {
        EXPECT_EQ(last.cpu_batches, 0u);
      }
    }
  }
}

TEST(AutoBackend, SmallBatchesMoveToTheMirrorOnceTheirLostTimePaysForTheCopy) {
  const layout l = test_layout();
  auto f = hybrid(l, typical);
  const auto filled = random_keys(100000, 1);
  f->add(batch_of(filled));  // big: the GPU
  EXPECT_EQ(f->dispatch().gpu_batches, 1u);
  EXPECT_EQ(f->dispatch().copies_to_cpu, 0u);

  // A 10-key probe costs 50 us + 10 ns on the GPU and 1 us + 250 ns on the CPU:
  // each one left on the GPU loses 48.76 us, so the 1 ms copy is bought at the 21st.
  const auto probe = random_keys(10, 2);
  answers found(new bool[10]);
  const double lost_per_call = (50e-6 + 10 / 1e9) - (1e-6 + 10 / 40e6);
  const int calls_before_copy = static_cast<int>(std::ceil(1e-3 / lost_per_call));
  for (int call = 1; call <= calls_before_copy; ++call) {
    f->contains(batch_of(probe), found.get());
    EXPECT_EQ(f->dispatch().copies_to_cpu, call == calls_before_copy ? 1u : 0u) << "call " << call;
  }
  EXPECT_EQ(f->dispatch().gpu_batches, 1u + calls_before_copy);
  for (int call = 0; call < 100; ++call) f->contains(batch_of(probe), found.get());
  EXPECT_EQ(f->dispatch().cpu_batches, 100u);
  EXPECT_EQ(f->dispatch().copies_to_cpu, 1u);

  // A big probe still goes to the GPU, which is current: no copy, no replay.
  const auto big = random_keys(1000000, 3);
  std::unique_ptr<bool[]> big_found(new bool[big.size()]);
  f->contains(batch_of(big), big_found.get());
  EXPECT_EQ(f->dispatch().gpu_batches, 2u + calls_before_copy);
  EXPECT_EQ(f->dispatch().copies_to_gpu, 0u);
  EXPECT_EQ(f->dispatch().replays, 0u);
}

TEST(AutoBackend, OneBatchThatSavesMoreThanTheCopyBuysItAtOnce) {
  // The CPU is faster per key and the copy is cheap: a single big batch pays for it.
  auto f = hybrid(test_layout(), model(50e-6, 1e8, 1e-6, 1e9, 1e-4));
  const auto keys = random_keys(100000, 4);
  f->add(batch_of(keys));
  EXPECT_EQ(f->dispatch().cpu_batches, 1u);
  EXPECT_EQ(f->dispatch().copies_to_cpu, 1u);  // the mirror, zero, taken from the zero GPU copy
  EXPECT_EQ(f->dispatch().gpu_batches, 0u);
}

TEST(AutoBackend, AddsOnOneCopyAreReplayedOnTheOther) {
  const layout l = test_layout();
  auto f = hybrid(l, model(50e-6, 1e9, 1e-6, 40e6, 1e-6));  // cheap copies: the mirror comes at once
  auto plain = make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
  const auto small = random_keys(10, 5);
  answers found(new bool[10]);
  f->contains(batch_of(small), found.get());  // copy (1 us) + CPU call < GPU call (50 us)
  ASSERT_EQ(f->dispatch().copies_to_cpu, 1u);
  // Small adds on the mirror: the GPU copy falls behind by a log...
  for (int i = 0; i < 5; ++i) {
    const auto keys = random_keys(10, 100 + i);
    f->add(batch_of(keys));
    plain->add(batch_of(keys));
  }
  const strings text(50, 6);
  f->add(text.batch());
  plain->add(text.batch());
  EXPECT_EQ(f->dispatch().cpu_batches, 7u);
  // ...which a big probe on the GPU makes up for: the model prices replaying the
  // log at 50 us per key kind and a copy at 1 us, so it copies.
  const auto big = random_keys(1000000, 7);
  std::unique_ptr<bool[]> got(new bool[big.size()]), want(new bool[big.size()]);
  f->contains(batch_of(big), got.get());
  plain->contains(batch_of(big), want.get());
  EXPECT_TRUE(std::equal(got.get(), got.get() + big.size(), want.get()));
  EXPECT_EQ(f->dispatch().copies_to_gpu, 1u);
  EXPECT_EQ(f->dispatch().replays, 0u);

  // With dear copies the same sequence replays the log instead.
  auto g = hybrid(l, model(50e-6, 1e9, 1e-6, 40e6, 1.0));
  auto g_plain = make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
  const auto many_small = random_keys(10, 8);
  // Mirror bought after 1 s of lost time: about 20,500 small probes.
  std::size_t probes = 0;
  while (g->dispatch().copies_to_cpu == 0) {
    g->contains(batch_of(many_small), found.get());
    ASSERT_LT(++probes, 30000u);
  }
  std::vector<std::uint64_t> logged;
  for (int i = 0; i < 5; ++i) {
    const auto keys = random_keys(10, 200 + i);
    g->add(batch_of(keys));
    g_plain->add(batch_of(keys));
    logged.insert(logged.end(), keys.begin(), keys.end());
  }
  g->add(text.batch());
  g_plain->add(text.batch());
  g->contains(batch_of(big), got.get());
  g_plain->contains(batch_of(big), want.get());
  EXPECT_TRUE(std::equal(got.get(), got.get() + big.size(), want.get()));
  EXPECT_EQ(g->dispatch().replays, 1u);
  EXPECT_EQ(g->dispatch().copies_to_gpu, 0u);
  // The GPU copy itself holds the replayed keys (a device batch always runs there).
  std::uint64_t on_gpu = 0;
  g->count_async(batch_of(logged, memory_space::device), &on_gpu, nullptr);
  EXPECT_EQ(on_gpu, logged.size());
  const std::uint32_t* device = g->device_words();
  EXPECT_TRUE(std::equal(device, device + l.num_words(), words_of(*g_plain).begin()));
  EXPECT_EQ(words_of(*g), words_of(*g_plain));
}

TEST(AutoBackend, DeviceWritesAndOverflowingLogsMakeTheOtherCopyStale) {
  const layout l = test_layout(64);  // 2 KiB: logs are bounded by 1 MiB
  auto f = hybrid(l, model(50e-6, 1e9, 1e-6, 40e6, 1e-6));
  auto plain = make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
  const auto small = random_keys(10, 9);
  answers found(new bool[10]);
  f->contains(batch_of(small), found.get());
  ASSERT_EQ(f->dispatch().copies_to_cpu, 1u);

  // A device add runs on the GPU; the mirror cannot log device keys and goes stale.
  const auto device_keys = random_keys(1000, 10);
  f->add(batch_of(device_keys, memory_space::device));
  plain->add(batch_of(device_keys));
  f->contains(batch_of(small), found.get());  // the mirror is bought again (copy 1 us)
  EXPECT_EQ(f->dispatch().copies_to_cpu, 2u);
  EXPECT_EQ(words_of(*f), words_of(*plain));

  // Adds through the CPU past the 1 MiB log bound leave the GPU stale: the next
  // device batch copies the mirror over.
  const double cpu_wins_below = 1e3;  // the crossover of this model is ~2,000 keys
  std::uint64_t logged = 0;
  for (std::uint64_t seed = 0; logged * 8 <= (std::uint64_t{1} << 20); ++seed) {
    const auto keys = random_keys(static_cast<std::size_t>(cpu_wins_below), 1000 + seed);
    f->add(batch_of(keys));
    plain->add(batch_of(keys));
    logged += keys.size();
  }
  EXPECT_EQ(f->dispatch().copies_to_gpu, 0u);
  const auto device_probe = random_keys(5000, 11);
  answers got(new bool[5000]), want(new bool[5000]);
  f->contains(batch_of(device_probe, memory_space::device), got.get());
  plain->contains(batch_of(device_probe), want.get());
  EXPECT_TRUE(std::equal(got.get(), got.get() + 5000, want.get()));
  EXPECT_EQ(f->dispatch().copies_to_gpu, 1u);
  EXPECT_EQ(f->dispatch().replays, 0u);
}

TEST(AutoBackend, AsyncCallsRunOnTheGpuCopyBroughtUpToDate) {
  const layout l = test_layout();
  auto f = hybrid(l, model(50e-6, 1e9, 1e-6, 40e6, 1e-6));
  auto plain = make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
  const auto small = random_keys(10, 12);
  f->add(batch_of(small));  // the CPU (after buying the zero mirror)
  plain->add(batch_of(small));
  ASSERT_EQ(f->dispatch().cpu_batches, 1u);
  std::uint64_t hits = 0;
  f->count_async(batch_of(small, memory_space::device), &hits, nullptr);
  EXPECT_EQ(hits, 10u);  // the GPU copy got the logged adds first
  const auto more = random_keys(100, 13);
  f->add_async(batch_of(more, memory_space::device), nullptr);
  plain->add(batch_of(more));
  EXPECT_EQ(f->count(batch_of(more)), 100u);  // small probe: the mirror, copied again
  EXPECT_EQ(words_of(*f), words_of(*plain));
  EXPECT_EQ(f->dispatch().gpu_batches, 2u);
}

TEST(AutoBackend, AfterDeviceWordsEveryOperationSeesWhatKernelsWroteThroughIt) {
  const layout l = test_layout();
  auto f = hybrid(l, model(50e-6, 1e9, 1e-6, 40e6, 1e-6));
  auto plain = make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
  const auto keys = random_keys(10, 14);
  f->add(batch_of(keys));
  plain->add(batch_of(keys));
  ASSERT_EQ(f->dispatch().cpu_batches, 1u);  // small: the mirror
  const std::uint32_t* device = f->device_words();  // the GPU copy, brought up to date
  const std::size_t words = l.num_words();
  EXPECT_TRUE(std::equal(device, device + words, words_of(*plain).begin()));
  EXPECT_NE(f->dispatch().mirror_note.find("device_words()"), std::string::npos) << f->dispatch().mirror_note;

  // A user kernel adds keys through the address (device_ref::add); the filter is not told.
  const auto written = random_keys(10, 15);
  auto kernel_bits = make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
  kernel_bits->add(batch_of(written));
  plain->add(batch_of(written));
  auto* writable = const_cast<std::uint32_t*>(device);
  const std::vector<std::uint32_t> kernel_words = words_of(*kernel_bits);
  for (std::size_t i = 0; i < words; ++i) writable[i] |= kernel_words[i];

  // Small probes, which the model prices far lower on the CPU, see those keys.
  answers found(new bool[10]);
  f->contains(batch_of(written), found.get());
  EXPECT_TRUE(std::all_of(found.get(), found.get() + 10, [](bool b) { return b; }));
  EXPECT_EQ(f->count(batch_of(written)), 10u);
  std::vector<std::uint64_t> rows(10);
  EXPECT_EQ(f->select(batch_of(written), rows.data()), 10u);
  // So do the words, the popcount and later adds, all on the GPU copy.
  EXPECT_EQ(words_of(*f), words_of(*plain));
  EXPECT_EQ(f->popcount(), plain->popcount());
  const auto later = random_keys(10, 16);
  f->add(batch_of(later));
  plain->add(batch_of(later));
  EXPECT_TRUE(std::equal(device, device + words, words_of(*plain).begin()));
  EXPECT_EQ(f->dispatch().cpu_batches, 1u);
  EXPECT_EQ(f->dispatch().gpu_batches, 4u);  // contains, count, select, add
}

TEST(AutoBackend, AnAsyncStringCallIsCheckedOnTheGpuBeforeTheNextBatchRunsOnTheMirror) {
  auto [device, f] = hybrid_observed(test_layout(), model(50e-6, 1e9, 1e-6, 40e6, 1e-6));
  const auto keys = random_keys(10, 17);
  f->add(batch_of(keys));  // the mirror
  ASSERT_EQ(f->dispatch().cpu_batches, 1u);
  EXPECT_EQ(device->synchronizations, 0);  // no _async string call: never asks the GPU
  std::uint64_t hits = 0;
  f->count_async(batch_of(keys, memory_space::device), &hits, nullptr);
  EXPECT_EQ(hits, 10u);
  EXPECT_EQ(f->count(batch_of(keys)), 10u);
  EXPECT_EQ(device->synchronizations, 0);  // integer _async calls defer no error

  const strings text(20, 18);
  key_batch device_text = text.batch();
  device_text.space = memory_space::device;
  f->add_async(device_text, nullptr);
  device->deferred_error = true;
  EXPECT_THROW((void)f->count(batch_of(keys)), invalid_argument);  // small: the mirror, after the check
  EXPECT_EQ(device->synchronizations, 1);
  EXPECT_EQ(f->count(batch_of(keys)), 10u);  // reported once
  EXPECT_EQ(device->synchronizations, 1);
  EXPECT_GT(f->dispatch().cpu_batches, 1u);
}

TEST(AutoBackend, AWriteThatFailsPartwayLeavesOneCurrentCopy) {
  auto [device, f] = hybrid_observed(test_layout(), typical);
  const auto small = random_keys(10, 19);
  answers found(new bool[10]);
  f->add(batch_of(small));  // the GPU, and then small probes until the mirror is bought
  while (f->dispatch().copies_to_cpu == 0) f->contains(batch_of(small), found.get());
  const auto big = random_keys(100000, 20);  // big: the GPU
  device->fail_adds = true;
  EXPECT_THROW(f->add(batch_of(big)), cuda_error);
  device->fail_adds = false;
  // The first half landed on the GPU copy. A small probe would run on the
  // mirror if it were still marked current, and miss those keys; it is stale,
  // so the probe runs on the GPU and agrees with a device probe.
  const std::vector<std::uint64_t> landed(big.begin(), big.begin() + 5);
  answers on_cpu(new bool[5]), on_gpu(new bool[5]);
  f->contains(batch_of(landed), on_cpu.get());
  f->contains(batch_of(landed, memory_space::device), on_gpu.get());
  EXPECT_TRUE(std::equal(on_cpu.get(), on_cpu.get() + 5, on_gpu.get()));
  EXPECT_TRUE(std::all_of(on_cpu.get(), on_cpu.get() + 5, [](bool b) { return b; }));
  EXPECT_EQ(f->dispatch().copies_to_cpu, 1u);
}

TEST(AutoBackend, AFailedOpportunisticCopyDoesNotFailTheCall) {
  auto [device, f] = hybrid_observed(test_layout(), typical);
  const auto small = random_keys(10, 21);
  f->add(batch_of(small));
  device->fail_reads = true;  // GPU -> mirror copies fail
  answers found(new bool[10]);
  for (int call = 0; call < 50; ++call) {  // the regret reaches the copy's price at the 21st
    ASSERT_NO_THROW(f->contains(batch_of(small), found.get())) << call;
    ASSERT_TRUE(std::all_of(found.get(), found.get() + 10, [](bool b) { return b; }));
  }
  EXPECT_EQ(f->dispatch().copies_to_cpu, 0u);
  EXPECT_EQ(f->dispatch().cpu_batches, 0u);
  device->fail_reads = false;
  for (int call = 0; call < 50; ++call) f->contains(batch_of(small), found.get());
  EXPECT_EQ(f->dispatch().copies_to_cpu, 1u);
  EXPECT_GT(f->dispatch().cpu_batches, 0u);
}

TEST(AutoBackend, NoMirrorAboveTheMemoryLimitOrWhenItCannotBeAllocated) {
  const layout l = test_layout();
  auto capped = hybrid(l, typical, l.size_bytes() - 1);
  EXPECT_NE(capped->dispatch().mirror_note.find("larger than the mirror limit"), std::string::npos)
      << capped->dispatch().mirror_note;
  auto failing = make_hybrid_backend(
      std::make_unique<fake_gpu>(l),
      []() -> std::unique_ptr<backend_impl> { throw allocation_error("no memory for the mirror", 1); },
      model(50e-6, 1e9, 1e-6, 40e6, 1e-6), std::uint64_t{1} << 40);
  EXPECT_EQ(failing->dispatch().mirror_note, "");
  for (backend_impl* f : {capped.get(), failing.get()}) {
    const auto keys = random_keys(10, 16);
    for (int i = 0; i < 1000; ++i) f->add(batch_of(keys));
    EXPECT_EQ(f->count(batch_of(keys)), 10u);
    EXPECT_EQ(f->dispatch().cpu_batches, 0u);
    EXPECT_EQ(f->dispatch().copies_to_cpu, 0u);
    EXPECT_EQ(f->dispatch().gpu_batches, 1001u);
  }
  EXPECT_NE(failing->dispatch().mirror_note.find("could not be allocated: no memory for the mirror"),
            std::string::npos)
      << failing->dispatch().mirror_note;
}

TEST(AutoBackend, AnInvalidCostModelIsRefusedNamingTheField) {
  cost_model bad = typical;
  bad.points[0].gpu_probe.keys_per_s = -1;
  try {
    hybrid(test_layout(), bad);
    FAIL() << "accepted";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("points[0].gpu_probe.keys_per_s"), std::string::npos) << e.what();
  }
}

TEST(AutoBackend, WithoutAGpuTheAutomaticFilterIsAPlainCpuFilter) {
  if (query_gpu().available) GTEST_SKIP() << "a GPU is present; covered by the GPU tests";
  filter f = filter::create(1000, 0.01);
  EXPECT_EQ(f.where(), backend::cpu);
  EXPECT_FALSE(f.dispatch().mirrored);
  EXPECT_NE(f.backend_description().find("auto: no GPU"), std::string::npos);
  EXPECT_NO_THROW(f.synchronize());  // nothing is ever deferred on the CPU
}

}  // namespace
}  // namespace gbf::detail
