// The host-only part of the launch layer (kernels/launch.cuh), plain C++.
#pragma once

namespace gbf::detail::gpu {

/// Streaming multiprocessors of `device`, queried once per device; throws cuda_error.
int multiprocessors(int device);

}  // namespace gbf::detail::gpu
