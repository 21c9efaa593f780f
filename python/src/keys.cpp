// Host keys from Python objects, without copying where the memory allows it.
//
//   NumPy int32/uint32/int64/uint64, 1-D, C-contiguous, native byte order: read in place
//     (read-only arrays too). Strided, misaligned or byte-swapped arrays are copied
//     into a native contiguous array first (values kept: a big-endian 5 is the key 5).
//   Anything NumPy reads without copying (buffer protocol, __array_interface__, a
//     CPU DLPack tensor): through NumPy, then as above.
//   Arrow arrays (__arrow_c_array__) and streams / chunked arrays (__arrow_c_stream__):
//     string / large_string / binary / large_binary map onto gbf::string_keys (offsets,
//     data and validity in place; a slice's offset honoured), int32/uint32/int64/uint64
//     onto integer keys. A validity bitmap that starts mid-byte (a slice) is shifted into
//     a copy of n/8 bytes, since the library reads bit i of key i from the bitmap's start.
//   Python int (a 64-bit key: int64 when negative, else uint64, the same 8 bytes), str
//     (its UTF-8 bytes), bytes: one key. Lists, tuples and object arrays of str / bytes /
//     None are packed into one string batch (a copy; None is null); lists of ints go
//     through NumPy (int64; a list of NumPy int32 / uint32 scalars at 4 bytes, as each
//     alone, and one mixing those with 8-byte keys is refused).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "arrow_c.hpp"
#include "binding.hpp"
#include "dlpack.hpp"

namespace gbf::python {

/// StringDType keys packed into `keys`; false (nothing read) where NumPy or the dtype
/// is not NumPy 2's (numpy_strings.cpp).
bool read_string_dtype(PyArrayObject* array, host_keys& keys);

namespace {

using detail::key_kind;

std::string python_type_name(nb::handle obj) {
  return nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())))
                                           .attr("__name__")));
}

[[noreturn]] void throw_not_keys(nb::handle obj, const std::string& why) {
  throw nb::type_error(("cannot read keys from a " + python_type_name(obj) + ": " + why).c_str());
}

// --- NumPy -----------------------------------------------------------------------

std::string dtype_name(PyArrayObject* array) {
  nb::object name = nb::steal(PyObject_Str(reinterpret_cast<PyObject*>(PyArray_DESCR(array))));
  return name.is_valid() ? nb::cast<std::string>(name) : std::string("?");
}

void read_strings(nb::handle sequence, host_keys& keys);
void read_string_items(PyObject* const* items, std::size_t n, host_keys& keys);

// UTF-8 bytes of code point c; 0 for one a str cannot encode (a lone surrogate, or
// past U+10FFFF), which the caller hands to Python to raise its own error.
inline unsigned utf8_length(std::uint32_t c) {
  if (c < 0x80) return 1;
  if (c < 0x800) return 2;
  if (c >= 0xD800 && c <= 0xDFFF) return 0;
  if (c < 0x10000) return 3;
  return c <= 0x10FFFF ? 4 : 0;
}

inline std::uint8_t* put_utf8(std::uint32_t c, std::uint8_t* out) {
  if (c < 0x80) {
    *out++ = static_cast<std::uint8_t>(c);
  } else if (c < 0x800) {
    *out++ = static_cast<std::uint8_t>(0xC0 | (c >> 6));
    *out++ = static_cast<std::uint8_t>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    *out++ = static_cast<std::uint8_t>(0xE0 | (c >> 12));
    *out++ = static_cast<std::uint8_t>(0x80 | ((c >> 6) & 0x3F));
    *out++ = static_cast<std::uint8_t>(0x80 | (c & 0x3F));
  } else {
    *out++ = static_cast<std::uint8_t>(0xF0 | (c >> 18));
    *out++ = static_cast<std::uint8_t>(0x80 | ((c >> 12) & 0x3F));
    *out++ = static_cast<std::uint8_t>(0x80 | ((c >> 6) & 0x3F));
    *out++ = static_cast<std::uint8_t>(0x80 | (c & 0x3F));
  }
  return out;
}

// NumPy's fixed-width text ('U': UCS-4 code points; 'S': bytes), packed straight
// from the array into one string batch: the keys are the bytes of the str / bytes
// each element becomes (trailing NULs dropped, as NumPy drops them; a str as UTF-8).
// Through tolist() this made a Python object per key: 10-12x the time of an Arrow
// string array and a GiB of objects for 10^7 keys. False (nothing read) for text
// Python would refuse to encode, so that the tolist() path raises its error.
bool read_fixed_width_text(PyArrayObject* array, host_keys& keys) {
  const bool ucs4 = PyArray_DESCR(array)->kind == 'U';
  const auto n = static_cast<std::size_t>(PyArray_SIZE(array));
  const auto width = static_cast<std::size_t>(PyArray_ITEMSIZE(array)) / (ucs4 ? 4 : 1);
  const auto* base = static_cast<const std::uint8_t*>(PyArray_DATA(array));
  auto* offsets = reinterpret_cast<std::int64_t*>(keys.allocate((n + 1) * sizeof(std::int64_t)));
  // Pass 1: each key's length without its trailing NULs, and its bytes.
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t bytes = 0;
    if (ucs4) {
      const auto* code = reinterpret_cast<const std::uint32_t*>(base) + i * width;
      std::size_t length = width;
      while (length > 0 && code[length - 1] == 0) --length;
      for (std::size_t j = 0; j < length; ++j) {
        const unsigned b = utf8_length(code[j]);
        if (b == 0) return false;
        bytes += b;
      }
    } else {
      const std::uint8_t* text = base + i * width;
      bytes = width;
      while (bytes > 0 && text[bytes - 1] == 0) --bytes;
    }
    offsets[i] = static_cast<std::int64_t>(total);
    total += bytes;
  }
  offsets[n] = static_cast<std::int64_t>(total);
  // Pass 2: the bytes, back to back.
  std::uint8_t* data = keys.allocate(std::max<std::size_t>(total, 1));
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t* out = data + offsets[i];
    const auto bytes = static_cast<std::size_t>(offsets[i + 1] - offsets[i]);
    if (ucs4) {
      const auto* code = reinterpret_cast<const std::uint32_t*>(base) + i * width;
      for (std::uint8_t* end = out + bytes; out != end; ++code) out = put_utf8(*code, out);
    } else {
      std::memcpy(out, base + i * width, bytes);
    }
  }
  keys.add_packed_strings(data, total, offsets, n, nullptr);
  return true;
}

// An array the library can read in place: C-contiguous, aligned, native byte order;
// else a copy with those properties (values kept).
nb::object readable_array(nb::handle obj) {
  auto* array = reinterpret_cast<PyArrayObject*>(obj.ptr());
  if (PyArray_IS_C_CONTIGUOUS(array) && PyArray_ISALIGNED(array) && PyArray_ISNOTSWAPPED(array))
    return nb::borrow(obj);
  PyArray_Descr* native = PyArray_DescrNewByteorder(PyArray_DESCR(array), NPY_NATIVE);
  if (native == nullptr) throw nb::python_error();
  // PyArray_FromArray steals the descriptor reference.
  nb::object copy = nb::steal(PyArray_FromArray(
      array, native, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_ENSURECOPY));
  if (!copy.is_valid()) throw nb::python_error();
  return copy;
}

// Integer keys of a 1-D (or 0-d) NumPy array; strings for object / str / bytes dtypes.
void read_numpy(nb::handle obj, host_keys& keys) {
  auto* array = reinterpret_cast<PyArrayObject*>(obj.ptr());
  const int ndim = PyArray_NDIM(array);
  if (ndim > 1) {
    std::string shape;
    for (int d = 0; d < ndim; ++d)
      shape += (d ? ", " : "") + std::to_string(PyArray_DIM(array, d));
    throw nb::value_error(("keys must be a 1-D array, got shape (" + shape +
                           "); flatten it (keys.ravel()) if every element is a key")
                              .c_str());
  }
  keys.scalar = keys.scalar || ndim == 0;
  // A subclass may carry more than its data: a masked array's masked slots are not keys.
  if (Py_TYPE(obj.ptr()) != &PyArray_Type && has_attr(obj, "mask"))
    throw nb::type_error("keys must not be a masked array: pass keys.compressed() (only the "
                         "unmasked keys), or an Arrow array with nulls");
  const char kind = PyArray_DESCR(array)->kind;
  const auto itemsize = static_cast<std::size_t>(PyArray_ITEMSIZE(array));
  if (kind == 'U' || kind == 'S') {
    const nb::object readable = readable_array(obj);
    if (read_fixed_width_text(reinterpret_cast<PyArrayObject*>(readable.ptr()), keys)) return;
  }
  if (kind == 'O') {
    // The elements are the keys (str / bytes / None), read where they lie.
    const nb::object readable = readable_array(obj);
    const auto* items = static_cast<PyObject* const*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(readable.ptr())));
    read_string_items(items, static_cast<std::size_t>(PyArray_SIZE(array)), keys);
    return;
  }
  if (kind == 'T' && read_string_dtype(array, keys)) return;
  if (kind == 'U' || kind == 'S' || kind == 'T') {
    // Python objects per key (StringDType under NumPy 1.x headers, or text Python refuses
    // to encode): this path copies.
    nb::object list = nb::steal(PyArray_ToList(array));
    if (!list.is_valid()) throw nb::python_error();
    if (ndim == 0) {
      nb::list one;
      one.append(list);
      list = one;
    }
    read_strings(list, keys);
    return;
  }
  if ((kind != 'i' && kind != 'u') || (itemsize != 4 && itemsize != 8)) {
    std::string why = "keys must be 32- or 64-bit integers or strings, got dtype " +
                      dtype_name(array);
    if ((kind == 'i' || kind == 'u') && itemsize < 4)
      why += "; widen them first (keys.astype(numpy.int32) or int64): gbf hashes an integer's "
             "4 or 8 little-endian bytes, so the width is part of the key";
    throw nb::type_error(why.c_str());
  }
  // Copy (values kept) when the library cannot read the array in place.
  nb::object held = readable_array(obj);
  array = reinterpret_cast<PyArrayObject*>(held.ptr());
  key_piece piece;
  piece.kind = itemsize == 4 ? key_kind::u32 : key_kind::u64;
  piece.is_signed = kind == 'i';
  piece.data = PyArray_DATA(array);
  piece.count = static_cast<std::size_t>(PyArray_SIZE(array));
  keys.owners.push_back(std::move(held));
  keys.add_piece(piece);
}

// --- Python scalars and sequences of strings --------------------------------------

// The 8 bytes gbf hashes for the Python int `item`: its value as an int64 when it
// fits (fits_int64 = true), else as a uint64. ValueError outside [-2**63, 2**64),
// its message starting with `which` ("" for a lone key).
std::uint64_t int_key_bits(PyObject* item, bool& fits_int64, const std::string& which) {
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(item, &overflow);
  if (value == -1 && PyErr_Occurred()) throw nb::python_error();
  fits_int64 = overflow == 0;
  if (fits_int64) return static_cast<std::uint64_t>(value);
  const unsigned long long big = overflow > 0 ? PyLong_AsUnsignedLongLong(item) : 0;
  if (overflow < 0 || (big == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
    PyErr_Clear();
    throw nb::value_error((which +
                           "an int key must fit in 64 bits (-2**63 <= key < 2**64): gbf hashes its 8 "
                           "little-endian bytes")
                              .c_str());
  }
  return big;
}

// The int64 array NumPy would make of a list of Python ints that all fit in int64,
// in one pass (NumPy's type discovery took 450 ms of the 520 a list of 10^7 ints
// cost); an invalid object when an item is not an int or does not fit, for NumPy's
// way below. A bool anywhere is refused, as NumPy would read True as 1.
nb::object int64_array_of_ints(PyObject* list, Py_ssize_t n) {
  nb::object array = new_numpy_array(static_cast<std::size_t>(n), NPY_INT64);
  auto* out = static_cast<std::int64_t*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(array.ptr())));
  bool all_int64 = true;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(list, i);
    if (PyBool_Check(item))
      throw nb::type_error(("item " + std::to_string(i) +
                            " of the list is a bool, which is not a key type (use an int, a str or bytes)")
                               .c_str());
    if (!all_int64) continue;  // only bools are looked for now
    if (!PyLong_Check(item)) {
      all_int64 = false;
      continue;
    }
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (value == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow != 0) all_int64 = false;
    out[i] = value;
  }
  return all_int64 ? array : nb::object();
}

// A list of Python ints NumPy did not make an integer array of: it turns one holding
// both int64-only and uint64-only values (e.g. [1, 2**63]) into float64, which would
// round keys. Ints in [0, 2**64) go to a uint64 array (each int alone is hashed by its
// 8 bytes too); TypeError for anything else, naming the item.
nb::object uint64_array_of_ints(PyObject* list, Py_ssize_t n) {
  const char* only = "a list of keys must hold only ints, or only str / bytes / None";
  nb::object array = new_numpy_array(static_cast<std::size_t>(n), NPY_UINT64);
  auto* out = static_cast<std::uint64_t*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(array.ptr())));
  bool negative = false, past_int64 = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(list, i);
    // A NumPy integer scalar (np.uint64(5) beside 7 made NumPy choose float64) is its value.
    nb::object value = nb::borrow(item);
    if (!PyLong_Check(item) && PyArray_IsScalar(item, Integer)) {
      value = nb::steal(PyNumber_Index(item));
      if (!value.is_valid()) throw nb::python_error();
    }
    if (!PyLong_Check(value.ptr()))
      throw nb::type_error((std::string(only) + "; item " + std::to_string(i) + " is a " +
                            Py_TYPE(item)->tp_name)
                               .c_str());
    bool fits_int64 = false;
    out[i] = int_key_bits(value.ptr(), fits_int64, "item " + std::to_string(i) + " of the list: ");
    negative |= fits_int64 && static_cast<std::int64_t>(out[i]) < 0;
    past_int64 |= !fits_int64;
  }
  if (negative && past_int64)
    throw nb::type_error(
        "a list of ints holding both negative keys and keys >= 2**63 has no integer type: pass a "
        "NumPy uint64 array (a negative key as its two's complement) or an int64 one");
  return array;
}

// NumPy reads a list of 4-byte NumPy integer scalars as a 4-byte array, hashed as 4
// bytes like each of those scalars alone; mixed with Python ints or 8-byte scalars (or
// int32 with uint32) it widens them to 8 bytes, where they would be other keys than
// alone (a false negative for a key added alone). Refused, naming the item.
void refuse_widened_scalars(PyObject* list, Py_ssize_t n, std::size_t array_itemsize) {
  if (array_itemsize == 4) return;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(list, i);
    if (!PyArray_IsScalar(item, Integer)) continue;
    PyArray_Descr* descr = PyArray_DescrFromScalar(item);
    const auto itemsize = static_cast<std::size_t>(PyDataType_ELSIZE(descr));
    Py_DECREF(descr);
    if (itemsize == 4)
      throw nb::type_error(("item " + std::to_string(i) + " of the list is a " + Py_TYPE(item)->tp_name +
                            ", hashed as 4 bytes (as it is alone), but the list mixes it with keys "
                            "hashed as 8 (Python ints or 64-bit scalars): give one width, e.g. "
                            "numpy.asarray(keys, dtype=numpy.int64)")
                               .c_str());
  }
}

void read_int(nb::handle obj, host_keys& keys) {
  bool fits_int64 = false;
  const std::uint64_t bits = int_key_bits(obj.ptr(), fits_int64, "");
  auto* storage = keys.allocate(sizeof bits);
  std::memcpy(storage, &bits, sizeof bits);
  key_piece piece;
  piece.kind = key_kind::u64;
  piece.is_signed = fits_int64;  // by value: an int64 when it fits, else a uint64
  piece.data = storage;
  piece.count = 1;
  keys.add_piece(piece);
  keys.scalar = true;
}

// Bytes of a str (UTF-8) or bytes key; false for anything else.
bool key_bytes(PyObject* item, const char** bytes, Py_ssize_t* size) {
  if (PyUnicode_Check(item)) {
    *bytes = PyUnicode_AsUTF8AndSize(item, size);
    if (*bytes == nullptr) throw nb::python_error();
    return true;
  }
  if (PyBytes_Check(item)) {
    char* data = nullptr;
    if (PyBytes_AsStringAndSize(item, &data, size) != 0) throw nb::python_error();
    *bytes = data;
    return true;
  }
  return false;
}

void read_string_scalar(nb::handle obj, host_keys& keys) {
  const char* bytes = nullptr;
  Py_ssize_t size = 0;
  key_bytes(obj.ptr(), &bytes, &size);
  auto* offsets = reinterpret_cast<std::int64_t*>(keys.allocate(2 * sizeof(std::int64_t)));
  offsets[0] = 0;
  offsets[1] = size;
  key_piece piece;
  piece.kind = key_kind::str64;
  piece.data = bytes;  // the str caches its UTF-8 bytes; owners keeps it alive
  piece.data_bytes = static_cast<std::size_t>(size);
  piece.offsets = offsets;
  piece.count = 1;
  keys.owners.push_back(nb::borrow(obj));
  keys.add_piece(piece);
  keys.scalar = true;
}

// Packs a sequence of str / bytes / None into one string batch (int64 offsets).
void read_strings(nb::handle sequence, host_keys& keys) {
  nb::object fast = nb::steal(PySequence_Fast(sequence.ptr(), "keys must be a sequence"));
  if (!fast.is_valid()) throw nb::python_error();
  read_string_items(PySequence_Fast_ITEMS(fast.ptr()),
                    static_cast<std::size_t>(PySequence_Fast_GET_SIZE(fast.ptr())), keys);
}

// Packs `n` objects (str / bytes / None) into one string batch; the bytes are copied.
void read_string_items(PyObject* const* items, std::size_t n, host_keys& keys) {
  keys.pack_strings(n, [items](std::size_t i, std::string_view& key) {
    if (items[i] == Py_None) return false;
    const char* bytes = nullptr;
    Py_ssize_t size = 0;
    if (!key_bytes(items[i], &bytes, &size))
      throw nb::type_error(("string keys must be str, bytes or None; item " + std::to_string(i) +
                            " is a " + python_type_name(items[i]) +
                            (PyLong_Check(items[i]) ? " (a list that starts with None or a str is read as "
                                                      "strings; integer keys with nulls go as a pyarrow "
                                                      "array or a NumPy masked array)"
                                                    : ""))
                               .c_str());
    key = std::string_view(bytes, static_cast<std::size_t>(size));
    return true;
  });
}

// --- Arrow -----------------------------------------------------------------------

// Bits [first, first + n) of `bits` as a new bitmap starting at bit 0.
const std::uint8_t* shifted_bitmap(const std::uint8_t* bits, std::size_t first, std::size_t n,
                                   host_keys& keys) {
  if (first % 8 == 0) return bits + first / 8;
  std::uint8_t* out = keys.allocate((n + 7) / 8);
  const std::size_t shift = first % 8;
  const std::size_t last_byte = (first + n - 1) / 8;  // last byte of `bits` in range
  for (std::size_t j = 0; j < (n + 7) / 8; ++j) {
    const std::size_t source = first / 8 + j;
    unsigned value = bits[source] >> shift;
    if (source + 1 <= last_byte) value |= static_cast<unsigned>(bits[source + 1]) << (8 - shift);
    out[j] = static_cast<std::uint8_t>(value);
  }
  return out;
}

// Reads one Arrow array (already owned by `keys.storage`) described by `format`.
void read_arrow_array(const char* format, const ArrowArray& array, host_keys& keys) {
  const std::string f = format ? format : "";
  const auto n = static_cast<std::size_t>(array.length);
  const auto offset = static_cast<std::size_t>(array.offset);
  if (array.dictionary != nullptr)
    throw nb::type_error(("Arrow dictionary arrays (here of '" + f +
                          "' indices) are not keys: decode them first (pyarrow: "
                          "array.dictionary_decode(); pandas: a categorical's astype to its "
                          "categories' dtype)")
                             .c_str());
  if (array.n_children != 0)
    throw nb::type_error(("Arrow arrays of nested format '" + f +
                          "' are not keys: gbf reads integer, string and binary arrays")
                             .c_str());
  key_piece piece;
  piece.count = n;
  if (f == "n") {
    // The null type (pa.nulls(n), pa.array([None])) has no buffers at all: every key
    // is null, so none is added and none is found, as with the nulls of a typed
    // array. Zeroed keys stand behind the all-clear validity (the kernels may read
    // a null's slot).
    std::uint8_t* zeros = keys.allocate(n * sizeof(std::uint64_t));
    std::memset(zeros, 0, n * sizeof(std::uint64_t));
    std::uint8_t* none = keys.allocate((n + 7) / 8);
    std::memset(none, 0, (n + 7) / 8);
    piece.kind = key_kind::u64;
    piece.data = zeros;
    piece.validity = none;
    keys.add_piece(piece);
    return;
  }
  const bool text = f == "u" || f == "z" || f == "U" || f == "Z";
  const bool u32 = f == "i" || f == "I";
  const bool u64 = f == "l" || f == "L";
  if (text || u32 || u64) {
    // The C interface fixes the buffer count per format (validity, then offsets and
    // data, or values); a producer that sends fewer would have us read past its list.
    const std::int64_t needed = text ? 3 : 2;
    if (array.n_buffers < needed || array.buffers == nullptr)
      throw nb::value_error(("Arrow array of format '" + f + "' with " + std::to_string(array.n_buffers) +
                             " buffers; the Arrow C data interface gives it " + std::to_string(needed))
                                .c_str());
    const auto* validity_bits = static_cast<const std::uint8_t*>(array.buffers[0]);
    if (array.null_count != 0 && validity_bits != nullptr && n > 0)
      piece.validity = shifted_bitmap(validity_bits, offset, n, keys);
  }
  if (text) {
    const bool large = f == "U" || f == "Z";
    piece.kind = large ? key_kind::str64 : key_kind::str32;
    piece.data = array.buffers[2];
    const std::size_t width = large ? 8 : 4;
    piece.offsets = static_cast<const std::uint8_t*>(array.buffers[1]) + offset * width;
    if (n > 0 && piece.offsets == nullptr)
      throw nb::value_error("Arrow string array without an offsets buffer");
    // The C interface carries no buffer sizes: the last offset bounds the bytes read
    // (the library refuses any offset that decreases before it).
    std::int64_t last = 0;
    if (piece.offsets != nullptr) {
      last = large ? static_cast<const std::int64_t*>(piece.offsets)[n]
                   : static_cast<const std::int32_t*>(piece.offsets)[n];
    }
    piece.data_bytes = last > 0 ? static_cast<std::size_t>(last) : 0;
    keys.add_piece(piece);
    return;
  }
  if (u32 || u64) {
    piece.kind = u32 ? key_kind::u32 : key_kind::u64;
    piece.is_signed = f == "i" || f == "l";
    piece.data = static_cast<const std::uint8_t*>(array.buffers[1]) + offset * (u32 ? 4 : 8);
    keys.add_piece(piece);
    return;
  }
  std::string why = "Arrow arrays of format '" + f + "' are not keys: gbf reads int32, uint32, "
                    "int64, uint64, string, large_string, binary and large_binary";
  if (f == "c" || f == "C" || f == "s" || f == "S")
    why += "; widen 8- and 16-bit integers to 32 or 64 bits first (the width is part of the key)";
  if (f == "vu" || f == "vz") why += "; cast string_view to large_string first";
  if (f.rfind("w:", 0) == 0) why += "; cast fixed_size_binary to binary first (the same bytes)";
  throw nb::type_error(why.c_str());
}

template <class T>
std::shared_ptr<T> own_released(T* moved) {
  return std::shared_ptr<T>(moved, [](T* p) {
    if (p->release != nullptr) p->release(p);
    delete p;
  });
}

// An ArrowSchema / ArrowArray moved out of a capsule: the capsule's own destructor then
// sees release == NULL and does nothing (the move the PyCapsule protocol describes).
template <class T>
std::shared_ptr<T> take_capsule(nb::handle capsule, const char* name) {
  auto* source = static_cast<T*>(PyCapsule_GetPointer(capsule.ptr(), name));
  if (source == nullptr) throw nb::python_error();
  auto* moved = new T(*source);
  source->release = nullptr;
  return own_released(moved);
}

// obj.<method>(): the producer's Arrow export. Its own failures (pandas exporting an
// object column of mixed kinds, or of ints no Arrow type holds) surface as a TypeError
// that says what was being read, with the producer's message.
nb::object arrow_export(nb::handle obj, const char* method) {
  try {
    return obj.attr(method)();
  } catch (const nb::python_error& e) {
    const std::string error = nb::cast<std::string>(nb::str(e.type().attr("__name__"))) + ": " +
                              nb::cast<std::string>(nb::str(e.value()));
    throw_not_keys(obj, std::string("its Arrow export (") + method + ") failed: " + error +
                            " (an object column needs keys of one kind: ints in int64's range, or "
                            "str / bytes; convert it first, e.g. .astype('uint64'))");
  }
}

void read_arrow(nb::handle obj, host_keys& keys) {
  nb::object pair = arrow_export(obj, "__arrow_c_array__");
  if (!PyTuple_Check(pair.ptr()) || PyTuple_GET_SIZE(pair.ptr()) != 2)
    throw_not_keys(obj, "__arrow_c_array__() did not return (schema, array) capsules");
  auto schema = take_capsule<ArrowSchema>(PyTuple_GET_ITEM(pair.ptr(), 0), "arrow_schema");
  auto array = take_capsule<ArrowArray>(PyTuple_GET_ITEM(pair.ptr(), 1), "arrow_array");
  keys.storage.push_back(schema);
  keys.storage.push_back(array);
  read_arrow_array(schema->format, *array, keys);
}

void read_arrow_stream(nb::handle obj, host_keys& keys) {
  nb::object capsule = arrow_export(obj, "__arrow_c_stream__");
  auto stream = take_capsule<ArrowArrayStream>(capsule, "arrow_array_stream");
  keys.storage.push_back(stream);
  auto schema = own_released(new ArrowSchema{});
  auto stream_error = [&](const char* what) {
    const char* message = stream->get_last_error ? stream->get_last_error(stream.get()) : nullptr;
    throw nb::value_error((std::string("Arrow stream: ") + what + ": " +
                           (message ? message : "no message"))
                              .c_str());
  };
  if (stream->get_schema(stream.get(), schema.get()) != 0) stream_error("get_schema failed");
  keys.storage.push_back(schema);
  for (;;) {
    auto array = own_released(new ArrowArray{});
    if (stream->get_next(stream.get(), array.get()) != 0) stream_error("get_next failed");
    if (array->release == nullptr) break;  // end of stream
    keys.storage.push_back(array);
    read_arrow_array(schema->format, *array, keys);
  }
}

}  // namespace

std::uint8_t* host_keys::allocate(std::size_t bytes) {
  std::shared_ptr<std::uint8_t[]> buffer(new std::uint8_t[std::max<std::size_t>(bytes, 1)]);
  storage.push_back(buffer);
  return buffer.get();
}

nb::object new_numpy_array(std::size_t n, int type) {
  npy_intp dims[1] = {static_cast<npy_intp>(n)};
  PyObject* array = PyArray_SimpleNew(1, dims, type);
  if (array == nullptr) throw nb::python_error();
  return nb::steal(array);
}

host_keys read_host_keys(nb::handle obj) {
  host_keys keys;
  PyObject* o = obj.ptr();
  if (PyArray_Check(o)) {
    read_numpy(obj, keys);
  } else if (o == Py_None) {
    throw nb::type_error("None is not a key or a batch of keys (pass an int, a str or bytes, a list of them, "
                         "or an array; a None inside a list of strings is a null)");
  } else if (PyBool_Check(o)) {
    throw nb::type_error("bool is not a key type (use an int, a str or bytes)");
  } else if (PyLong_Check(o)) {
    read_int(obj, keys);
  } else if (PyUnicode_Check(o) || PyBytes_Check(o)) {
    read_string_scalar(obj, keys);
  } else if (PyArray_IsScalar(o, Generic)) {
    nb::object zero_d = nb::steal(PyArray_FromScalar(o, nullptr));
    if (!zero_d.is_valid()) throw nb::python_error();
    read_numpy(zero_d, keys);
  } else if (has_attr(obj, "__arrow_c_array__")) {
    read_arrow(obj, keys);
  } else if (has_attr(obj, "__arrow_c_stream__")) {
    read_arrow_stream(obj, keys);
  } else if (PyList_Check(o) || PyTuple_Check(o)) {
    const Py_ssize_t n = PySequence_Size(o);
    PyObject* first = n > 0 ? PySequence_Fast_GET_ITEM(o, 0) : nullptr;
    if (n == 0) {
      // An empty batch: nothing to read.
    } else if (PyUnicode_Check(first) || PyBytes_Check(first) || first == Py_None) {
      read_strings(obj, keys);
    } else {
      nb::object array = int64_array_of_ints(o, n);  // refuses bools
      if (!array.is_valid()) {
        array = nb::steal(PyArray_FromAny(o, nullptr, 0, 0, 0, nullptr));
        if (!array.is_valid()) throw nb::python_error();
        const char kind = PyArray_DESCR(reinterpret_cast<PyArrayObject*>(array.ptr()))->kind;
        if (kind != 'i' && kind != 'u') array = uint64_array_of_ints(o, n);
        refuse_widened_scalars(o, n, static_cast<std::size_t>(PyArray_ITEMSIZE(reinterpret_cast<PyArrayObject*>(array.ptr()))));
      }
      read_numpy(array, keys);
    }
  } else if (has_attr(obj, "__dlpack__") && has_attr(obj, "__dlpack_device__")) {
    const int device_type = dlpack_device(obj).first;
    // Pinned host memory (CUDA host) is host memory, as NumPy reads it.
    if (device_type == dlpack::cuda || device_type == dlpack::cuda_managed)
      throw_not_keys(obj, "its memory is on a CUDA device (DLPack device type " +
                              std::to_string(device_type) +
                              "), and this call takes host keys; copy them to the host first");
    if (device_type != dlpack::cpu && device_type != dlpack::cuda_host)
      throw_not_keys(obj, "DLPack device type " + std::to_string(device_type) +
                              " is neither host memory nor a CUDA device");
    nb::object array = nb::module_::import_("numpy").attr("from_dlpack")(obj);
    read_numpy(array, keys);
  } else if (PyByteArray_Check(o) || (PyMemoryView_Check(o) && PyMemoryView_GET_BUFFER(o)->itemsize == 1)) {
    // bytes is one key; a bytearray or a memoryview of bytes could be one key or a
    // buffer of integer keys (NumPy reads it as uint8, refused as too narrow): say
    // which to pass. A memoryview of wider items (an int64 array's) is keys, below.
    throw nb::type_error(("a " + python_type_name(obj) +
                          " is not read as keys: pass bytes(x) for one key, or numpy.frombuffer(x, "
                          "dtype=numpy.int64) (or the keys' own dtype) for integer keys")
                             .c_str());
  } else if (has_attr(obj, "as_py") && has_attr(obj, "type") && !has_attr(obj, "__len__")) {
    // A pyarrow Scalar: its buffers are not its value (pa.scalar("abc") read as int8).
    // Its value's width is the array's question, so no guess: one element array.
    throw nb::type_error(("a pyarrow " + python_type_name(obj) +
                          " is not read as a key: pass scalar.as_py() (a Python int hashes as 8 bytes), "
                          "or a one-element array, pyarrow.array([scalar]), to keep its type's width")
                             .c_str());
  } else {
    const char* expected = "expected a NumPy-compatible integer array, an Arrow array, a device "
                           "array, a list, or an int / str / bytes key";
    nb::object array = nb::steal(PyArray_FromAny(o, nullptr, 0, 0, 0, nullptr));
    if (!array.is_valid()) {
      PyErr_Clear();
      throw_not_keys(obj, expected);
    }
    // NumPy wraps any object in a 0-d object array: that is not an array of keys. An
    // object array that __array__ gave (a pandas Index of str) is one, like any other.
    const auto* as_array = reinterpret_cast<PyArrayObject*>(array.ptr());
    if (PyArray_DESCR(as_array)->kind == 'O' && PyArray_NDIM(as_array) == 0)
      throw_not_keys(obj, expected);
    read_numpy(array, keys);
  }
  return keys;
}

}  // namespace gbf::python
