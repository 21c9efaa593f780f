// Host batches through the library, in chunks of py_filter::chunk_keys keys.
//
// Each chunk runs with the GIL released and the filter's lock held; between chunks
// the binding takes the GIL back and calls PyErr_CheckSignals(), so Ctrl-C during a
// long batch raises KeyboardInterrupt at the next chunk boundary. The filter is then
// whole: every chunk ran completely or not at all (an interrupted add has added the
// keys of the chunks before the interruption, and stats().keys_added says how many).
//
// Chunking keeps every answer the same as one call: add_new answers in batch order
// across chunks too, select's row numbers are shifted by the chunk's first row.
#include <nanobind/nanobind.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "binding.hpp"
#include "host_chunks.hpp"

namespace gbf::python {
namespace {

// The answers packed LSB-first, 8 per byte (an Arrow bitmap; the last byte zero-padded).
nb::object pack_bitmap(const bool* answers, std::size_t n) {
  nb::object bitmap = new_numpy_array((n + 7) / 8, NPY_UINT8);
  auto* bits = static_cast<std::uint8_t*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(bitmap.ptr())));
  {
    nb::gil_scoped_release release;
    for (std::size_t byte = 0; byte < n / 8; ++byte) {
      const bool* a = answers + byte * 8;
      bits[byte] = static_cast<std::uint8_t>(a[0] | a[1] << 1 | a[2] << 2 | a[3] << 3 |
                                             a[4] << 4 | a[5] << 5 | a[6] << 6 | a[7] << 7);
    }
    if (n % 8 != 0) {
      std::uint8_t last = 0;
      for (std::size_t i = n / 8 * 8; i < n; ++i) last |= static_cast<std::uint8_t>(answers[i] << (i % 8));
      bits[n / 8] = last;
    }
  }
  return bitmap;
}

}  // namespace

answer_format parse_answer_format(const std::string& name) {
  if (name == "numpy") return answer_format::numpy;
  if (name == "arrow") return answer_format::arrow;
  if (name == "bitmap") return answer_format::bitmap;
  throw nb::value_error(("format must be 'numpy', 'arrow' or 'bitmap', got '" + name + "'").c_str());
}

void host_add(py_filter& self, const host_keys& keys) {
  filter& f = self.f;
  gather_buffer gathered;
  run_chunks(self, keys, [&](const key_piece& part, std::size_t) {
    add_non_null(part, gathered, [&](const auto&... k) { f.add(k...); });
  });
}

nb::object host_add_new(py_filter& self, const host_keys& keys, nb::handle out) {
  if (keys.scalar && !out.is_none())
    throw nb::value_error("add_new: out is for batches, not for one key");
  nb::object answers = result_array(out, keys.count, "add_new");
  bool* is_new = bool_data(answers);
  filter& f = self.f;
  gather_buffer gathered;
  run_chunks(self, keys, [&](const key_piece& part, std::size_t first_row) {
    bool* chunk_new = is_new + first_row;
    visit(part, [&](const auto& k) {
      using K = std::decay_t<decltype(k)>;
      if constexpr (std::is_same_v<K, int_keys<std::uint32_t>> ||
                    std::is_same_v<K, int_keys<std::uint64_t>>) {
        if (k.validity == nullptr) {
          f.add_new(k.data, k.count, chunk_new);
        } else {
          const auto kept = non_null(k, gathered);
          std::unique_ptr<bool[]> kept_new(new bool[kept.size() + 1]);
          f.add_new(kept.data(), kept.size(), kept_new.get());
          for (std::size_t i = 0, j = 0; i < k.count; ++i)
            chunk_new[i] = valid_at(k.validity, i) ? kept_new[j++] : false;
        }
      } else {
        f.add_new(k, chunk_new);
      }
    });
  });
  if (keys.scalar) return nb::bool_(is_new[0]);
  return answers;
}

nb::object host_contains(py_filter& self, const host_keys& keys, nb::handle out,
                         answer_format format) {
  if (keys.scalar && (!out.is_none() || format != answer_format::numpy))
    throw nb::value_error("contains: out and format are for batches, not for one key");
  if (!out.is_none() && format != answer_format::numpy)
    throw nb::value_error("contains: out is for format='numpy'");
  nb::object answers = result_array(out, keys.count, "contains");
  bool* found = bool_data(answers);
  const filter& f = self.f;
  run_chunks(self, keys, [&](const key_piece& part, std::size_t first_row) {
    bool* chunk_found = found + first_row;
    visit(part, [&](const auto& k) {
      using K = std::decay_t<decltype(k)>;
      if constexpr (std::is_same_v<K, int_keys<std::uint32_t>> ||
                    std::is_same_v<K, int_keys<std::uint64_t>>) {
        f.contains(k.data, k.count, chunk_found);
        if (k.validity != nullptr)  // a null key is never found
          for (std::size_t i = 0; i < k.count; ++i) chunk_found[i] = chunk_found[i] && valid_at(k.validity, i);
      } else {
        f.contains(k, chunk_found);
      }
    });
  });
  if (keys.scalar) return nb::bool_(found[0]);
  if (format == answer_format::numpy) return answers;
  nb::object bitmap = pack_bitmap(found, keys.count);
  if (format == answer_format::bitmap) return bitmap;
  return nb::module_::import_("gbf._arrow").attr("boolean_array")(bitmap, keys.count);
}

std::uint64_t host_count(py_filter& self, const host_keys& keys) {
  std::uint64_t total = 0;
  const filter& f = self.f;
  gather_buffer gathered;
  run_chunks(self, keys, [&](const key_piece& part, std::size_t) {
    total += visit(part, [&](const auto& k) -> std::uint64_t {
      using K = std::decay_t<decltype(k)>;
      if constexpr (std::is_same_v<K, int_keys<std::uint32_t>> ||
                    std::is_same_v<K, int_keys<std::uint64_t>>) {
        if (k.validity == nullptr) return f.count(k.data, k.count);
        const auto kept = non_null(k, gathered);
        return f.count(kept.data(), kept.size());
      } else {
        return f.count(k);
      }
    });
  });
  return total;
}

nb::object host_select(py_filter& self, const host_keys& keys) {
  nb::object rows = new_numpy_array(keys.count, NPY_INT64);
  // Row numbers are < 2^63, so the library's uint64 rows are the same bits as int64.
  auto* row_data = static_cast<std::uint64_t*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(rows.ptr())));
  std::size_t written = 0;
  const filter& f = self.f;
  run_chunks(self, keys, [&](const key_piece& part, std::size_t first_row) {
    std::uint64_t* chunk_rows = row_data + written;
    const std::uint64_t kept = visit(part, [&](const auto& k) -> std::uint64_t {
      using K = std::decay_t<decltype(k)>;
      if constexpr (std::is_same_v<K, int_keys<std::uint32_t>> ||
                    std::is_same_v<K, int_keys<std::uint64_t>>) {
        return k.validity == nullptr ? f.select(k.data, k.count, chunk_rows)
                                     : f.select(k.data, k.count, k.validity, chunk_rows);
      } else {
        return f.select(k, chunk_rows);
      }
    });
    if (first_row != 0)
      for (std::uint64_t i = 0; i < kept; ++i) chunk_rows[i] += first_row;
    written += kept;
  });
  if (written == keys.count) return rows;
  // A tight copy when most rows were dropped (the usual join prefilter), else a view.
  nb::object tight = written < keys.count / 2 ? new_numpy_array(written, NPY_INT64) : nb::object();
  if (tight.is_valid()) {
    std::memcpy(PyArray_DATA(reinterpret_cast<PyArrayObject*>(tight.ptr())), row_data,
                written * sizeof(std::uint64_t));
    return tight;
  }
  return nb::steal(PySequence_GetSlice(rows.ptr(), 0, static_cast<Py_ssize_t>(written)));
}

}  // namespace gbf::python
