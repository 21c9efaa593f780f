// Device keys as every filter kind's binding takes them (device.cpp reads them;
// module.cpp runs gbf.Filter's calls on them, kinds.cpp the other kinds').
//
// A batch is read from __cuda_array_interface__, DLPack or gbf.DeviceStrings onto one
// stream S (device.cpp's header comment says how S is chosen), and handed to the library
// as its key arguments: (const T* keys, n) for 32/64-bit integers, or one
// string_keys<int32_t / int64_t>. Per-key results are new device arrays on the keys' GPU
// (or `out=`), returned as the keys' kind of array (CuPy for CuPy keys, torch for torch).
//
// Without CUDA the readers throw gbf.NoGPU; a binding refuses device keys on a CPU filter
// (require_gpu_filter) first, which every filter is in such a build.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "gbf/backend.hpp"
#include "gbf/keys.hpp"

namespace gbf::python {

namespace nb = nanobind;

/// Refuses device keys on a filter whose bits are not on a GPU (InvalidArgument).
void require_gpu_filter(backend where);

/// One device array (keys, offsets, key bytes, validity or `out`) read from a protocol,
/// and what keeps it alive.
struct device_array {
  void* data = nullptr;
  std::size_t count = 0;
  char kind = 'i';  ///< 'i', 'u', 'b' (bool), 'f'
  std::size_t itemsize = 0;
  bool read_only = false;
  int device = -1;
  stream_t stream = nullptr;         ///< the stream the work runs on
  std::optional<stream_t> producer;  ///< the stream its __cuda_array_interface__ named (ordered before `stream`)
  nb::object owner;                  ///< the array, or a capsule owning a DLPack tensor
};

/// A device batch: integer keys (one array) or string keys (gbf.DeviceStrings: offsets,
/// data and validity arrays), all read on one stream S.
struct device_batch {
  bool strings = false;
  device_array keys;                     ///< integer keys; strings: the offsets (count + 1)
  std::optional<device_array> data;      ///< strings: the key bytes
  std::optional<device_array> validity;  ///< strings: the Arrow validity bitmap, if any
  std::size_t count = 0;                 ///< keys
  stream_t stream = nullptr;             ///< S
  /// The keys' framework's current stream (torch, CuPy) when `stream=` named S; unset
  /// otherwise (then S is that stream, or the keys have no framework).
  std::optional<stream_t> framework;
  int device = 0;
  nb::object family;  ///< the array whose kind of array results come back as
  nb::object owner;   ///< what keeps the arrays alive while stream-ordered work runs
};

/// The device keys `obj` on the stream `stream` names (None: the framework's or the
/// array's); TypeError / ValueError naming the array and what is wrong with it.
device_batch read_device_batch(nb::handle obj, nb::handle stream);

/// Runs fn with the batch as the library's key arguments: fn(const uint32_t* / const
/// uint64_t* keys, n) (a key hashes its bytes, so signedness does not matter) or
/// fn(string_keys<int32_t / int64_t>); returns what fn returns.
template <class Fn>
decltype(auto) with_keys(const device_batch& b, Fn&& fn) {
  if (!b.strings) {
    if (b.keys.itemsize == 4) return fn(static_cast<const std::uint32_t*>(b.keys.data), b.count);
    return fn(static_cast<const std::uint64_t*>(b.keys.data), b.count);
  }
  const auto* validity = b.validity ? static_cast<const std::uint8_t*>(b.validity->data) : nullptr;
  if (b.keys.itemsize == 4)
    return fn(string_keys<std::int32_t>{b.data->data, b.data->count,
                                        static_cast<const std::int32_t*>(b.keys.data), b.count,
                                        validity});
  return fn(string_keys<std::int64_t>{b.data->data, b.data->count,
                                      static_cast<const std::int64_t*>(b.keys.data), b.count,
                                      validity});
}

/// Device memory from cudaMalloc on `device`, freed with cudaFree when the last
/// reference goes (device.cpp).
struct device_buffer {
  void* data = nullptr;
  int device = 0;
  device_buffer(std::size_t bytes, int on_device);
  ~device_buffer();
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

/// A per-key result: `out` (checked), a new array of the keys' framework, or a new
/// device buffer.
struct device_result {
  void* data = nullptr;
  nb::object array;  ///< `out` or the framework's array; null until wrap_result otherwise
  std::shared_ptr<device_buffer> buffer;
  nb::object keep;   ///< what stream-ordered work writing the result keeps alive
};

/// The item type of a result: answers (bool), counts and statuses (uint8), rows (int64).
enum class result_item { boolean, uint8, int64 };

/// `out` when given (a writable device bool/uint8 array of keys.count items on the keys'
/// GPU, else ValueError naming `what`; only for boolean and uint8 results). Else
/// keys.count items of `item`: for CuPy and torch keys an empty array from that
/// framework's allocator (its memory pool / caching allocator: no cudaMalloc per call,
/// and no cudaFree, which waits for the whole device, when the result is dropped), for
/// other keys a new device_buffer.
device_result result_for(const device_batch& keys, nb::handle out, result_item item, const char* what);

/// `result` (a DLPack-capable array) as the kind of array `keys` is: CuPy, torch, or itself.
nb::object same_family(nb::handle keys, nb::object result);

/// The first `count` items of a result as a device array of T: `out` or the framework's
/// array itself (a view of its first `count` items when shorter, for select's rows).
template <class T>
nb::object wrap_result(const device_batch& keys, device_result& r, std::size_t count) {
  if (r.array.is_valid()) {
    if (count == keys.count) return r.array;
    nb::object first = nb::steal(PySlice_New(nb::int_(0).ptr(), nb::int_(count).ptr(), nullptr));
    if (!first.is_valid()) throw nb::python_error();
    return r.array[first];
  }
  auto* keep = new std::shared_ptr<device_buffer>(r.buffer);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<device_buffer>*>(p); });
  std::size_t shape[1] = {count};
  // array_api: an object with __dlpack__ / __dlpack_device__ (without a framework
  // nanobind would return a bare capsule, which can be consumed only once).
  nb::ndarray<nb::array_api, T, nb::ndim<1>, nb::device::cuda> array(
      r.data, 1, shape, owner, nullptr, nb::dtype<T>(), nb::device::cuda::value, keys.device);
  return same_family(keys.family, nb::cast(array));
}

/// The library's select on device keys for `self` (any binding object with a filter `f`
/// and a `mutex`), synchronously on the batch's stream: the rows of the keys that may be
/// present, ascending, as a device int64 array of the keys' kind.
template <class Self>
nb::object select_rows(Self& self, nb::handle keys_obj, nb::handle stream) {
  require_gpu_filter(self.f.where());
  const device_batch keys = read_device_batch(keys_obj, stream);
  device_result rows = result_for(keys, nb::none(), result_item::int64, "select");
  std::uint64_t kept = 0;
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    kept = with_keys(keys, [&](const auto&... key) {
      return self.f.select(key..., static_cast<std::uint64_t*>(rows.data), keys.stream);
    });
  }
  // Row numbers are < 2^63: the uint64 rows read as int64, like the host select.
  return wrap_result<std::int64_t>(keys, rows, kept);
}

}  // namespace gbf::python
