// Checked CUDA runtime calls, RAII owners, and the GPU probe (query_gpu, locate).
#include "host/gpu/runtime.hpp"

#include <cstdio>
#include <limits>
#include <string>

#include "gbf/backend.hpp"
#include "host/backend.hpp"
#include "host/keys.hpp"
#include "kernels/words.cuh"

#ifndef GBF_CUDA_ARCHITECTURES
#define GBF_CUDA_ARCHITECTURES "unknown"
#endif

namespace gbf::detail {
namespace {

std::string describe_error(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
}

// The message of a refused allocation: the request and, when the device can
// still answer, how much memory it has free.
std::string device_allocation_message(std::size_t bytes) {
  std::string what = "cannot allocate " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) +
                     ") of device memory";
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    what += ": " + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes);
  } else {
    cudaGetLastError();  // the failed query must not linger as the next call's error
  }
  return what;
}

// The cleanup calls below cannot report a failure (they run in destructors);
// a failed one clears the runtime's last error, which would otherwise be read
// by the next launch's check and fail an unrelated, valid operation.
void forget_failure(cudaError_t status) noexcept {
  if (status != cudaSuccess) cudaGetLastError();
}

}  // namespace

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  // Clear the runtime's last error so that a later, unrelated check does not
  // report this failure a second time. (A sticky error, e.g. a kernel fault,
  // stays and every later call reports it: the context is unusable.)
  cudaGetLastError();
  throw cuda_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                       describe_error(code),
                   static_cast<int>(code));
}

std::size_t checked_bytes(std::size_t count, std::size_t size) {
  if (size != 0 && count > std::numeric_limits<std::size_t>::max() / size) {
    throw allocation_error("cannot allocate " + std::to_string(count) + " elements of " +
                               std::to_string(size) + " bytes: the size overflows",
                           std::numeric_limits<std::uint64_t>::max());
  }
  return count * size;
}

void* device_allocate(std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw allocation_error(device_allocation_message(bytes), bytes);
  }
  if (status != cudaSuccess) throw_cuda_error(status, "cudaMalloc(&p, bytes)", __FILE__, __LINE__);
  return p;
}

void device_release(void* p) noexcept {
  if (p != nullptr) forget_failure(cudaFree(p));
}

void* pinned_allocate(std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t status = cudaMallocHost(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw allocation_error("cannot allocate " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) +
                               ") of pinned host memory",
                           bytes);
  }
  if (status != cudaSuccess) {
    throw_cuda_error(status, "cudaMallocHost(&p, bytes)", __FILE__, __LINE__);
  }
  return p;
}

void pinned_release(void* p) noexcept {
  if (p != nullptr) forget_failure(cudaFreeHost(p));
}

stream::stream() { GBF_CUDA_TRY(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking)); }

stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) forget_failure(cudaStreamDestroy(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

stream::~stream() {
  if (handle_ != nullptr) forget_failure(cudaStreamDestroy(handle_));
}

void stream::synchronize() const { GBF_CUDA_TRY(cudaStreamSynchronize(handle_)); }

event::event() { GBF_CUDA_TRY(cudaEventCreateWithFlags(&handle_, cudaEventDisableTiming)); }

event& event::operator=(event&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) forget_failure(cudaEventDestroy(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

event::~event() {
  if (handle_ != nullptr) forget_failure(cudaEventDestroy(handle_));
}

void event::record(cudaStream_t s) const { GBF_CUDA_TRY(cudaEventRecord(handle_, s)); }

void event::synchronize() const { GBF_CUDA_TRY(cudaEventSynchronize(handle_)); }

namespace {

// cudaPointerGetAttributes, with ordinary host memory, null and a failed query
// all reported as cudaMemoryTypeUnregistered (the error is cleared).
cudaPointerAttributes attributes_of(const void* p) noexcept {
  static_assert(cudaMemoryTypeUnregistered == 0, "a value-initialized type reads as unregistered");
  cudaPointerAttributes attributes{};
  if (p != nullptr && cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();
    return cudaPointerAttributes{};
  }
  return attributes;
}

}  // namespace

cudaMemoryType pointer_type(const void* p) noexcept { return attributes_of(p).type; }

int pointer_device(const void* p) noexcept {
  const cudaPointerAttributes attributes = attributes_of(p);
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

device_scope::device_scope(int device) {
  GBF_CUDA_TRY(cudaGetDevice(&previous_));
  if (previous_ != device) {
    GBF_CUDA_TRY(cudaSetDevice(device));
    switched_ = true;
  }
}

device_scope::~device_scope() {
  // The caller's device existed a moment ago: this cannot fail but for a lost
  // context, which the caller's next CUDA call reports.
  if (switched_) forget_failure(cudaSetDevice(previous_));
}

memory_space locate(const void* p) {
  // Without a GPU every pointer is host memory, and the pointer query would
  // only fail with "no driver".
  if (!query_gpu().available) return memory_space::host;
  const cudaMemoryType type = pointer_type(p);
  return type == cudaMemoryTypeDevice || type == cudaMemoryTypeManaged ? memory_space::device
                                                                        : memory_space::host;
}

}  // namespace gbf::detail

namespace gbf {
namespace {

gpu_status probe_gpu() noexcept {
  try {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      // The probe's error must not surface as the next checked call's failure.
      cudaGetLastError();
      if (status == cudaErrorInsufficientDriver) return {false, "no CUDA driver"};
      if (status == cudaErrorNoDevice) return {false, "no CUDA device"};
      return {false, "cudaGetDeviceCount failed: " + detail::describe_error(status)};
    }
    if (count == 0) return {false, "no CUDA device"};
    int device = 0;
    cudaDeviceProp properties{};
    cudaError_t query = cudaGetDevice(&device);
    if (query == cudaSuccess) query = cudaGetDeviceProperties(&properties, device);
    if (query != cudaSuccess) {
      cudaGetLastError();
      return {false, "cannot query the CUDA device: " + detail::describe_error(query)};
    }
    const std::string name = std::string(properties.name) + " (sm_" +
                             std::to_string(properties.major) + std::to_string(properties.minor);
    // A device that is present may still be unable to run gbf: an architecture
    // older than the build's (the first launch would fail), or a GPU in
    // exclusive or prohibited mode that gives this process no context. Asked
    // here, `automatic` places filters on the CPU instead of failing later.
    const cudaError_t runnable = detail::gpu::kernel_image_status();
    if (runnable == cudaErrorNoKernelImageForDevice || runnable == cudaErrorInvalidDeviceFunction)
      return {false, name + ") cannot run this build of gbf, compiled for CUDA architectures " +
                         GBF_CUDA_ARCHITECTURES + " (" + detail::describe_error(runnable) +
                         "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" +
                         std::to_string(properties.major) + std::to_string(properties.minor) + ")"};
    if (runnable != cudaSuccess)
      return {false, name + ") is present but unusable: " + detail::describe_error(runnable)};
    return {true, name + ", " + detail::format_bytes(properties.totalGlobalMem) + ")"};
  } catch (...) {  // only std::bad_alloc from the strings can get here
    return {false, "cannot describe the CUDA device (out of host memory)"};
  }
}

}  // namespace

gpu_status query_gpu() {
  // Probed once per process (thread-safe static initialization): the answer
  // cannot change while the process runs, and the probe costs a driver call.
  static const gpu_status status = probe_gpu();
  return status;
}

}  // namespace gbf
