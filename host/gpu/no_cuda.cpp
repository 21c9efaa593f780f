// The GPU entry points of a build without CUDA: there is never a GPU.
#include "host/backend.hpp"

#include "gbf/error.hpp"

namespace gbf {

gpu_status query_gpu() { return {false, "gbf was built without CUDA (GBF_ENABLE_CUDA=OFF)"}; }

namespace detail {

std::unique_ptr<backend_impl> make_gpu_backend(const layout&, std::size_t, unsigned,
                                               std::string*) {
  throw no_gpu("no GPU: gbf was built without CUDA (GBF_ENABLE_CUDA=OFF)");
}

memory_space locate(const void*) { return memory_space::host; }

void copy_device_to_host(void*, const void*, std::size_t) {
  throw no_gpu("no GPU: gbf was built without CUDA (GBF_ENABLE_CUDA=OFF)");
}

}  // namespace detail
}  // namespace gbf
