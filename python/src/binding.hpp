// What the binding's files share: the Python-side filter object, host key
// batches, and the NumPy C API (one import per extension, see numpy_api.hpp).
//
// Files:
//   module.cpp    the module: class FilterBase, factories, functions, error mapping
//   keys.cpp      host keys from NumPy, buffers, Arrow, Python scalars and lists
//   host_ops.cpp  host batches in chunks: GIL released, Ctrl-C between chunks
//   device.cpp    device keys (__cuda_array_interface__, DLPack, gbf.DeviceStrings)
//                 (device_batch.hpp: the device batch every kind's binding runs)
//   timing.cpp    the same calls timed from C++, for `python -m gbf bench`
//   kinds.cpp     counting, scaling and cuckoo filters (gbf.CountingFilter, ...)
//   parquet.cpp   gbf::parquet: a file's columns, a column's filters, row-group pruning
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gbf/filter.hpp"
#include "numpy_api.hpp"

namespace gbf::python {

namespace nb = nanobind;

/// Whether `obj` has attribute `name`, as hasattr() answers (an error while getting it
/// reads as no). A missing attribute costs no AttributeError here: every call probes
/// several (__cuda_array_interface__, __arrow_c_array__, ...), and before 3.13
/// PyObject_HasAttr built and formatted one per probe, 9-14x the call of a tiny batch.
inline bool has_attr(nb::handle obj, const char* name) {
  nb::object key = nb::steal(PyUnicode_InternFromString(name));
  if (!key.is_valid()) {
    PyErr_Clear();
    return false;
  }
  PyObject* value = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  const int found = PyObject_GetOptionalAttr(obj.ptr(), key.ptr(), &value);
#else
  const int found = _PyObject_LookupAttr(obj.ptr(), key.ptr(), &value);
#endif
  Py_XDECREF(value);
  if (found < 0) PyErr_Clear();
  return found == 1;
}

/// A bytes object holding what write(out, size) serializes: sized by size_of() and
/// filled in place, with the GIL released and `self` locked, so the filter's bytes are
/// made once (serialize() into a vector, then copied into bytes, faulted in twice as
/// many pages: to_bytes of 251 MiB took 0.30 s). A chain that grew between the two
/// locked steps (an add on another thread) is measured again.
template <class Self, class SizeOf, class Write>
nb::bytes serialized_bytes(Self& self, SizeOf&& size_of, Write&& write) {
  for (;;) {
    std::uint64_t size = 0;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(self.mutex);
      size = size_of();
    }
    nb::object out = nb::steal(PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size)));
    if (!out.is_valid()) {
      // A bare MemoryError would not say how much was asked for: gbf.AllocationError does.
      if (!PyErr_ExceptionMatches(PyExc_MemoryError)) throw nb::python_error();
      PyErr_Clear();
      throw allocation_error("cannot allocate the " + std::to_string(size) +
                                 " bytes of the filter's serialized form (a bytes object)",
                             size);
    }
    auto* data = reinterpret_cast<std::uint8_t*>(PyBytes_AS_STRING(out.ptr()));
    bool written = false;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(self.mutex);
      if (size_of() == size) {
        write(data, static_cast<std::size_t>(size));
        written = true;
      }
    }
    if (written) return nb::borrow<nb::bytes>(out);
  }
}

/// Host keys run through the library in chunks of this many keys; between chunks the
/// binding takes the GIL back and checks for Ctrl-C (PyErr_CheckSignals). 4 Mi keys is
/// 10-40 ms of CPU work on a 2-core machine, and a tiny overhead next to it.
inline constexpr std::size_t default_cpu_chunk_keys = std::size_t{1} << 22;
/// For a GPU filter the chunk is 32 Mi keys: the library's host pipeline overlaps copies
/// and kernels over 4 Mi-key staging chunks on 3 streams, so each call feeds it 8 of them.
inline constexpr std::size_t default_gpu_chunk_keys = std::size_t{1} << 25;

/// chunk_keys as a filter keeps it: at least 1, rounded up to a multiple of 8 so that each
/// chunk's slice of a validity bitmap starts on a byte. ValueError past the largest such.
inline std::size_t checked_chunk_keys(std::size_t keys) {
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max() / 8 * 8;
  if (keys == 0) throw nb::value_error("chunk_keys must be at least 1");
  if (keys > most)
    throw nb::value_error(("chunk_keys must be at most " + std::to_string(most)).c_str());
  return (keys + 7) / 8 * 8;
}

/// The bytes the OS takes for a file path given as a Python str or bytes: a str is
/// encoded as os.fsencode does (surrogateescape: any name os.listdir returns, which
/// nanobind's strict-UTF-8 std::string caster refuses). ValueError for a NUL byte: no
/// file name holds one, and the C++ side would cut the name there.
inline std::string os_path(nb::handle path) {
  nb::object encoded;
  if (PyBytes_Check(path.ptr())) {
    encoded = nb::borrow(path);
  } else if (PyUnicode_Check(path.ptr())) {
    encoded = nb::steal(PyUnicode_EncodeFSDefault(path.ptr()));
    if (!encoded.is_valid()) throw nb::python_error();
  } else {
    throw nb::type_error("a path is a str or bytes");
  }
  std::string bytes(PyBytes_AS_STRING(encoded.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(encoded.ptr())));
  if (bytes.find('\0') != std::string::npos) {
    // A file's contents passed as its path would be quoted whole: the first bytes say enough.
    constexpr std::size_t shown = 60;
    std::string quoted = nb::repr(path).c_str();
    if (quoted.size() > shown)
      quoted = quoted.substr(0, shown) + "... (" + std::to_string(bytes.size()) + " bytes)";
    throw nb::value_error(("the path " + quoted + " holds a NUL byte, which no file name can").c_str());
  }
  return bytes;
}

/// A gbf::filter as Python holds it, with what the C++ filter does not record.
struct py_filter {
  gbf::filter f;
  /// One batch at a time: calls run with the GIL released, and a gbf::filter is not
  /// thread-safe. Taken after the GIL is released, so that waiting never holds the GIL.
  std::mutex mutex;
  double fpp = 0;                         ///< Target fpp (0 = unknown), written by save().
  backend requested = backend::automatic; ///< The backend asked for (pickling keeps it).
  unsigned threads = 0;                   ///< CPU threads asked for (0 = all).
  std::size_t chunk_keys = default_cpu_chunk_keys;  ///< See default_cpu_chunk_keys.
  /// Device key arrays whose _async work may still be running (device.cpp keeps them
  /// alive until an event recorded after the work has completed).
  std::shared_ptr<void> device_pending;

  py_filter(gbf::filter&& filter, double target_fpp, backend asked, unsigned cpu_threads);
};

/// A filter made by a factory (create, load, copy, ...) before it becomes a Python
/// object: FilterBase.__init__ takes one, so that Python subclasses get every factory.
struct new_filter {
  std::optional<gbf::filter> f;
  double fpp = 0;
  backend requested = backend::automatic;
  unsigned threads = 0;
};

/// "cpu", "gpu", "auto" -> backend; anything else throws ValueError naming the choices.
backend parse_backend(const std::string& name);
/// The options the binding passes to the library for `where` and `threads`.
options make_options(backend where, unsigned threads);

// --- Host keys (keys.cpp) ---------------------------------------------------------

/// One contiguous run of host keys in a form the C++ API takes.
struct key_piece {
  detail::key_kind kind = detail::key_kind::u64;
  const void* data = nullptr;  ///< Integers: `count` keys. Strings: the key bytes.
  std::size_t data_bytes = 0;  ///< Strings: bytes at data.
  const void* offsets = nullptr;  ///< Strings: count + 1 offsets (int32 or int64 by kind).
  std::size_t count = 0;
  /// Arrow validity bitmap, bit i = key i (LSB first; 0 = null); null when all valid.
  /// Always byte-aligned here: keys.cpp shifts a sliced array's bitmap when needed.
  const std::uint8_t* validity = nullptr;
  /// Integer keys: whether they are signed (NumPy 'i', Arrow int32/int64, a Python int
  /// below 2**63). A filter hashes the bytes and ignores it; Parquet pruning takes keys
  /// by value and needs it.
  bool is_signed = false;

  bool is_string() const noexcept {
    return kind == detail::key_kind::str32 || kind == detail::key_kind::str64;
  }
};

/// Host keys read from a Python object: pieces in order (an Arrow chunked array has
/// several) and whatever keeps their memory alive while the batch runs.
struct host_keys {
  std::vector<key_piece> pieces;
  std::size_t count = 0;  ///< Keys in all pieces.
  bool scalar = false;    ///< One key given as a Python scalar: answers come back as scalars.
  std::vector<nb::object> owners;                        ///< Arrays whose memory we read.
  std::vector<std::shared_ptr<void>> storage;            ///< Copies and Arrow releases.

  void add_piece(const key_piece& p) {
    pieces.push_back(p);
    count += p.count;
  }
  /// A buffer of `bytes` owned by this batch.
  std::uint8_t* allocate(std::size_t bytes);
  /// Adds `n` string keys packed in `data` (`total` bytes, n + 1 int64 offsets; `validity`,
  /// LSB first, may be null), memory this batch owns or keeps alive.
  void add_packed_strings(const std::uint8_t* data, std::size_t total, const std::int64_t* offsets,
                          std::size_t n, const std::uint8_t* validity) {
    key_piece piece;
    piece.kind = detail::key_kind::str64;
    piece.data = data;
    piece.data_bytes = total;
    piece.offsets = offsets;
    piece.count = n;
    piece.validity = validity;
    add_piece(piece);
  }
  /// Packs `n` string keys into one batch owned by this one, reading key i twice
  /// through bytes_of(i, key) -> bool: false for a null key, else true with `key`
  /// its bytes. The first pass sizes the batch (a bad item throws there), the
  /// second copies the bytes back to back.
  template <class BytesOf>
  void pack_strings(std::size_t n, const BytesOf& bytes_of) {
    std::string_view key;
    std::size_t total = 0;
    bool any_null = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (bytes_of(i, key))
        total += key.size();
      else
        any_null = true;
    }
    auto* offsets = reinterpret_cast<std::int64_t*>(allocate((n + 1) * sizeof(std::int64_t)));
    std::uint8_t* data = allocate(total > 0 ? total : 1);
    std::uint8_t* validity = nullptr;
    if (any_null) {
      validity = allocate((n + 7) / 8);
      std::memset(validity, 0, (n + 7) / 8);
    }
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      offsets[i] = static_cast<std::int64_t>(at);
      if (!bytes_of(i, key)) continue;
      if (!key.empty()) std::memcpy(data + at, key.data(), key.size());
      at += key.size();
      if (validity) validity[i / 8] |= static_cast<std::uint8_t>(1u << (i % 8));
    }
    offsets[n] = static_cast<std::int64_t>(at);
    add_packed_strings(data, total, offsets, n, validity);
  }
};

/// Reads host keys (no copy where the memory allows it; see docs/python.md) from a NumPy
/// array, anything NumPy reads without copying (buffer protocol, __array_interface__), an
/// Arrow array or stream (__arrow_c_array__ / __arrow_c_stream__), a CPU DLPack tensor, a
/// Python int / str / bytes (one key) or a list of them. Throws TypeError (not keys) or
/// ValueError (keys of a shape or width gbf cannot hash).
host_keys read_host_keys(nb::handle obj);

/// A new 1-D NumPy array of `n` items of `type` (NPY_BOOL, NPY_INT64, ...), uninitialised.
nb::object new_numpy_array(std::size_t n, int type);

// --- Host operations in chunks (host_ops.cpp) ------------------------------------

/// How contains answers: a NumPy bool array, an Arrow BooleanArray, or an LSB-first bitmap.
enum class answer_format { numpy, arrow, bitmap };
answer_format parse_answer_format(const std::string& name);

void host_add(py_filter& self, const host_keys& keys);
nb::object host_add_new(py_filter& self, const host_keys& keys, nb::handle out);
nb::object host_contains(py_filter& self, const host_keys& keys, nb::handle out,
                         answer_format format);
std::uint64_t host_count(py_filter& self, const host_keys& keys);
nb::object host_select(py_filter& self, const host_keys& keys);

// --- Device keys (device.cpp) -----------------------------------------------------

/// True when `obj` exposes __cuda_array_interface__, or __dlpack__ with a CUDA device.
bool is_device_array(nb::handle obj);
/// is_device_array, with the attribute probes skipped for the common host inputs (NumPy
/// arrays, ints, str, bytes, lists, tuples).
bool device_keys(nb::handle keys);
/// ValueError when a stream is given with host keys.
void no_stream_for_host(nb::handle stream);
/// obj.__dlpack_device__() as (device_type, device_id); TypeError naming what it returned
/// when that is not a pair of ints.
std::pair<int, int> dlpack_device(nb::handle obj);
/// The stream a device batch of `keys` runs on, numbered as the array protocols do (0 or 1
/// legacy default, 2 per-thread default, else a cudaStream_t): `stream` (an int, or an
/// object with __cuda_stream__, .cuda_stream or .ptr) when given, else the current stream
/// of the keys' framework (torch, cupy) when it is imported, else none (the array's own
/// stream, or the legacy default). TypeError / ValueError for a bad `stream`.
std::optional<std::uintptr_t> stream_value(nb::handle keys, nb::handle stream);
/// The current stream of `array`'s framework on the array's GPU (torch, cupy, when
/// imported), numbered as stream_value; none for other arrays.
std::optional<std::uintptr_t> framework_stream(nb::handle array);

void device_add(py_filter& self, nb::handle keys, nb::handle stream);
nb::object device_add_new(py_filter& self, nb::handle keys, nb::handle out, nb::handle stream);
nb::object device_contains(py_filter& self, nb::handle keys, nb::handle out, nb::handle stream);
std::uint64_t device_count(py_filter& self, nb::handle keys, nb::handle stream);
nb::object device_select(py_filter& self, nb::handle keys, nb::handle stream);
/// Waits for this filter's device work and drops the device arrays it kept alive.
void device_synchronize(py_filter& self);
/// gbf.DeviceStrings.from_arrow: the buffers of an Arrow device string array
/// (__arrow_c_device_array__), after waiting for its sync event: (offsets pointer, offsets
/// typestr, offsets count, data pointer, data bytes, validity pointer or 0, validity bytes,
/// device id, owner capsule that releases the array).
nb::tuple arrow_device_strings(nb::handle obj);
/// Seconds of each of `calls` synchronous calls of op on device keys, timed in C++.
std::vector<double> device_time_op(py_filter& self, nb::handle keys, const std::string& op,
                                   std::size_t calls);

/// Runs op() with the GIL released and the locks of both filters (of any kind: a
/// `mutex` member) held, for the calls that combine two filters (merge,
/// intersect, symmetric_difference); one lock when they are the same filter.
template <class Filter, class Op>
void with_both_locked(Filter& self, Filter& other, Op&& op) {
  nb::gil_scoped_release release;
  if (&self == &other) {
    std::lock_guard<std::mutex> lock(self.mutex);
    op();
  } else {
    std::scoped_lock lock(self.mutex, other.mutex);
    op();
  }
}

// --- Timing (timing.cpp) ----------------------------------------------------------

void bind_timing(nb::module_& m);

// --- Parquet datasets (parquet.cpp) -------------------------------------------------

/// _parquet_columns, _parquet_column_filters and _PrunerBase (gbf.parquet's C++ half).
void bind_parquet(nb::module_& m);

// --- Other filter kinds (kinds.cpp) --------------------------------------------------

/// CountingFilterBase, ScalingFilterBase, CuckooFilterBase and their factories.
void bind_kinds(nb::module_& m);

}  // namespace gbf::python
