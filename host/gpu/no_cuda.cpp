// The GPU entry points of a build without CUDA: there is never a GPU.
#include "gbf/error.hpp"
#include "host/bloom_backend.hpp"
#include "host/counting_backend.hpp"
#include "host/cuckoo_backend.hpp"
#include "host/keys.hpp"
#include "host/parquet/prune.hpp"
#include "host/scaling_backend.hpp"

namespace gbf {

namespace {
constexpr const char* no_cuda = "gbf was built without CUDA (GBF_ENABLE_CUDA=OFF)";
}  // namespace

gpu_status query_gpu() { return {false, no_cuda}; }

namespace detail {

std::unique_ptr<bloom_backend> make_gpu_bloom(const layout&, const options&, std::string*) {
  throw no_gpu(std::string("no GPU: ") + no_cuda);
}

std::unique_ptr<counting_backend> make_gpu_counting(const layout&, std::uint32_t, const options&,
                                                    std::string*) {
  throw no_gpu(std::string("no GPU: ") + no_cuda);
}

std::unique_ptr<scaling_backend> make_gpu_scaling(const shape&, const options&, std::string*) {
  throw no_gpu(std::string("no GPU: ") + no_cuda);
}

std::unique_ptr<cuckoo_backend> make_gpu_cuckoo(const cuckoo_layout&, std::uint32_t,
                                                const options&, std::string*) {
  throw no_gpu(std::string("no GPU: ") + no_cuda);
}

memory_space locate(const void*) { return memory_space::host; }

void copy_device_to_host(void*, const void*, std::size_t) {
  throw no_gpu(std::string("no GPU: ") + no_cuda);
}

std::unique_ptr<parquet::gpu_prune_backend> parquet::make_gpu_pruner(const packed_filters&) {
  throw no_gpu(std::string("no GPU: ") + no_cuda);
}

}  // namespace detail
}  // namespace gbf
