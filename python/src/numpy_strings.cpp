// NumPy 2's variable-width strings (StringDType, dtype kind 'T') read straight
// from the array's packed strings: through tolist() each key became a Python
// str first (9-10 M keys/s against 44 for a '<U' array of the same keys).
//
// The NpyString_* functions are NumPy 2 API: this file alone is compiled for
// NumPy 2's API table, and read_string_dtype checks the NumPy it runs with
// before it calls them, so the module still imports and works under NumPy 1.x
// (where no array has this dtype). Built against NumPy 1.x headers it reads
// nothing and the caller keeps the tolist() path.
#if defined(GBF_NUMPY2_HEADERS)      // python/CMakeLists.txt: built against NumPy 2
#define NPY_TARGET_VERSION 0x00000012  // NPY_2_0_API_VERSION, before numpyconfig.h defines it
#endif
#include "numpy_api.hpp"

#include <cstdint>
#include <string_view>

#include "binding.hpp"

namespace gbf::python {

#if defined(NPY_2_0_API_VERSION) && NPY_FEATURE_VERSION >= NPY_2_0_API_VERSION

namespace {

/// The array's string allocator, held (NumPy locks it) for the lifetime of this.
class held_allocator {
 public:
  explicit held_allocator(PyArray_Descr* descr)
      : allocator_(NpyString_acquire_allocator(reinterpret_cast<PyArray_StringDTypeObject*>(descr))) {}
  ~held_allocator() { NpyString_release_allocator(allocator_); }
  held_allocator(const held_allocator&) = delete;
  held_allocator& operator=(const held_allocator&) = delete;

  /// Element `packed` unpacked into `out`: 0, or 1 for the dtype's missing value.
  int load(const char* packed, npy_static_string* out) const {
    const int rc = NpyString_load(allocator_, reinterpret_cast<const npy_packed_static_string*>(packed), out);
    if (rc < 0) throw nb::value_error("cannot read a string of a StringDType array (NumPy's NpyString_load failed)");
    return rc;
  }

 private:
  npy_string_allocator* allocator_;
};

}  // namespace

bool read_string_dtype(PyArrayObject* array, host_keys& keys) {
  if (PyArray_RUNTIME_VERSION < NPY_2_0_API_VERSION || PyArray_DESCR(array)->type_num != NPY_VSTRING)
    return false;
  const auto n = static_cast<std::size_t>(PyArray_SIZE(array));
  const char* const base = PyArray_BYTES(array);
  // 0-d or 1-d (the caller refuses more): any stride, no copy.
  const npy_intp stride = PyArray_NDIM(array) == 0 ? 0 : PyArray_STRIDE(array, 0);
  const held_allocator strings(PyArray_DESCR(array));
  // The bytes are UTF-8 already; a missing value (the dtype's na_object) is a null key.
  keys.pack_strings(n, [&](std::size_t i, std::string_view& key) {
    npy_static_string s{0, nullptr};
    if (strings.load(base + static_cast<npy_intp>(i) * stride, &s) == 1) return false;
    key = std::string_view(s.buf, s.size);
    return true;
  });
  return true;
}

#else

bool read_string_dtype(PyArrayObject*, host_keys&) { return false; }

#endif

}  // namespace gbf::python
