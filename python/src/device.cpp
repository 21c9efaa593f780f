// Keys in GPU memory: CuPy, PyTorch, Numba, JAX ... through __cuda_array_interface__
// (v3) or DLPack (__dlpack__ / __dlpack_device__ with a CUDA device). The keys stay on
// the device and run on the filter's GPU.
//
// Streams. Work runs on one CUDA stream S:
//   * the `stream=` argument when given: an int (a cudaStream_t value; 1 = legacy
//     default stream, 2 = per-thread default stream) or an object with `.ptr` (CuPy)
//     or `.cuda_stream` (PyTorch);
//   * else the stream in the array's __cuda_array_interface__, when it names one;
//   * else the legacy default stream (what CuPy and PyTorch use unless told otherwise).
// DLPack producers are handed S (`__dlpack__(stream=S)`), so their pending writes are
// ordered before our reads; a __cuda_array_interface__ stream other than S is made to
// precede S with an event.
//
// add and contains are stream-ordered (`add_async`, `contains_async`): they return
// before the GPU finishes, and results are ready in the order of S (call
// Filter.synchronize() or S's synchronize before reading them from elsewhere). Until an
// event recorded after the work has completed, the filter keeps the key arrays alive.
// add_new, count and select wait for S, then run the library's synchronous calls on the
// device pointers (the library has no add_new_async, and count/select return host values).
//
// Results are device arrays: `out=` when given (a device bool/uint8 array of n items),
// else memory from cudaMalloc, freed with cudaFree when the result is dropped, returned
// as a CuPy array for CuPy keys, a torch tensor for torch keys, and otherwise as an
// object with __dlpack__ / __dlpack_device__ (cupy.from_dlpack, torch.from_dlpack).
//
// This file is compiled without a GPU in CI and has not yet run on one.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/ndarray.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "binding.hpp"
#include "dlpack.hpp"

#if defined(GBF_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace gbf::python {
namespace {

using detail::key_kind;

bool has_attr(nb::handle obj, const char* name) {
  return PyObject_HasAttrString(obj.ptr(), name) == 1;
}

// Refuses device keys on a filter whose bits are not on a GPU (same words as the library).
void require_gpu_filter(const py_filter& self) {
  if (self.f.where() != backend::gpu)
    throw invalid_argument(
        "keys are in device memory but this filter uses the CPU backend; copy them to the host "
        "(e.g. cupy.asnumpy) or make the filter with backend='gpu'");
}

}  // namespace

bool is_device_array(nb::handle obj) {
  if (has_attr(obj, "__cuda_array_interface__")) return true;
  if (!has_attr(obj, "__dlpack_device__") || PyArray_Check(obj.ptr())) return false;
  nb::object where = obj.attr("__dlpack_device__")();
  const int type = nb::cast<int>(nb::cast<nb::tuple>(where)[0]);
  return type == dlpack::cuda || type == dlpack::cuda_managed;
}

#if defined(GBF_HAS_CUDA)

namespace {

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw cuda_error(std::string(call) + " failed: " + cudaGetErrorName(status) + ": " +
                         cudaGetErrorString(status),
                     static_cast<int>(status));
  }
}

// The protocols' stream numbers: 1 legacy default (cudaStream_t 0), 2 per-thread default.
stream_t stream_from_protocol(std::uintptr_t value) {
  if (value == 1 || value == 0) return nullptr;
  if (value == 2) return reinterpret_cast<stream_t>(cudaStreamPerThread);
  return reinterpret_cast<stream_t>(value);
}
std::uintptr_t stream_to_protocol(stream_t s) {
  if (s == nullptr) return 1;
  if (s == reinterpret_cast<stream_t>(cudaStreamPerThread)) return 2;
  return reinterpret_cast<std::uintptr_t>(s);
}

// The `stream=` argument: None, an int, or a CuPy / PyTorch stream object.
std::optional<stream_t> stream_argument(nb::handle stream) {
  if (stream.is_none()) return std::nullopt;
  nb::handle value = stream;
  nb::object attr;
  if (!PyLong_Check(stream.ptr())) {
    if (has_attr(stream, "ptr")) attr = stream.attr("ptr");
    else if (has_attr(stream, "cuda_stream")) attr = stream.attr("cuda_stream");
    else throw nb::type_error("stream must be an int (cudaStream_t), or a CuPy / PyTorch stream");
    value = attr;
  }
  return stream_from_protocol(nb::cast<std::uintptr_t>(value));
}

// Device keys (or a device result array) read from a protocol, and what keeps them alive.
struct device_array {
  void* data = nullptr;
  std::size_t count = 0;
  char kind = 'i';           // 'i', 'u', 'b' (bool)
  std::size_t itemsize = 0;
  bool read_only = false;
  int device = -1;
  stream_t stream = nullptr;  // the stream the work runs on
  nb::object owner;           // the array, or a capsule owning a DLPack tensor
};

int device_of(const void* p) {
  cudaPointerAttributes attributes{};
  check(cudaPointerGetAttributes(&attributes, p), "cudaPointerGetAttributes");
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw invalid_argument("the array claims to be on a CUDA device but its memory is not device memory");
  return attributes.device;
}

// S waits for the work already queued on `producer`.
void order_after(stream_t producer, stream_t s) {
  if (producer == s) return;
  cudaEvent_t ready = nullptr;
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cudaEventRecord(ready, producer);
  const cudaError_t status = cudaStreamWaitEvent(s, ready, 0);
  cudaEventDestroy(ready);
  check(status, "cudaStreamWaitEvent");
}

device_array from_cuda_array_interface(nb::handle obj, std::optional<stream_t> requested,
                                       const char* role) {
  nb::dict cai = nb::cast<nb::dict>(obj.attr("__cuda_array_interface__"));
  const std::string what = std::string(role) + " (__cuda_array_interface__)";
  nb::tuple shape = nb::cast<nb::tuple>(cai["shape"]);
  if (shape.size() != 1)
    throw nb::value_error((what + ": must be 1-D, got " + std::to_string(shape.size()) + " dimensions").c_str());
  device_array a;
  a.count = nb::cast<std::size_t>(shape[0]);
  const std::string typestr = nb::cast<std::string>(cai["typestr"]);
  if (typestr.size() < 3 || typestr[0] == '>')
    throw nb::type_error((what + ": unsupported typestr '" + typestr + "'").c_str());
  a.kind = typestr[1];
  a.itemsize = static_cast<std::size_t>(std::stoul(typestr.substr(2)));
  nb::tuple data = nb::cast<nb::tuple>(cai["data"]);
  a.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(data[0]));
  a.read_only = nb::cast<bool>(data[1]);
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    nb::tuple strides = nb::cast<nb::tuple>(cai["strides"]);
    if (a.count > 1 && nb::cast<std::size_t>(strides[0]) != a.itemsize)
      throw nb::value_error((what + ": device arrays must be contiguous; copy it first "
                                    "(cupy.ascontiguousarray, tensor.contiguous())").c_str());
  }
  if (cai.contains("mask") && !cai["mask"].is_none())
    throw nb::value_error((what + ": masked arrays are not supported").c_str());
  std::optional<stream_t> producer;
  if (cai.contains("stream") && !cai["stream"].is_none())
    producer = stream_from_protocol(nb::cast<std::uintptr_t>(cai["stream"]));
  a.stream = requested ? *requested : producer ? *producer : nullptr;
  if (producer) order_after(*producer, a.stream);
  a.device = a.count > 0 ? device_of(a.data) : 0;
  a.owner = nb::borrow(obj);
  return a;
}

// Owns a DLPack tensor taken from a capsule; calls its deleter when dropped.
struct dlpack_owner {
  void* managed = nullptr;
  bool versioned = false;
  ~dlpack_owner() {
    if (managed == nullptr) return;
    if (versioned) {
      auto* t = static_cast<dlpack::managed_tensor_versioned*>(managed);
      if (t->deleter) t->deleter(t);
    } else {
      auto* t = static_cast<dlpack::managed_tensor*>(managed);
      if (t->deleter) t->deleter(t);
    }
  }
};

device_array from_dlpack(nb::handle obj, std::optional<stream_t> requested, const char* role) {
  nb::tuple where = nb::cast<nb::tuple>(obj.attr("__dlpack_device__")());
  device_array a;
  a.device = nb::cast<int>(where[1]);
  a.stream = requested ? *requested : nullptr;
  nb::object capsule;
  try {
    capsule = obj.attr("__dlpack__")(nb::arg("stream") = stream_to_protocol(a.stream));
  } catch (nb::python_error& e) {
    // A producer older than the stream argument (DLPack before the array API's 2021
    // revision): take the tensor as it is and wait for the device instead.
    if (!e.matches(PyExc_TypeError)) throw;
    capsule = obj.attr("__dlpack__")();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  auto owner = std::make_unique<dlpack_owner>();
  const dlpack::tensor* t = nullptr;
  if (PyCapsule_IsValid(capsule.ptr(), "dltensor_versioned")) {
    auto* m = static_cast<dlpack::managed_tensor_versioned*>(
        PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned");
    owner->managed = m;
    owner->versioned = true;
    t = &m->dl_tensor;
    a.read_only = (m->flags & dlpack::flag_read_only) != 0;
  } else if (PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
    auto* m = static_cast<dlpack::managed_tensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    owner->managed = m;
    t = &m->dl_tensor;
  } else {
    throw nb::type_error((std::string(role) + ": __dlpack__() did not return a DLPack capsule").c_str());
  }
  const std::string what = std::string(role) + " (DLPack)";
  if (t->ndim != 1)
    throw nb::value_error((what + ": must be 1-D, got " + std::to_string(t->ndim) + " dimensions").c_str());
  if (t->dtype.lanes != 1) throw nb::type_error((what + ": vector dtypes are not supported").c_str());
  a.count = static_cast<std::size_t>(t->shape[0]);
  if (t->strides != nullptr && a.count > 1 && t->strides[0] != 1)
    throw nb::value_error((what + ": device arrays must be contiguous; copy it first "
                                  "(cupy.ascontiguousarray, tensor.contiguous())").c_str());
  a.kind = t->dtype.code == dlpack::int_code ? 'i'
         : t->dtype.code == dlpack::uint_code ? 'u'
         : t->dtype.code == dlpack::bool_code ? 'b' : 'f';
  a.itemsize = t->dtype.bits / 8u;
  a.data = static_cast<std::uint8_t*>(t->data) + t->byte_offset;
  a.owner = nb::capsule(owner.release(), [](void* p) noexcept { delete static_cast<dlpack_owner*>(p); });
  return a;
}

device_array read_device_array(nb::handle obj, std::optional<stream_t> requested, const char* role) {
  if (has_attr(obj, "__cuda_array_interface__")) return from_cuda_array_interface(obj, requested, role);
  return from_dlpack(obj, requested, role);
}

device_array read_device_keys(nb::handle obj, nb::handle stream) {
  device_array a = read_device_array(obj, stream_argument(stream), "device keys");
  if ((a.kind != 'i' && a.kind != 'u') || (a.itemsize != 4 && a.itemsize != 8))
    throw nb::type_error("device keys must be 32- or 64-bit integers (device string keys are "
                         "not supported from Python yet)");
  return a;
}

// Runs fn with the keys as const uint32_t* or const uint64_t* (a key hashes its bytes).
template <class Fn>
decltype(auto) with_keys(const device_array& keys, Fn&& fn) {
  if (keys.itemsize == 4) return fn(static_cast<const std::uint32_t*>(keys.data));
  return fn(static_cast<const std::uint64_t*>(keys.data));
}

// Makes `device` current for the scope (allocations land on the keys' GPU).
struct device_scope {
  int previous = -1;
  explicit device_scope(int device) {
    check(cudaGetDevice(&previous), "cudaGetDevice");
    if (device >= 0 && device != previous) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~device_scope() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous) cudaSetDevice(previous);
  }
};

// Device memory from cudaMalloc, freed with cudaFree when the last reference goes.
struct device_buffer {
  void* data = nullptr;
  int device = 0;
  device_buffer(std::size_t bytes, int on_device) : device(on_device) {
    device_scope scope(device);
    check(cudaMalloc(&data, bytes > 0 ? bytes : 1), "cudaMalloc");
  }
  ~device_buffer() {
    device_scope scope(device);
    cudaFree(data);
  }
};

// A result: `out` (checked) or a new device array of n items of `itemsize` bytes.
struct device_result {
  void* data = nullptr;
  nb::object array;  // `out`, or null until wrap_result
  std::shared_ptr<device_buffer> buffer;
};

device_result result_for(const device_array& keys, nb::handle out, std::size_t itemsize,
                         const char* what) {
  device_result r;
  if (!out.is_none()) {
    device_array o = read_device_array(out, keys.stream, "out");
    if (itemsize != 1 || o.itemsize != 1 || (o.kind != 'b' && o.kind != 'u' && o.kind != 'i') ||
        o.read_only || o.count != keys.count)
      throw nb::value_error((std::string(what) + ": out must be a writable device array of " +
                             std::to_string(keys.count) + " bool or uint8 items").c_str());
    r.data = o.data;
    r.array = nb::borrow(out);
    return r;
  }
  r.buffer = std::make_shared<device_buffer>(keys.count * itemsize, keys.device);
  r.data = r.buffer->data;
  return r;
}

// The framework of the keys' type: results come back as the same kind of array.
nb::object same_family(nb::handle keys, nb::object result) {
  nb::object module = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(keys.ptr()))).attr("__module__");
  const std::string name = nb::cast<std::string>(module);
  if (name.rfind("cupy", 0) == 0) return nb::module_::import_("cupy").attr("from_dlpack")(result);
  if (name.rfind("torch", 0) == 0) return nb::module_::import_("torch").attr("from_dlpack")(result);
  return result;
}

// Wraps `count` items of a new device result as a DLPack-capable array.
template <class T>
nb::object wrap_result(nb::handle keys, device_result& r, std::size_t count, int device) {
  if (r.array.is_valid()) return r.array;
  auto* keep = new std::shared_ptr<device_buffer>(r.buffer);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<device_buffer>*>(p); });
  std::size_t shape[1] = {count};
  nb::ndarray<T, nb::ndim<1>, nb::device::cuda> array(r.data, 1, shape, owner, nullptr,
                                                      nb::dtype<T>(), nb::device::cuda::value, device);
  return same_family(keys, nb::cast(array));
}

// Keeps key arrays alive until their stream-ordered work has completed.
struct pending_work {
  struct entry {
    cudaEvent_t done;
    nb::object keys;
  };
  std::vector<entry> entries;

  ~pending_work() { wait(); }
  void prune() {
    std::size_t kept = 0;
    for (auto& e : entries) {
      if (cudaEventQuery(e.done) == cudaSuccess) {
        cudaEventDestroy(e.done);
        e.keys = nb::object();
      } else {
        entries[kept++] = std::move(e);
      }
    }
    entries.resize(kept);
  }
  void add(stream_t stream, nb::object keys) {
    prune();
    cudaEvent_t done = nullptr;
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check(cudaEventRecord(done, stream), "cudaEventRecord");
    entries.push_back({done, std::move(keys)});
  }
  void wait() {
    for (auto& e : entries) {
      cudaEventSynchronize(e.done);
      cudaEventDestroy(e.done);
    }
    entries.clear();
  }
};

pending_work& pending(py_filter& self) {
  if (!self.device_pending) self.device_pending = std::make_shared<pending_work>();
  return *static_cast<pending_work*>(self.device_pending.get());
}

void wait_for(stream_t stream) {
  nb::gil_scoped_release release;
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

}  // namespace

void device_add(py_filter& self, nb::handle keys_obj, nb::handle stream) {
  require_gpu_filter(self);
  device_array keys = read_device_keys(keys_obj, stream);
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    with_keys(keys, [&](auto* k) { self.f.add_async(k, keys.count, keys.stream); });
  }
  pending(self).add(keys.stream, keys.owner);
}

nb::object device_contains(py_filter& self, nb::handle keys_obj, nb::handle out, nb::handle stream) {
  require_gpu_filter(self);
  device_array keys = read_device_keys(keys_obj, stream);
  device_result r = result_for(keys, out, 1, "contains");
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    with_keys(keys, [&](auto* k) {
      self.f.contains_async(k, keys.count, static_cast<bool*>(r.data), keys.stream);
    });
  }
  pending(self).add(keys.stream, keys.owner);
  return wrap_result<bool>(keys_obj, r, keys.count, keys.device);
}

nb::object device_add_new(py_filter& self, nb::handle keys_obj, nb::handle out, nb::handle stream) {
  require_gpu_filter(self);
  device_array keys = read_device_keys(keys_obj, stream);
  device_result r = result_for(keys, out, 1, "add_new");
  wait_for(keys.stream);
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    with_keys(keys, [&](auto* k) { self.f.add_new(k, keys.count, static_cast<bool*>(r.data)); });
  }
  return wrap_result<bool>(keys_obj, r, keys.count, keys.device);
}

std::uint64_t device_count(py_filter& self, nb::handle keys_obj, nb::handle stream) {
  require_gpu_filter(self);
  device_array keys = read_device_keys(keys_obj, stream);
  wait_for(keys.stream);
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  return with_keys(keys, [&](auto* k) { return self.f.count(k, keys.count); });
}

nb::object device_select(py_filter& self, nb::handle keys_obj, nb::handle stream) {
  require_gpu_filter(self);
  device_array keys = read_device_keys(keys_obj, stream);
  device_result r = result_for(keys, nb::none(), sizeof(std::uint64_t), "select");
  wait_for(keys.stream);
  std::uint64_t kept = 0;
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    kept = with_keys(keys, [&](auto* k) {
      return self.f.select(k, keys.count, static_cast<std::uint64_t*>(r.data));
    });
  }
  // Row numbers are < 2^63: the uint64 rows read as int64, like the host select.
  return wrap_result<std::int64_t>(keys_obj, r, kept, keys.device);
}

void device_synchronize(py_filter& self) {
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    self.f.synchronize();
  }
  if (self.device_pending) pending(self).wait();
}

std::vector<double> device_time_op(py_filter& self, nb::handle keys_obj, const std::string& op,
                                   std::size_t calls) {
  require_gpu_filter(self);
  device_array keys = read_device_keys(keys_obj, nb::none());
  device_result found = result_for(keys, nb::none(), 1, "_time_device_op");
  wait_for(keys.stream);
  std::vector<double> seconds;
  seconds.reserve(calls);
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  with_keys(keys, [&](auto* k) {
    for (std::size_t i = 0; i < calls; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (op == "contains") self.f.contains(k, keys.count, static_cast<bool*>(found.data));
      else if (op == "add") self.f.add(k, keys.count);
      else (void)self.f.count(k, keys.count);
      const auto stop = std::chrono::steady_clock::now();
      seconds.push_back(std::chrono::duration<double>(stop - start).count());
    }
  });
  return seconds;
}

#else  // Built without CUDA: every filter is a CPU filter, so require_gpu_filter throws.

void device_add(py_filter& self, nb::handle, nb::handle) { require_gpu_filter(self); }
nb::object device_add_new(py_filter& self, nb::handle, nb::handle, nb::handle) {
  require_gpu_filter(self);
  return nb::none();
}
nb::object device_contains(py_filter& self, nb::handle, nb::handle, nb::handle) {
  require_gpu_filter(self);
  return nb::none();
}
std::uint64_t device_count(py_filter& self, nb::handle, nb::handle) {
  require_gpu_filter(self);
  return 0;
}
nb::object device_select(py_filter& self, nb::handle, nb::handle) {
  require_gpu_filter(self);
  return nb::none();
}
std::vector<double> device_time_op(py_filter& self, nb::handle, const std::string&, std::size_t) {
  require_gpu_filter(self);
  return {};
}
void device_synchronize(py_filter& self) {
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  self.f.synchronize();
}

#endif

}  // namespace gbf::python
