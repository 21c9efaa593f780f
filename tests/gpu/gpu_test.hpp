// What every GPU test shares: the one fixture that skips without a GPU, the
// layout parameter with a short name, and device memory helpers. Built only
// with the CUDA backend (GBF_ENABLE_CUDA); compiled by the host compiler or nvcc.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/backend.hpp"
#include "gbf/detail/cuda_check.hpp"
#include "gbf/layout.hpp"
#include "host/gpu/runtime.hpp"

namespace gbf::test {

/// The base of every test that needs a GPU: skips it, saying why, when
/// query_gpu() finds none ("no GPU: <reason>").
class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override {
    const gpu_status gpu = query_gpu();
    if (!gpu.available) GTEST_SKIP() << "no GPU: " << gpu.description;
  }
};

/// A layout as a test parameter. Test names and gtest's "GetParam() = ..." lines
/// show only its geometry ("W8k16"), so that a skipped case is one short line.
struct layout_param {
  layout l;
};

inline void PrintTo(const layout_param& p, std::ostream* os) { *os << short_name(p.l); }

/// A name generator for INSTANTIATE_TEST_SUITE_P: the geometry, e.g. "W8k16".
struct layout_param_name {
  std::string operator()(const ::testing::TestParamInfo<layout_param>& info) const {
    return short_name(info.param.l);
  }
};

/// Every geometry of all_geometries() with `num_blocks` blocks, as parameters.
inline std::vector<layout_param> layout_params(std::uint64_t num_blocks) {
  std::vector<layout_param> params;
  for (const layout& l : all_geometries()) params.push_back({with_blocks(l, num_blocks)});
  return params;
}

/// A GPU test over layouts.
class gpu_layout_test : public gpu_test, public ::testing::WithParamInterface<layout_param> {
 protected:
  const layout& current_layout() const { return GetParam().l; }
};

/// Options of a GPU filter whose host batches stream through `chunk_keys`-key
/// chunks (0: the default) over `streams` streams (0: the default).
inline options on_gpu(std::size_t chunk_keys = 0, unsigned streams = 0) {
  options opts;
  opts.where = backend::gpu;
  opts.gpu_chunk_keys = chunk_keys;
  opts.gpu_streams = streams;
  return opts;
}

using detail::to_device;
using detail::to_host;

/// A device copy of `values`.
template <class T>
detail::device_buffer<T> to_device(const std::vector<T>& values) {
  return to_device(values.data(), values.size());
}

/// A host copy of `n` device bools.
inline std::unique_ptr<bool[]> bools_from_device(const bool* device, std::size_t n) {
  auto out = bools(n);
  if (n > 0) GBF_CUDA_TRY(cudaMemcpy(out.get(), device, n, cudaMemcpyDeviceToHost));
  return out;
}

/// The bits of a GPU filter read straight from device memory (not via words()).
inline std::vector<std::uint32_t> device_bits(const std::uint32_t* device_words, const layout& l) {
  return to_host(device_words, l.num_words());
}

}  // namespace gbf::test
