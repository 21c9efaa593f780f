// Defaults of the GPU-only operations: a CPU filter refuses them by name.
#include "host/backend.hpp"

#include "gbf/error.hpp"

namespace gbf::detail {
namespace {
[[noreturn]] void gpu_only(const char* operation) {
  throw wrong_backend(std::string(operation) +
                      " needs the GPU backend, but this filter lives on the CPU");
}
}  // namespace

void backend_impl::add_async(const key_batch&, stream_t) { gpu_only("add_async"); }
void backend_impl::contains_async(const key_batch&, bool*, stream_t) const {
  gpu_only("contains_async");
}
void backend_impl::count_async(const key_batch&, std::uint64_t*, stream_t) const {
  gpu_only("count_async");
}
void backend_impl::select_async(const key_batch&, std::uint64_t*, std::uint64_t*,
                                stream_t) const {
  gpu_only("select_async");
}
const std::uint32_t* backend_impl::device_words() const { gpu_only("device_words"); }

}  // namespace gbf::detail
