// Placing a backend (host/backend.hpp): backend::automatic is the GPU when
// query_gpu() finds one, else the CPU, with the reason; explicit choices are
// taken as given; automatic falls back to the CPU when the GPU cannot hold the
// filter; _async calls are refused on the CPU; a GPU backend cannot be made
// without a GPU. Runs on any machine: each case says what it needs.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/support.hpp"
#include "gbf/backend.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/scaling_filter.hpp"
#include "host/backend.hpp"
#include "host/bloom_backend.hpp"
#include "host/keys.hpp"

namespace gbf::detail {
namespace {

using gbf::test::message_of;

TEST(Resolve, ExplicitChoicesAreTakenAsGivenWithoutAReason) {
  for (backend where : {backend::cpu, backend::gpu}) {
    options opts;
    opts.where = where;
    std::string reason;
    EXPECT_EQ(resolve(opts, &reason), where) << to_string(where);
    EXPECT_EQ(reason, "") << to_string(where);
    EXPECT_EQ(resolve(opts, nullptr), where);
  }
}

TEST(Resolve, AutomaticIsTheGpuWhenPresentElseTheCpuSayingWhy) {
  const gpu_status gpu = query_gpu();
  std::string reason;
  const backend chosen = resolve(options{}, &reason);
  if (gpu.available) {
    EXPECT_EQ(chosen, backend::gpu);
    EXPECT_EQ(reason, "auto: GPU present");
  } else {
    EXPECT_EQ(chosen, backend::cpu);
    EXPECT_FALSE(gpu.description.empty());
    EXPECT_EQ(reason, "auto: no GPU (" + gpu.description + ")");
  }
  EXPECT_EQ(resolve(options{}, nullptr), chosen);
}

// place_resolved with stand-in backends: which maker ran, and what it left in the description.
struct placement {
  std::unique_ptr<backend> impl;
  std::string description;
  int gpu_tries = 0;
  int cpu_tries = 0;
};

template <class GpuFailure>
void place_into(placement& p, backend asked, backend resolved, const std::string& reason,
                const GpuFailure& failure, bool cpu_fails = false) {
  p.impl = place_resolved(
      asked, resolved, reason, p.description,
      [&]() -> std::unique_ptr<backend> {
        ++p.gpu_tries;
        p.description = "GPU 0";
        failure();
        return std::make_unique<backend>(backend::gpu);
      },
      [&]() -> std::unique_ptr<backend> {
        ++p.cpu_tries;
        if (cpu_fails) throw allocation_error("cannot allocate 64 bytes of host memory", 64);
        p.description = "CPU";
        return std::make_unique<backend>(backend::cpu);
      });
}

template <class GpuFailure>
placement place_with(backend asked, backend resolved, const std::string& reason, const GpuFailure& failure,
                     bool cpu_fails = false) {
  placement p;
  place_into(p, asked, resolved, reason, failure, cpu_fails);
  return p;
}

const auto gpu_works = [] {};
const auto gpu_memory_full = [] { throw allocation_error("cannot allocate 96 bytes of device memory", 96); };

TEST(Place, AutomaticFallsBackToTheCpuWhenTheGpuCannotHoldTheFilter) {
  const placement p = place_with(backend::automatic, backend::gpu, "auto: GPU present", gpu_memory_full);
  ASSERT_NE(p.impl, nullptr);
  EXPECT_EQ(*p.impl, backend::cpu);
  EXPECT_EQ(p.gpu_tries, 1);
  EXPECT_EQ(p.cpu_tries, 1);
  EXPECT_EQ(p.description,
            "CPU; auto: GPU present but it could not hold this filter (cannot allocate 96 bytes of "
            "device memory), so the CPU");
}

TEST(Place, AutomaticTakesTheGpuWhenItHoldsTheFilter) {
  const placement p = place_with(backend::automatic, backend::gpu, "auto: GPU present", gpu_works);
  EXPECT_EQ(*p.impl, backend::gpu);
  EXPECT_EQ(p.cpu_tries, 0);
  EXPECT_EQ(p.description, "GPU 0; auto: GPU present");
}

TEST(Place, AnExplicitGpuChoiceFailsForWantOfGpuMemory) {
  placement p;
  EXPECT_THROW(place_into(p, backend::gpu, backend::gpu, "", gpu_memory_full), allocation_error);
  EXPECT_EQ(p.impl, nullptr);
  EXPECT_EQ(p.gpu_tries, 1);
  EXPECT_EQ(p.cpu_tries, 0);
}

TEST(Place, OtherGpuErrorsAreNotHiddenByTheFallback) {
  const auto gpu_broken = [] { throw cuda_error("cudaMalloc failed: an illegal memory access", 700); };
  placement p;
  EXPECT_THROW(place_into(p, backend::automatic, backend::gpu, "auto: GPU present", gpu_broken), cuda_error);
  EXPECT_EQ(p.cpu_tries, 0);
}

TEST(Place, PlaceResolvesWhatTheOptionsAsk) {
  // Without a GPU an automatic choice is the CPU (with the reason); an explicit CPU
  // choice never tries the GPU. (With a GPU, GpuBackend.PlaceHandsAnAutomaticChoiceToTheFallback.)
  for (backend where : {backend::cpu, backend::automatic}) {
    if (where == backend::automatic && query_gpu().available) continue;
    options opts;
    opts.where = where;
    std::string description;
    int gpu_tries = 0;
    const auto made = place(
        opts, description,
        [&]() -> std::unique_ptr<backend> {
          ++gpu_tries;
          return std::make_unique<backend>(backend::gpu);
        },
        [&]() -> std::unique_ptr<backend> {
          description = "CPU";
          return std::make_unique<backend>(backend::cpu);
        });
    EXPECT_EQ(*made, backend::cpu) << to_string(where);
    EXPECT_EQ(gpu_tries, 0);
    EXPECT_EQ(description.rfind("CPU", 0), 0u) << description;
    EXPECT_EQ(description.find("auto: no GPU") != std::string::npos, where == backend::automatic) << description;
  }
}

TEST(Place, TheCpusOwnAllocationFailureReachesTheCaller) {
  try {
    place_with(backend::automatic, backend::gpu, "auto: GPU present", gpu_memory_full, /*cpu_fails=*/true);
    FAIL() << "no error when neither side could hold the filter";
  } catch (const allocation_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot allocate 64 bytes of host memory");
  }
}

TEST(Place, TheCpuIsTakenAsResolvedWithTheReason) {
  for (backend asked : {backend::cpu, backend::automatic}) {
    const std::string reason = asked == backend::automatic ? "auto: no GPU (no CUDA driver)" : "";
    const placement p = place_with(asked, backend::cpu, reason, gpu_works);
    EXPECT_EQ(*p.impl, backend::cpu);
    EXPECT_EQ(p.gpu_tries, 0);
    EXPECT_EQ(p.description, reason.empty() ? "CPU" : "CPU; " + reason);
  }
}

TEST(Backend, ValuesOutsideAnEnumsListAreRefusedByEveryKind) {
  // An enum holds any value of its type (a cast, an uninitialised field, an FFI
  // call); such a value must not silently pick a backend or a kernel.
  options bad_where = test::on_cpu(1);
  bad_where.where = static_cast<backend>(77);
  options bad_simd = test::on_cpu(1);
  bad_simd.simd = static_cast<cpu_simd>(77);
  EXPECT_EQ(message_of([&] { resolve(bad_where, nullptr); }),
            "options::where = 77 is not a gbf::backend (cpu, gpu or automatic)");
  EXPECT_EQ(message_of([&] { resolve(bad_simd, nullptr); }),
            "options::simd = 77 is not a gbf::cpu_simd (automatic, scalar, avx2 or avx512)");
  const layout l = test::layout_of(8, 8, 64);
  for (const options& bad : {bad_where, bad_simd}) {
    EXPECT_THROW(filter(l, bad), invalid_argument);
    EXPECT_THROW(counting_filter(l, bad), invalid_argument);
    EXPECT_THROW(scaling_filter::create(1000, 0.01, {}, bad), invalid_argument);
    EXPECT_THROW(cuckoo_filter::create(1000, 0.01, bad), invalid_argument);
  }

  cuckoo_filter cuckoo = cuckoo_filter::create(1000, 0.01, test::on_cpu(1));
  const std::uint64_t keys[] = {1, 2, 3};
  cuckoo_status status[3];
  cuckoo_add_options how;
  how.placement = static_cast<cuckoo_placement>(9);
  EXPECT_EQ(message_of([&] { cuckoo.add(keys, 3, status, how); }),
            "add: cuckoo_add_options::placement = 9 is not a cuckoo_placement (fastest or deterministic)");
  EXPECT_EQ(cuckoo.stats().occupied_slots, 0u);
}

TEST(Backend, NamesAreShort) {
  EXPECT_STREQ(to_string(backend::cpu), "cpu");
  EXPECT_STREQ(to_string(backend::gpu), "gpu");
  EXPECT_STREQ(to_string(backend::automatic), "auto");
}

TEST(Backend, RequireSyncRefusesAsyncCallsNamingThem) {
  EXPECT_NO_THROW(require_sync({"add", nullptr, false}));
  EXPECT_THROW(require_sync({"add_async", nullptr, true}), wrong_backend);
  EXPECT_EQ(message_of([] { require_sync({"select_async", nullptr, true}); }),
            "select_async needs the GPU backend, but this filter lives on the CPU");
}

TEST(Backend, FormatBytesUsesBinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(96), "96 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(std::uint64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(std::uint64_t{5} << 40), "5.0 TiB");
}

TEST(GpuAbsent, MakeGpuBloomThrowsNoGpuSayingWhy) {
  const gpu_status gpu = query_gpu();
  if (gpu.available) GTEST_SKIP() << "a GPU is present: " << gpu.description;
  EXPECT_FALSE(gpu.description.empty());
  std::string description = "untouched";
  try {
    make_gpu_bloom(layout{}, options{}, &description);
    FAIL() << "make_gpu_bloom did not throw without a GPU";
  } catch (const no_gpu& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU"), std::string::npos) << e.what();
  }
  EXPECT_EQ(description, "untouched");
  int no_memory = 0;
  EXPECT_EQ(locate(&no_memory), memory_space::host);
}

}  // namespace
}  // namespace gbf::detail
