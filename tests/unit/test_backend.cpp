// Placing a backend (host/backend.hpp): backend::automatic is the GPU when
// query_gpu() finds one, else the CPU, with the reason; explicit choices are
// taken as given; _async calls are refused on the CPU; a GPU backend cannot be
// made without a GPU. Runs on any machine: each case says what it needs.
#include <gtest/gtest.h>

#include <string>

#include "tests/support.hpp"
#include "gbf/backend.hpp"
#include "gbf/error.hpp"
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
