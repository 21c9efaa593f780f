// Device memory, pinned host memory and streams for the benchmarks: gbf's own
// RAII owners (gbf/detail/cuda_memory.hpp) under the benchmarks' names.
#pragma once

#include "gbf/detail/cuda_memory.hpp"

namespace gbf_bench {

/// `count` T in device memory (cudaMalloc, 256-byte aligned).
template <class T>
using device_array = gbf::detail::device_buffer<T>;
/// `count` T in page-locked host memory, which cudaMemcpyAsync copies without staging.
template <class T>
using pinned_array = gbf::detail::pinned_buffer<T>;
/// An owning stream created with cudaStreamNonBlocking.
using cuda_stream = gbf::detail::stream;

}  // namespace gbf_bench
