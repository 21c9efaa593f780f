// gbf.parquet's C++ half: gbf::parquet (include/gbf/parquet.hpp) for Python.
//
//   _parquet_columns(source)                        -> [(path, type, is_unsigned, type_length)]
//   _parquet_column_filters(source, column, ...)    -> (file, column tuple, [(row_group,
//                                                      num_rows, column_bytes, _NewFilter | None)])
//   _PrunerBase(sources, column, ...)               the pruner over many files
//     .prune(keys, validity, per_key)               -> (may_hold, key_offsets, row_groups)
//
// A source is a path (str) or the bytes of a whole Parquet file (any buffer). Keys are read
// by keys.cpp (NumPy, Arrow, lists, scalars): integer keys by value (the piece's signedness
// picks int32_t / uint32_t / int64_t / uint64_t), strings as they are. Results are NumPy
// arrays: may_hold uint8 per row group, key_offsets uint64 (n + 1), row_groups uint32.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "binding.hpp"
#include "gbf/parquet.hpp"

namespace gbf::python {
namespace {

using namespace nb::literals;
namespace pq = gbf::parquet;
using detail::key_kind;

nb::tuple column_tuple(const pq::column_info& c) {
  // Thrift strings should be UTF-8, but a writer may store other bytes: those show
  // as \xNN escapes (as the CLI shows them) instead of failing the whole listing.
  PyObject* path = PyUnicode_DecodeUTF8(c.path.data(), static_cast<Py_ssize_t>(c.path.size()), "backslashreplace");
  if (path == nullptr) throw nb::python_error();
  return nb::make_tuple(nb::steal<nb::str>(path), std::string(pq::to_string(c.type)), c.is_unsigned,
                        c.type_length);
}

pq::read_options read_options_for(bool allow_missing, const std::string& where, unsigned threads) {
  pq::read_options o;
  o.allow_missing = allow_missing;
  o.filters = make_options(parse_backend(where), threads);
  return o;
}

// Calls from_path(path) or from_bytes(data, size) for `source` (a path, or the
// bytes of a whole Parquet file), with the GIL released.
template <class FromPath, class FromBytes>
auto with_source(nb::handle source, FromPath&& from_path, FromBytes&& from_bytes) {
  if (PyUnicode_Check(source.ptr())) {
    const std::string path = os_path(source);
    nb::gil_scoped_release release;
    return from_path(path);
  }
  Py_buffer view{};
  if (PyObject_GetBuffer(source.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    throw nb::type_error("a Parquet source is a path or the bytes of a whole Parquet file");
  }
  struct release_view {
    Py_buffer* v;
    ~release_view() { PyBuffer_Release(v); }
  } guard{&view};
  nb::gil_scoped_release release;
  return from_bytes(static_cast<const std::uint8_t*>(view.buf), static_cast<std::size_t>(view.len));
}

pq::column_filter_set read_source(nb::handle source, const std::string& column,
                                  const pq::read_options& opts) {
  return with_source(
      source, [&](const std::string& path) { return pq::column_filters(path, column, opts); },
      [&](const std::uint8_t* data, std::size_t size) {
        return pq::column_filters(data, size, column, opts, "Parquet bytes");
      });
}

nb::object numpy_copy(const void* data, std::size_t n, int type, std::size_t itemsize) {
  nb::object array = new_numpy_array(n, type);
  if (n > 0)
    std::memcpy(PyArray_DATA(reinterpret_cast<PyArrayObject*>(array.ptr())), data, n * itemsize);
  return array;
}

// Prunes one piece of keys (the GIL released by the caller).
pq::prune_result prune_piece(const pq::pruner& index, const key_piece& p, bool per_key) {
  switch (p.kind) {
    case key_kind::u32:
      if (p.is_signed)
        return index.prune(static_cast<const std::int32_t*>(p.data), p.count, p.validity, per_key);
      return index.prune(static_cast<const std::uint32_t*>(p.data), p.count, p.validity, per_key);
    case key_kind::u64:
      if (p.is_signed)
        return index.prune(static_cast<const std::int64_t*>(p.data), p.count, p.validity, per_key);
      return index.prune(static_cast<const std::uint64_t*>(p.data), p.count, p.validity, per_key);
    case key_kind::str32:
      return index.prune(string_keys<std::int32_t>{p.data, p.data_bytes,
                                                   static_cast<const std::int32_t*>(p.offsets),
                                                   p.count, p.validity},
                         per_key);
    case key_kind::str64:
      break;
  }
  return index.prune(string_keys<std::int64_t>{p.data, p.data_bytes,
                                               static_cast<const std::int64_t*>(p.offsets),
                                               p.count, p.validity},
                     per_key);
}

struct py_pruner {
  pq::pruner index;
};

}  // namespace

void bind_parquet(nb::module_& m) {
  m.def("_parquet_columns", [](nb::handle source) {
    const std::vector<pq::column_info> columns = with_source(
        source, [](const std::string& path) { return pq::columns(path); },
        [](const std::uint8_t* data, std::size_t size) { return pq::columns(data, size, "Parquet bytes"); });
    nb::list out;
    for (const auto& c : columns) out.append(column_tuple(c));
    return out;
  });

  m.def("_parquet_column_filters", [](nb::handle source, const std::string& column,
                                      bool allow_missing, const std::string& where,
                                      unsigned threads) {
    pq::column_filter_set set = read_source(source, column, read_options_for(allow_missing, where, threads));
    nb::list groups;
    for (auto& rg : set.row_groups) {
      nb::object made = nb::none();
      if (rg.bloom) {
        new_filter n;
        n.f.emplace(std::move(*rg.bloom));
        n.requested = parse_backend(where);
        n.threads = threads;
        made = nb::cast(std::move(n));
      }
      groups.append(nb::make_tuple(rg.row_group, rg.num_rows, rg.column_bytes, made));
    }
    return nb::make_tuple(set.file, column_tuple(set.column), groups);
  });

  nb::class_<py_pruner>(m, "_PrunerBase", "gbf::parquet::pruner (see gbf.parquet.Pruner).")
      .def("__init__", [](py_pruner* self, nb::list sources, const std::string& column,
                          bool allow_missing, const std::string& where, unsigned threads) {
        // The filters are read onto the CPU; the pruner packs them for its own backend.
        const pq::read_options opts = read_options_for(allow_missing, "cpu", threads);
        std::vector<pq::column_filter_set> files;
        files.reserve(sources.size());
        for (nb::handle source : sources) files.push_back(read_source(source, column, opts));
        const options placement = make_options(parse_backend(where), threads);
        nb::gil_scoped_release release;
        new (self) py_pruner{pq::pruner(std::move(files), placement)};
      })
      .def_prop_ro("backend", [](py_pruner& self) { return std::string(to_string(self.index.where())); })
      .def_prop_ro("files", [](py_pruner& self) { return self.index.files(); })
      .def_prop_ro("column", [](py_pruner& self) { return column_tuple(self.index.column()); })
      .def("_row_groups", [](py_pruner& self) {
        nb::list out;
        for (std::size_t g = 0; g < self.index.num_row_groups(); ++g) {
          const pq::row_group_ref& r = self.index.row_group(g);
          out.append(nb::make_tuple(r.file, r.row_group, r.num_rows, r.column_bytes, r.has_filter));
        }
        return out;
      })
      .def("_prune", [](py_pruner& self, nb::handle keys_obj, nb::handle validity, bool per_key) {
        host_keys keys = read_host_keys(keys_obj);
        if (!validity.is_none()) {
          // A mask given beside NumPy keys (gbf/parquet.py packs it into an Arrow bitmap).
          if (keys.pieces.size() != 1 || keys.pieces[0].is_string() ||
              keys.pieces[0].validity != nullptr)
            throw nb::value_error("mask is for a NumPy integer array of keys (Arrow arrays carry their nulls)");
          Py_buffer view{};
          if (PyObject_GetBuffer(validity.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) throw nb::python_error();
          const bool fits = static_cast<std::size_t>(view.len) >= (keys.count + 7) / 8;
          if (fits) {
            std::uint8_t* bits = keys.allocate(static_cast<std::size_t>(view.len));
            std::memcpy(bits, view.buf, static_cast<std::size_t>(view.len));
            keys.pieces[0].validity = bits;
          }
          PyBuffer_Release(&view);
          if (!fits) throw nb::value_error("mask must have one entry per key");
        }
        const std::size_t groups = self.index.num_row_groups();
        std::vector<std::uint8_t> may_hold(groups, 0);
        std::vector<std::uint64_t> key_offsets;
        std::vector<std::uint32_t> row_groups;
        if (per_key) key_offsets.push_back(0);
        {
          nb::gil_scoped_release release;
          // An Arrow chunked array arrives in pieces: may_hold is their OR, the per-key
          // lists follow one another.
          for (const key_piece& piece : keys.pieces) {
            pq::prune_result r = prune_piece(self.index, piece, per_key);
            for (std::size_t g = 0; g < groups; ++g) may_hold[g] |= r.may_hold[g];
            if (!per_key) continue;
            const std::uint64_t base = row_groups.size();
            for (std::size_t i = 1; i < r.key_offsets.size(); ++i) key_offsets.push_back(base + r.key_offsets[i]);
            row_groups.insert(row_groups.end(), r.row_groups.begin(), r.row_groups.end());
          }
        }
        nb::object offsets = nb::none();
        nb::object rows = nb::none();
        if (per_key) {
          offsets = numpy_copy(key_offsets.data(), key_offsets.size(), NPY_UINT64, 8);
          rows = numpy_copy(row_groups.data(), row_groups.size(), NPY_UINT32, 4);
        }
        return nb::make_tuple(numpy_copy(may_hold.data(), groups, NPY_UINT8, 1), offsets, rows,
                              keys.count);
      }, "keys"_a, "validity"_a.none(), "per_key"_a);
}

}  // namespace gbf::python
