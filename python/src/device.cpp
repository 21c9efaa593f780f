// Keys in GPU memory: CuPy, PyTorch, Numba, JAX ... through __cuda_array_interface__
// (v3) or DLPack (__dlpack__ / __dlpack_device__ with a CUDA device), and string keys as
// gbf.DeviceStrings (Arrow offsets, data and validity, each a CUDA array; made by hand,
// from cuDF's buffers or from an Arrow device array). The keys stay on the device and run
// on the filter's GPU.
//
// Streams. Work runs on one CUDA stream S (stream_value):
//   * the `stream=` argument when given: an int (a cudaStream_t value; 0 or 1 = legacy
//     default stream, 2 = per-thread default stream), or an object with
//     `__cuda_stream__()` (the CUDA stream protocol: (version, handle)), `.cuda_stream`
//     (torch.cuda.Stream) or `.ptr` (cupy.cuda.Stream);
//   * else the current stream of the keys' framework: torch.cuda.current_stream(device)
//     for a torch tensor, cupy.cuda.get_current_stream() for a CuPy array (so work
//     issued inside `with torch.cuda.stream(s):` / `with cupy_stream:` runs on s);
//   * else the stream in the array's __cuda_array_interface__, when it names one;
//   * else the legacy default stream.
// DLPack producers are handed S (`__dlpack__(stream=S)`), so their pending writes are
// ordered before our reads; a __cuda_array_interface__ stream other than S is made to
// precede S with an event, and so is the framework's current stream when `stream=`
// names another (torch's interface is v2 and names no stream). Events are made on the
// keys' GPU, whichever device is current.
//
// Key and offset arrays must be aligned to their item size (the kernels load whole
// items; a misaligned load is a sticky fault that ends the process's CUDA context):
// ValueError otherwise. `out=` must be on the keys' GPU.
//
// add and contains are stream-ordered (`add_async`, `contains_async`): they return
// before the GPU finishes, and results are ready in the order of S (call
// Filter.synchronize() or S's synchronize before reading them from elsewhere). Until an
// event recorded after the work has completed, the filter keeps the key arrays alive.
// add_new, count and select run the library's synchronous calls on S (the library has no
// add_new_async, and count/select return host values): their work is ordered after what
// S already holds and they return when it is done, so nothing is left to keep alive.
//
// Results are device arrays: `out=` when given (a device bool/uint8 array of n items),
// else for CuPy keys a CuPy array from its memory pool, for torch keys a torch tensor
// from its caching allocator (no cudaMalloc per call, and no cudaFree, which waits for
// the whole device, when the result is dropped), and for other keys memory from
// cudaMalloc, freed with cudaFree when the result is dropped, as an object with
// __dlpack__ / __dlpack_device__ (cupy.from_dlpack, torch.from_dlpack).
// An async contains keeps its result's memory (and out's exported view) alive until
// its work is done, as it keeps the keys.
//
// This file is compiled without a GPU in CI. It ran on an H100 on 2026-11-23 (the pytest
// suite); the other kinds' device calls and the framework-allocated results came later
// and have not yet run on a GPU.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/ndarray.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "arrow_c.hpp"
#include "binding.hpp"
#include "device_batch.hpp"
#include "dlpack.hpp"

#if defined(GBF_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace gbf::python {

void require_gpu_filter(backend where) {
  if (where != backend::gpu)
    throw invalid_argument(
        "keys are in device memory but this filter uses the CPU backend (backend='auto' places a "
        "filter on the CPU when no GPU is usable or its memory cannot hold the filter: see "
        "backend_description); copy them to the host (e.g. cupy.asnumpy) or make the filter with "
        "backend='gpu'");
}

namespace {

// gbf.DeviceStrings marks itself with this attribute (gbf/_device.py).
bool is_device_strings(nb::handle obj) { return has_attr(obj, "__gbf_device_strings__"); }

// A stream number from an int: a cudaStream_t value, or 0/1/2 as the protocols number them.
std::uintptr_t stream_number(nb::handle value, const char* what) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr()))
    throw nb::type_error((std::string(what) + " must be an int (a cudaStream_t value)").c_str());
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow < 0 || (overflow == 0 && v < 0))
    throw nb::value_error((std::string(what) + " must not be negative").c_str());
  if (overflow == 0) return static_cast<std::uintptr_t>(v);
  const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
  if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw nb::value_error((std::string(what) + " must be below 2**64 (a cudaStream_t value)").c_str());
  }
  return static_cast<std::uintptr_t>(u);
}

// The type's top-level module: "cupy" for cupy.ndarray, "torch" for torch.Tensor.
std::string framework_of(nb::handle obj) {
  nb::object module = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()))).attr("__module__");
  if (!PyUnicode_Check(module.ptr())) return {};
  const std::string name = nb::cast<std::string>(module);
  return name.substr(0, name.find('.'));
}

// An already imported module, or null: the keys' framework is loaded when one of its
// arrays exists, and importing one here would cost seconds.
nb::object imported(const char* name) {
  PyObject* module = PyImport_GetModule(nb::str(name).ptr());
  if (module == nullptr) {
    if (PyErr_Occurred()) throw nb::python_error();
    return nb::object();
  }
  return nb::steal(module);
}

}  // namespace

std::optional<std::uintptr_t> stream_value(nb::handle keys, nb::handle stream) {
  if (!stream.is_none()) {
    if (PyLong_Check(stream.ptr())) return stream_number(stream, "stream");
    if (has_attr(stream, "__cuda_stream__")) {
      nb::object pair = stream.attr("__cuda_stream__")();
      if (!PyTuple_Check(pair.ptr()) || PyTuple_GET_SIZE(pair.ptr()) != 2)
        throw nb::type_error("stream.__cuda_stream__() must return (version, handle)");
      return stream_number(PyTuple_GET_ITEM(pair.ptr(), 1), "stream.__cuda_stream__()[1]");
    }
    if (has_attr(stream, "cuda_stream")) return stream_number(stream.attr("cuda_stream"), "stream.cuda_stream");
    if (has_attr(stream, "ptr")) return stream_number(stream.attr("ptr"), "stream.ptr");
    throw nb::type_error(("stream must be an int (cudaStream_t), a CuPy or PyTorch stream, or an object "
                          "with __cuda_stream__; got " +
                          nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(stream.ptr())))))).c_str());
  }
  // DeviceStrings: the offsets array stands for the batch (its framework, its device).
  return framework_stream(is_device_strings(keys) ? nb::object(keys.attr("offsets")) : nb::borrow(keys));
}

std::optional<std::uintptr_t> framework_stream(nb::handle array) {
  const std::string framework = framework_of(array);
  if (framework == "torch") {
    nb::object torch = imported("torch");
    if (!torch.is_valid() || !has_attr(array, "device")) return std::nullopt;
    return stream_number(torch.attr("cuda").attr("current_stream")(array.attr("device")).attr("cuda_stream"),
                         "torch.cuda.current_stream().cuda_stream");
  }
  if (framework == "cupy") {
    nb::object cupy = imported("cupy");
    if (!cupy.is_valid()) return std::nullopt;
    // The current stream of the array's GPU (CuPy keeps one per device), not of
    // whichever device is current.
    nb::object get_current_stream = cupy.attr("cuda").attr("get_current_stream");
    nb::object current = has_attr(array, "device") && has_attr(array.attr("device"), "id")
                             ? get_current_stream(array.attr("device").attr("id"))
                             : get_current_stream();
    return stream_number(current.attr("ptr"), "cupy.cuda.get_current_stream().ptr");
  }
  return std::nullopt;
}

bool is_device_array(nb::handle obj) {
  if (has_attr(obj, "__cuda_array_interface__") || is_device_strings(obj)) return true;
  // Arrow arrays and streams are host memory read through the Arrow C data interface
  // (nulls, strings, slices). pyarrow >= 2x also has __dlpack_device__, which raises
  // for string arrays and arrays with nulls: it must not be asked first.
  if (has_attr(obj, "__arrow_c_array__") || has_attr(obj, "__arrow_c_stream__")) return false;
  if (!has_attr(obj, "__dlpack_device__") || PyArray_Check(obj.ptr())) return false;
  const int type = dlpack_device(obj).first;
  return type == dlpack::cuda || type == dlpack::cuda_managed;
}

bool device_keys(nb::handle keys) {
  PyObject* o = keys.ptr();
  if (PyArray_Check(o) || PyLong_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) ||
      PyList_Check(o) || PyTuple_Check(o))
    return false;
  return is_device_array(keys);
}

void no_stream_for_host(nb::handle stream) {
  if (!stream.is_none())
    throw nb::value_error("stream is for device keys (CuPy, PyTorch, ...); these keys are in host memory");
}

std::pair<int, int> dlpack_device(nb::handle obj) {
  nb::object where = obj.attr("__dlpack_device__")();
  try {
    nb::tuple pair = nb::cast<nb::tuple>(where);
    if (pair.size() != 2) throw nb::cast_error();
    return {nb::cast<int>(pair[0]), nb::cast<int>(pair[1])};
  } catch (const nb::cast_error&) {
    throw nb::type_error(("__dlpack_device__() must return a (device_type, device_id) tuple of "
                          "ints, got " + nb::cast<std::string>(nb::repr(where)))
                             .c_str());
  }
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

// The stream a batch of `keys` runs on when one is named (stream_value), as a cudaStream_t.
std::optional<stream_t> stream_argument(nb::handle keys, nb::handle stream) {
  const std::optional<std::uintptr_t> value = stream_value(keys, stream);
  if (!value) return std::nullopt;
  return stream_from_protocol(*value);
}

int device_of(const void* p) {
  cudaPointerAttributes attributes{};
  check(cudaPointerGetAttributes(&attributes, p), "cudaPointerGetAttributes");
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw invalid_argument("the array claims to be on a CUDA device but its memory is not device memory");
  return attributes.device;
}

// Makes `device` current for the scope (allocations, events and launches land on
// the keys' GPU; an event must be made on the device of the stream it is recorded on).
struct device_scope {
  int previous = -1;
  explicit device_scope(int device) {
    check(cudaGetDevice(&previous), "cudaGetDevice");
    if (device >= 0 && device != previous) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~device_scope() {
    // A failure here must not stay behind as the runtime's last error, where the next
    // launch check would report it against unrelated work.
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous && cudaSetDevice(previous) != cudaSuccess)
      cudaGetLastError();
  }
};

// S waits for the work already queued on `producer`; both streams are on `device`.
void order_after(stream_t producer, stream_t s, int device) {
  if (producer == s) return;
  device_scope on_device(device);
  cudaEvent_t ready = nullptr;
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cudaError_t status = cudaEventRecord(ready, producer);
  if (status == cudaSuccess) status = cudaStreamWaitEvent(s, ready, 0);
  cudaEventDestroy(ready);
  check(status, "ordering after the keys' stream (cudaEventRecord / cudaStreamWaitEvent)");
}

// Reads one field of a __cuda_array_interface__ dict as T; TypeError naming the
// field (and what it should be) when it is missing or of another type.
template <class T>
T cai_field(const nb::dict& cai, const char* field, const std::string& what, const char* expected) {
  if (!cai.contains(field))
    throw nb::type_error((what + ": no '" + field + "' entry").c_str());
  try {
    return nb::cast<T>(cai[field]);
  } catch (const nb::cast_error&) {
    throw nb::type_error((what + ": '" + field + "' must be " + expected + ", got " +
                          nb::cast<std::string>(nb::repr(cai[field])))
                             .c_str());
  }
}

device_array from_cuda_array_interface(nb::handle obj, std::optional<stream_t> requested,
                                       const char* role) {
  const std::string what = std::string(role) + " (__cuda_array_interface__)";
  nb::object interface = obj.attr("__cuda_array_interface__");
  if (!PyDict_Check(interface.ptr())) throw nb::type_error((what + ": must be a dict").c_str());
  nb::dict cai = nb::borrow<nb::dict>(interface);
  nb::tuple shape = cai_field<nb::tuple>(cai, "shape", what, "a tuple of ints");
  if (shape.size() != 1)
    throw nb::value_error((what + ": must be 1-D, got " + std::to_string(shape.size()) + " dimensions").c_str());
  device_array a;
  try {
    a.count = nb::cast<std::size_t>(shape[0]);
  } catch (const nb::cast_error&) {
    throw nb::type_error((what + ": 'shape' must be a tuple of non-negative ints, got " +
                          nb::cast<std::string>(nb::repr(shape)))
                             .c_str());
  }
  const std::string typestr = cai_field<std::string>(cai, "typestr", what, "a str such as '<u8'");
  // '<' or '|' byte order, a kind letter, then the item size in bytes.
  const bool sized = typestr.size() >= 3 && typestr.size() <= 4 &&
                     typestr.find_first_not_of("0123456789", 2) == std::string::npos;
  if (!sized || typestr[0] == '>')
    throw nb::type_error((what + ": unsupported typestr '" + typestr + "'").c_str());
  a.kind = typestr[1];
  a.itemsize = static_cast<std::size_t>(std::stoul(typestr.substr(2)));
  nb::tuple data = cai_field<nb::tuple>(cai, "data", what, "a (pointer, read_only) tuple");
  try {
    if (data.size() != 2) throw nb::cast_error();
    a.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(data[0]));
    a.read_only = nb::cast<bool>(data[1]);
  } catch (const nb::cast_error&) {
    throw nb::type_error((what + ": 'data' must be a (pointer, read_only) tuple, got " +
                          nb::cast<std::string>(nb::repr(data)))
                             .c_str());
  }
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    nb::tuple strides = cai_field<nb::tuple>(cai, "strides", what, "None or a tuple of ints");
    std::int64_t stride = 0;
    try {
      stride = nb::cast<std::int64_t>(strides[0]);
    } catch (const nb::cast_error&) {
      throw nb::type_error((what + ": 'strides' must be None or a tuple of ints").c_str());
    }
    if (a.count > 1 && stride != static_cast<std::int64_t>(a.itemsize))
      throw nb::value_error((what + ": device arrays must be contiguous; copy it first "
                                    "(cupy.ascontiguousarray, tensor.contiguous())").c_str());
  }
  if (cai.contains("mask") && !cai["mask"].is_none())
    throw nb::value_error((what + ": masked arrays are not supported").c_str());
  if (cai.contains("stream") && !cai["stream"].is_none())
    a.producer = stream_from_protocol(stream_number(cai["stream"], (what + ": 'stream'").c_str()));
  a.stream = requested ? *requested : a.producer ? *a.producer : nullptr;
  // An empty array may have no address to ask: the current device stands in, and
  // nothing needs ordering (no kernel reads it).
  if (a.count > 0) {
    a.device = device_of(a.data);
  } else {
    check(cudaGetDevice(&a.device), "cudaGetDevice");
  }
  if (a.producer && a.count > 0) order_after(*a.producer, a.stream, a.device);
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
  device_array a;
  a.device = dlpack_device(obj).second;
  a.stream = requested ? *requested : nullptr;
  nb::object capsule;
  try {
    capsule = obj.attr("__dlpack__")(nb::arg("stream") = stream_to_protocol(a.stream));
  } catch (nb::python_error& e) {
    // A producer older than the stream argument (DLPack before the array API's 2021
    // revision): take the tensor as it is and wait for the device instead.
    if (!e.matches(PyExc_TypeError)) throw;
    capsule = obj.attr("__dlpack__")();
    const device_scope on_its_gpu(a.device);  // the tensor's device, not the current one
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
    // A later major version may lay the tensor out otherwise: only the version
    // itself may be read (the DLPack ABI's rule), then the deleter is called.
    if (m->ver.major != 1)
      throw nb::type_error((std::string(role) + ": DLPack " + std::to_string(m->ver.major) + "." +
                            std::to_string(m->ver.minor) + " tensors are not supported (gbf reads 1.x)")
                               .c_str());
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
  a.device = t->dev.device_id;  // the tensor's own word, over __dlpack_device__'s
  a.owner = nb::capsule(owner.release(), [](void* p) noexcept { delete static_cast<dlpack_owner*>(p); });
  return a;
}

device_array read_device_array(nb::handle obj, std::optional<stream_t> requested, const char* role) {
  if (has_attr(obj, "__cuda_array_interface__")) return from_cuda_array_interface(obj, requested, role);
  return from_dlpack(obj, requested, role);
}

// "uint16", "float32", "bool": an array's dtype in words, for messages.
std::string dtype_text(const device_array& a) {
  const char* kind = a.kind == 'i' ? "int" : a.kind == 'u' ? "uint" : a.kind == 'b' ? "bool" : a.kind == 'f' ? "float" : nullptr;
  if (kind == nullptr) return std::string("kind '") + a.kind + "' of " + std::to_string(a.itemsize) + " bytes";
  return a.kind == 'b' ? std::string(kind) : kind + std::to_string(a.itemsize * 8);
}

// The kernels load whole keys (and offsets): an address that is not a multiple of
// the item size (a byte buffer viewed at an odd offset) would fault with a
// misaligned access, which is sticky and ends every CUDA user of the process.
void require_aligned(const device_array& a, const char* what) {
  if (a.count > 0 && reinterpret_cast<std::uintptr_t>(a.data) % a.itemsize != 0)
    throw nb::value_error((std::string(what) + ": address " +
                           std::to_string(reinterpret_cast<std::uintptr_t>(a.data)) +
                           " is not a multiple of the item size (" + std::to_string(a.itemsize) +
                           " bytes); copy the array (e.g. .copy()) to aligned memory")
                              .c_str());
}

// With an explicit stream S, work queued on the framework's current stream (torch
// and CuPy tensors written under `with torch.cuda.stream(s1)`) must come first:
// torch's __cuda_array_interface__ (v2) names no stream to order after.
// The framework's stream is kept in b.framework for result_for.
void order_after_framework(nb::handle array, const std::optional<stream_t>& requested,
                           device_batch& b) {
  if (!requested || b.count == 0) return;
  const std::optional<std::uintptr_t> current = framework_stream(array);
  if (!current) return;
  b.framework = stream_from_protocol(*current);
  // CuPy's interface (v3) names that very stream, already ordered before S.
  if (b.keys.producer == b.framework) return;
  order_after(*b.framework, *requested, b.device);
}

}  // namespace

device_batch read_device_batch(nb::handle obj, nb::handle stream) {
  const std::optional<stream_t> requested = stream_argument(obj, stream);
  device_batch b;
  if (!is_device_strings(obj)) {
    b.keys = read_device_array(obj, requested, "device keys");
    if ((b.keys.kind != 'i' && b.keys.kind != 'u') || (b.keys.itemsize != 4 && b.keys.itemsize != 8))
      throw nb::type_error(("device keys must be 32- or 64-bit integers, got " + dtype_text(b.keys) +
                            " (device string keys: gbf.DeviceStrings)")
                               .c_str());
    require_aligned(b.keys, "device keys");
    b.count = b.keys.count;
    b.stream = b.keys.stream;
    b.device = b.keys.device;
    b.family = nb::borrow(obj);
    b.owner = b.keys.owner;
    order_after_framework(obj, requested, b);
    return b;
  }
  b.strings = true;
  nb::object offsets = obj.attr("offsets");
  b.keys = read_device_array(offsets, requested, "DeviceStrings.offsets");
  if (b.keys.kind != 'i' || (b.keys.itemsize != 4 && b.keys.itemsize != 8))
    throw nb::type_error(("DeviceStrings.offsets must be int32 (Arrow string) or int64 (large_string), got " +
                          dtype_text(b.keys))
                             .c_str());
  require_aligned(b.keys, "DeviceStrings.offsets");
  if (b.keys.count == 0)
    throw nb::value_error("DeviceStrings.offsets must hold n + 1 offsets for n keys (at least one)");
  b.count = b.keys.count - 1;
  b.stream = b.keys.stream;
  b.device = b.keys.device;
  // The other arrays are read on S: their producers' pending writes come before it.
  b.data = read_device_array(obj.attr("data"), b.stream, "DeviceStrings.data");
  if (b.data->itemsize != 1)
    throw nb::type_error("DeviceStrings.data must be an array of bytes (uint8 or int8)");
  nb::object validity = obj.attr("validity");
  if (!validity.is_none()) {
    b.validity = read_device_array(validity, b.stream, "DeviceStrings.validity");
    if (b.validity->itemsize != 1 || b.validity->count < (b.count + 7) / 8)
      throw nb::value_error(("DeviceStrings.validity must be a uint8 bitmap of at least " +
                             std::to_string((b.count + 7) / 8) + " bytes for " +
                             std::to_string(b.count) + " keys")
                                .c_str());
  }
  for (const device_array* part : {&*b.data, b.validity ? &*b.validity : nullptr})
    if (part != nullptr && part->count > 0 && b.count > 0 && part->device != b.device)
      throw nb::value_error("DeviceStrings: offsets, data and validity must be on the same GPU");
  b.family = offsets;
  b.owner = nb::make_tuple(b.keys.owner, b.data->owner,
                           b.validity ? b.validity->owner : nb::none());
  order_after_framework(offsets, requested, b);
  return b;
}

device_buffer::device_buffer(std::size_t bytes, int on_device) : device(on_device) {
  device_scope scope(device);
  check(cudaMalloc(&data, bytes > 0 ? bytes : 1), "cudaMalloc");
}

// Never throws (a destructor; device_scope would): cudaFree runs on the buffer's GPU
// when the switch succeeds, and the caller's device is restored.
device_buffer::~device_buffer() {
  int previous = -1;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device &&
                        cudaSetDevice(device) == cudaSuccess;
  // A failure (e.g. at interpreter exit) must not linger as the next launch's error.
  if (cudaFree(data) != cudaSuccess) cudaGetLastError();
  if (switched && cudaSetDevice(previous) != cudaSuccess) cudaGetLastError();
}

namespace {

// keys.count items of `item` from the keys' framework's allocator, on the keys' GPU, and
// their address; a null object for keys of another kind (or a framework not imported).
std::pair<nb::object, void*> framework_result(const device_batch& keys, result_item item) {
  const std::string framework = framework_of(keys.family);
  if (framework == "cupy") {
    nb::object cupy = imported("cupy");
    if (!cupy.is_valid()) return {};
    const char* dtype = item == result_item::boolean ? "bool_" : item == result_item::uint8 ? "uint8" : "int64";
    device_scope on_keys_gpu(keys.device);  // CuPy allocates on the current device
    nb::object made = cupy.attr("empty")(keys.count, nb::arg("dtype") = cupy.attr(dtype));
    return {made, reinterpret_cast<void*>(nb::cast<std::uintptr_t>(made.attr("data").attr("ptr")))};
  }
  if (framework == "torch") {
    nb::object torch = imported("torch");
    if (!torch.is_valid() || !has_attr(keys.family, "device")) return {};
    const char* dtype = item == result_item::boolean ? "bool" : item == result_item::uint8 ? "uint8" : "int64";
    nb::object made = torch.attr("empty")(keys.count, nb::arg("dtype") = torch.attr(dtype),
                                          nb::arg("device") = keys.family.attr("device"));
    return {made, reinterpret_cast<void*>(nb::cast<std::uintptr_t>(made.attr("data_ptr")()))};
  }
  return {};
}

}  // namespace

device_result result_for(const device_batch& keys, nb::handle out, result_item item, const char* what) {
  device_result r;
  if (!out.is_none()) {
    const std::string wanted = std::string(what) + ": out must be a writable device array of " +
                               std::to_string(keys.count) + " bool or uint8 items";
    // Before any export: a host array's __dlpack__(stream=...) fails with its own message.
    if (!device_keys(out)) throw nb::value_error((wanted + "; this one is in host memory").c_str());
    device_array o = read_device_array(out, keys.stream, "out");
    if (item == result_item::int64 || o.itemsize != 1 || (o.kind != 'b' && o.kind != 'u' && o.kind != 'i') ||
        o.read_only || o.count != keys.count)
      throw nb::value_error(wanted.c_str());
    // A kernel on the keys' GPU writing another GPU's memory faults (no peer access).
    if (keys.count > 0 && o.device != keys.device)
      throw nb::value_error((std::string(what) + ": out is on GPU " + std::to_string(o.device) +
                             ", the keys on GPU " + std::to_string(keys.device) +
                             "; both must be on the filter's GPU")
                                .c_str());
    r.data = o.data;
    r.array = nb::borrow(out);
    r.keep = o.owner;  // for DLPack, the capsule whose deleter frees the exported view
    return r;
  }
  // The framework's allocator ties the memory to its current stream; nothing frees it
  // while work on another stream S writes it: a synchronous call returns after S is
  // done, and an _async one keeps r.keep (the array) until an event after its work.
  auto [made, address] = framework_result(keys, item);
  if (made.is_valid()) {
    // Allocated on the framework's current stream C: when the work runs on another
    // stream S, S first waits for what C holds (a stream-ordered pool may have queued the
    // allocation's own dependencies there; CUDA's rule for memory from cudaMallocAsync).
    // Without `stream=`, S is C (stream_value) and keys.framework is unset.
    if (keys.framework && *keys.framework != keys.stream) order_after(*keys.framework, keys.stream, keys.device);
    r.data = address;
    r.array = made;
    r.keep = made;
    return r;
  }
  const std::size_t itemsize = item == result_item::int64 ? sizeof(std::int64_t) : 1;
  r.buffer = std::make_shared<device_buffer>(keys.count * itemsize, keys.device);
  r.data = r.buffer->data;
  auto* shared = new std::shared_ptr<device_buffer>(r.buffer);
  r.keep = nb::capsule(shared, [](void* p) noexcept { delete static_cast<std::shared_ptr<device_buffer>*>(p); });
  return r;
}

nb::object same_family(nb::handle keys, nb::object result) {
  nb::object module = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(keys.ptr()))).attr("__module__");
  const std::string name = nb::cast<std::string>(module);
  if (name.rfind("cupy", 0) == 0) return nb::module_::import_("cupy").attr("from_dlpack")(result);
  if (name.rfind("torch", 0) == 0) return nb::module_::import_("torch").attr("from_dlpack")(result);
  return result;
}

namespace {

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
  // The event is made on `device`, the GPU of `stream` (which need not be current).
  void add(stream_t stream, int device, nb::object keys) {
    prune();
    device_scope on_device(device);
    cudaEvent_t done = nullptr;
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    const cudaError_t recorded = cudaEventRecord(done, stream);
    if (recorded != cudaSuccess) cudaEventDestroy(done);
    check(recorded, "cudaEventRecord");
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

// The ArrowDeviceArray of the Arrow C device data interface (the ABI-stable struct of
// https://arrow.apache.org/docs/format/CDeviceDataInterface.html).
struct arrow_device_array {
  ArrowArray array;
  std::int64_t device_id;
  std::int32_t device_type;  // 1 CPU, 2 CUDA, 3 CUDA host (pinned), 13 CUDA managed
  void* sync_event;          // CUDA: a cudaEvent_t* to wait on before reading, or null
  std::int64_t reserved[3];
};

}  // namespace

void device_add(py_filter& self, nb::handle keys_obj, nb::handle stream) {
  require_gpu_filter(self.f.where());
  device_batch keys = read_device_batch(keys_obj, stream);
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    with_keys(keys, [&](const auto&... k) { self.f.add_async(k..., keys.stream); });
  }
  pending(self).add(keys.stream, keys.device, keys.owner);
}

nb::object device_contains(py_filter& self, nb::handle keys_obj, nb::handle out, nb::handle stream) {
  require_gpu_filter(self.f.where());
  device_batch keys = read_device_batch(keys_obj, stream);
  device_result r = result_for(keys, out, result_item::boolean, "contains");
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    with_keys(keys, [&](const auto&... k) {
      self.f.contains_async(k..., static_cast<bool*>(r.data), keys.stream);
    });
  }
  // The keys and the result (out's exported view, or the new buffer, which the
  // caller may drop before the kernel has written it) live until the work is done.
  pending(self).add(keys.stream, keys.device, nb::make_tuple(keys.owner, r.keep));
  return wrap_result<bool>(keys, r, keys.count);
}

nb::object device_add_new(py_filter& self, nb::handle keys_obj, nb::handle out, nb::handle stream) {
  require_gpu_filter(self.f.where());
  device_batch keys = read_device_batch(keys_obj, stream);
  device_result r = result_for(keys, out, result_item::boolean, "add_new");
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    with_keys(keys, [&](const auto&... k) {
      self.f.add_new(k..., static_cast<bool*>(r.data), keys.stream);
    });
  }
  return wrap_result<bool>(keys, r, keys.count);
}

std::uint64_t device_count(py_filter& self, nb::handle keys_obj, nb::handle stream) {
  require_gpu_filter(self.f.where());
  device_batch keys = read_device_batch(keys_obj, stream);
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  return with_keys(keys, [&](const auto&... k) { return self.f.count(k..., keys.stream); });
}

nb::object device_select(py_filter& self, nb::handle keys_obj, nb::handle stream) {
  return select_rows(self, keys_obj, stream);
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
  require_gpu_filter(self.f.where());
  device_batch keys = read_device_batch(keys_obj, nb::none());
  device_result found = result_for(keys, nb::none(), result_item::boolean, "_time_device_op");
  std::vector<double> seconds;
  seconds.reserve(calls);
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  with_keys(keys, [&](const auto&... k) {
    for (std::size_t i = 0; i < calls; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (op == "contains") self.f.contains(k..., static_cast<bool*>(found.data), keys.stream);
      else if (op == "add") self.f.add(k..., keys.stream);
      else (void)self.f.count(k..., keys.stream);
      const auto stop = std::chrono::steady_clock::now();
      seconds.push_back(std::chrono::duration<double>(stop - start).count());
    }
  });
  return seconds;
}

nb::tuple arrow_device_strings(nb::handle obj) {
  nb::object pair = obj.attr("__arrow_c_device_array__")();
  if (!PyTuple_Check(pair.ptr()) || PyTuple_GET_SIZE(pair.ptr()) != 2)
    throw nb::type_error("__arrow_c_device_array__() did not return (schema, device array) capsules");
  auto* schema = static_cast<ArrowSchema*>(
      PyCapsule_GetPointer(PyTuple_GET_ITEM(pair.ptr(), 0), "arrow_schema"));
  if (schema == nullptr) throw nb::python_error();
  auto* source = static_cast<arrow_device_array*>(
      PyCapsule_GetPointer(PyTuple_GET_ITEM(pair.ptr(), 1), "arrow_device_array"));
  if (source == nullptr) throw nb::python_error();
  // Moved out of the capsule (whose destructor then sees release == NULL): the owner
  // capsule returned below releases it when the last DeviceStrings buffer goes.
  auto* moved = new arrow_device_array(*source);
  source->array.release = nullptr;
  nb::capsule owner(moved, [](void* p) noexcept {
    auto* a = static_cast<arrow_device_array*>(p);
    if (a->array.release != nullptr) a->array.release(&a->array);
    delete a;
  });
  const std::string format = schema->format ? schema->format : "";
  const ArrowArray& array = moved->array;
  if (format != "u" && format != "U" && format != "z" && format != "Z")
    throw nb::type_error(("DeviceStrings.from_arrow: Arrow format '" + format +
                          "' is not string, large_string, binary or large_binary (integer device "
                          "keys go to the filter directly through __cuda_array_interface__ or DLPack)")
                             .c_str());
  if (moved->device_type == 1)
    throw nb::value_error("DeviceStrings.from_arrow: this Arrow array is in host memory; pass it to "
                          "the filter directly");
  if (moved->device_type != 2 && moved->device_type != 13)
    throw nb::value_error(("DeviceStrings.from_arrow: Arrow device type " +
                           std::to_string(moved->device_type) +
                           " is not CUDA device (2) or managed (13) memory")
                              .c_str());
  if (array.n_buffers < 3 || array.buffers[1] == nullptr)
    throw nb::value_error("DeviceStrings.from_arrow: a string array needs validity, offsets and data buffers");
  device_scope scope(static_cast<int>(moved->device_id));
  // The producer's writes must be done before the buffers are read: wait for its event.
  if (moved->sync_event != nullptr)
    check(cudaEventSynchronize(*static_cast<cudaEvent_t*>(moved->sync_event)), "cudaEventSynchronize");
  const bool large = format == "U" || format == "Z";
  const std::size_t width = large ? 8 : 4;
  const auto length = static_cast<std::size_t>(array.length);
  const auto offset = static_cast<std::size_t>(array.offset);
  const auto* offsets = static_cast<const std::uint8_t*>(array.buffers[1]) + offset * width;
  std::uintptr_t validity = 0;
  if (array.null_count != 0 && array.buffers[0] != nullptr) {
    if (offset % 8 != 0)
      throw nb::value_error("DeviceStrings.from_arrow: a slice with nulls must start at a multiple "
                            "of 8 rows (gbf reads bit i of the bitmap as key i's)");
    validity = reinterpret_cast<std::uintptr_t>(array.buffers[0]) + offset / 8;
  }
  // The C interface carries no buffer sizes: the last offset bounds the bytes read.
  std::int64_t last = 0;
  check(cudaMemcpy(&last, offsets + length * width, width, cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (!large) last = static_cast<std::int32_t>(last & 0xffffffff);
  return nb::make_tuple(reinterpret_cast<std::uintptr_t>(offsets), large ? "<i8" : "<i4", length + 1,
                        reinterpret_cast<std::uintptr_t>(array.buffers[2]),
                        last > 0 ? static_cast<std::size_t>(last) : std::size_t{0}, validity,
                        (length + 7) / 8, moved->device_id, owner);
}

#else  // Built without CUDA: every filter is a CPU filter, so require_gpu_filter throws.

void device_add(py_filter& self, nb::handle, nb::handle) { require_gpu_filter(self.f.where()); }
nb::object device_add_new(py_filter& self, nb::handle, nb::handle, nb::handle) {
  require_gpu_filter(self.f.where());
  return nb::none();
}
nb::object device_contains(py_filter& self, nb::handle, nb::handle, nb::handle) {
  require_gpu_filter(self.f.where());
  return nb::none();
}
std::uint64_t device_count(py_filter& self, nb::handle, nb::handle) {
  require_gpu_filter(self.f.where());
  return 0;
}
nb::object device_select(py_filter& self, nb::handle, nb::handle) {
  require_gpu_filter(self.f.where());
  return nb::none();
}
std::vector<double> device_time_op(py_filter& self, nb::handle, const std::string&, std::size_t) {
  require_gpu_filter(self.f.where());
  return {};
}
void device_synchronize(py_filter& self) {
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  self.f.synchronize();
}
nb::tuple arrow_device_strings(nb::handle) {
  throw no_gpu("this gbf was built without CUDA: device keys need a build with nvcc");
}
// Unreachable after require_gpu_filter; defined for the kinds' binding to link.
device_batch read_device_batch(nb::handle, nb::handle) {
  throw no_gpu("this gbf was built without CUDA: device keys need a build with nvcc");
}
device_result result_for(const device_batch&, nb::handle, result_item, const char*) {
  throw no_gpu("this gbf was built without CUDA: device keys need a build with nvcc");
}
nb::object same_family(nb::handle, nb::object result) { return result; }
device_buffer::device_buffer(std::size_t, int on_device) : device(on_device) {
  throw no_gpu("this gbf was built without CUDA: device keys need a build with nvcc");
}
device_buffer::~device_buffer() = default;

#endif

}  // namespace gbf::python
