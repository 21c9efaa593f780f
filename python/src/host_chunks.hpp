// Host batches in chunks, shared by gbf.Filter (host_ops.cpp) and the other filter
// kinds (kinds.cpp): a chunk of a key_piece, its keys as the C++ API takes them, and the
// loop that runs chunks with the GIL released and the filter's lock held, checking for
// Ctrl-C between them. `Self` is any binding object with `chunk_keys` and `mutex`.
#pragma once

#include <nanobind/nanobind.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <string>
#include <vector>

#include "binding.hpp"

namespace gbf::python {

/// Integer keys of one chunk; `validity` as in key_piece (integer Arrow arrays with nulls).
template <class T>
struct int_keys {
  const T* data;
  std::size_t count;
  const std::uint8_t* validity;
};

inline bool valid_at(const std::uint8_t* validity, std::size_t i) {
  return validity == nullptr || ((validity[i / 8] >> (i % 8)) & 1u) != 0;
}

inline key_piece slice(const key_piece& p, std::size_t begin, std::size_t end) {
  key_piece s = p;
  s.count = end - begin;
  if (p.is_string()) {
    const std::size_t width = p.kind == detail::key_kind::str32 ? 4 : 8;
    s.offsets = static_cast<const std::uint8_t*>(p.offsets) + begin * width;
  } else {
    const std::size_t width = p.kind == detail::key_kind::u32 ? 4 : 8;
    s.data = static_cast<const std::uint8_t*>(p.data) + begin * width;
  }
  // begin is a multiple of 8 (chunk_keys is), so the bitmap slice stays byte-aligned.
  if (p.validity != nullptr) s.validity = p.validity + begin / 8;
  return s;
}

// Calls fn with the chunk as int_keys<uint32_t / uint64_t> or string_keys<int32_t / int64_t>.
// Signed integers travel as unsigned ones: a key hashes its bytes, not its value.
template <class Fn>
decltype(auto) visit(const key_piece& p, Fn&& fn) {
  switch (p.kind) {
    case detail::key_kind::u32:
      return fn(int_keys<std::uint32_t>{static_cast<const std::uint32_t*>(p.data), p.count,
                                        p.validity});
    case detail::key_kind::u64:
      return fn(int_keys<std::uint64_t>{static_cast<const std::uint64_t*>(p.data), p.count,
                                        p.validity});
    case detail::key_kind::str32:
      return fn(string_keys<std::int32_t>{p.data, p.data_bytes,
                                          static_cast<const std::int32_t*>(p.offsets), p.count,
                                          p.validity});
    case detail::key_kind::str64:
      break;
  }
  return fn(string_keys<std::int64_t>{p.data, p.data_bytes,
                                      static_cast<const std::int64_t*>(p.offsets), p.count,
                                      p.validity});
}

// Room for the non-null keys of a batch's chunks, kept across the chunks of one call:
// a fresh 32 MiB array per 4 Mi-key chunk cost a page fault per 4 KiB.
class gather_buffer {
 public:
  template <class T>
  T* room(std::size_t n) {
    const std::size_t words = (n * sizeof(T) + 7) / 8 + 1;
    if (words > capacity_words_) {
      words_.reset(new std::uint64_t[words]);
      capacity_words_ = words;
    }
    return reinterpret_cast<T*>(words_.get());
  }

 private:
  std::unique_ptr<std::uint64_t[]> words_;
  std::size_t capacity_words_ = 0;
};

// The non-null keys of an integer chunk, in order (they live in a gather_buffer).
template <class T>
struct kept_keys {
  const T* keys = nullptr;
  std::size_t count = 0;
  const T* data() const { return keys; }
  std::size_t size() const { return count; }
};

// The non-null keys of an integer chunk with nulls (the library's integer add, add_new
// and count take no bitmap; its null rule is that a null key is never added or found).
// A validity byte at a time: 8 keys copied when all are valid, else each key written
// and the cursor moved by its bit (no branch per key). A push_back per key into a
// fresh vector made the gather 3-4x the add it fed.
template <class T>
kept_keys<T> non_null(const int_keys<T>& k, gather_buffer& buffer) {
  T* const out = buffer.room<T>(k.count);
  std::size_t n = 0;  // n <= i for the key i being read: every write lies in the room
  const std::size_t whole_bytes = k.count / 8;
  for (std::size_t b = 0; b < whole_bytes; ++b) {
    const unsigned bits = k.validity[b];
    const T* const in = k.data + 8 * b;
    if (bits == 0xffu) {
      // A loop, not memcpy: GCC made the 64-byte memcpy a `rep movs` (slow to start).
      for (unsigned j = 0; j < 8; ++j) out[n + j] = in[j];
      n += 8;
      continue;
    }
    for (unsigned j = 0; j < 8; ++j) {
      out[n] = in[j];
      n += (bits >> j) & 1u;
    }
  }
  for (std::size_t i = 8 * whole_bytes; i < k.count; ++i) {
    out[n] = k.data[i];
    n += valid_at(k.validity, i) ? 1 : 0;
  }
  return {out, n};
}

// Calls add(data, n) with the non-null keys of an integer chunk (gathered past their
// nulls into `buffer` when it has any) or add(string_keys) with a string chunk, whose
// bitmap the library reads itself: an add of every kind that takes keys.
template <class Add>
void add_non_null(const key_piece& part, gather_buffer& buffer, Add&& add) {
  visit(part, [&](const auto& k) {
    using K = std::decay_t<decltype(k)>;
    if constexpr (std::is_same_v<K, int_keys<std::uint32_t>> || std::is_same_v<K, int_keys<std::uint64_t>>) {
      if (k.validity == nullptr) {
        add(k.data, k.count);
      } else {
        const auto kept = non_null(k, buffer);
        add(kept.data(), kept.size());
      }
    } else {
      add(k);
    }
  });
}

// Runs body(chunk, first_row) over every chunk of every piece, GIL released, lock held,
// checking for signals between chunks.
template <class Self, class Body>
void run_chunks(Self& self, const host_keys& keys, Body&& body) {
  const std::size_t chunk = self.chunk_keys;
  std::size_t first_row = 0;
  std::size_t done = 0;
  for (const key_piece& piece : keys.pieces) {
    for (std::size_t begin = 0; begin < piece.count; begin += chunk) {
      const std::size_t end = std::min(piece.count, begin + chunk);
      const key_piece part = slice(piece, begin, end);
      {
        nb::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(self.mutex);
        body(part, first_row + begin);
      }
      done += end - begin;
      if (done < keys.count && PyErr_CheckSignals() != 0) throw nb::python_error();
    }
    first_row += piece.count;
  }
}

// A result array of n items of `type` (1 byte each): `out` when given (checked), else new.
inline nb::object result_array(nb::handle out, std::size_t n, const char* what) {
  if (out.is_none()) return new_numpy_array(n, NPY_BOOL);
  if (!PyArray_Check(out.ptr()))
    throw nb::type_error((std::string(what) + ": out must be a NumPy bool or uint8 array").c_str());
  auto* array = reinterpret_cast<PyArrayObject*>(out.ptr());
  const char kind = PyArray_DESCR(array)->kind;
  const bool one_byte = (kind == 'b' || kind == 'u' || kind == 'i') && PyArray_ITEMSIZE(array) == 1;
  if (!one_byte || PyArray_NDIM(array) != 1 || !PyArray_IS_C_CONTIGUOUS(array) ||
      !PyArray_ISWRITEABLE(array))
    throw nb::value_error((std::string(what) +
                           ": out must be a writable, C-contiguous 1-D array of bool or uint8")
                              .c_str());
  if (static_cast<std::size_t>(PyArray_SIZE(array)) != n)
    throw nb::value_error((std::string(what) + ": out has " +
                           std::to_string(PyArray_SIZE(array)) + " items for " +
                           std::to_string(n) + " keys")
                              .c_str());
  return nb::borrow(out);
}

inline bool* bool_data(nb::handle array) {
  return static_cast<bool*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(array.ptr())));
}

}  // namespace gbf::python
