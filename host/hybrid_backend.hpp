// The automatic backend on a machine with a GPU: the bits on the GPU plus a CPU
// mirror, and each host batch sent to whichever copy the cost model says
// finishes it first (docs/cpu-vs-gpu.md, "The automatic backend").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gbf/cost_model.hpp"
#include "host/backend.hpp"

namespace gbf::detail {

/// Makes the CPU mirror (zeroed) the first time it is worth having.
using mirror_factory = std::function<std::unique_ptr<backend_impl>()>;

/// An automatic filter over `gpu` (zeroed; any backend works, which is how the
/// tests drive it without a GPU). The mirror is made by `make_mirror` when the
/// routing first wants it, unless the bit array is larger than
/// `mirror_limit_bytes` (then every batch runs on `gpu`). Routes by
/// `model.at(filter bytes)` and `model.copy`.
std::unique_ptr<backend_impl> make_hybrid_backend(std::unique_ptr<backend_impl> gpu,
                                                  mirror_factory make_mirror,
                                                  const cost_model& model,
                                                  std::uint64_t mirror_limit_bytes);

/// A quarter of the machine's physical memory: the largest mirror an automatic filter makes.
std::uint64_t default_mirror_limit_bytes();

}  // namespace gbf::detail
