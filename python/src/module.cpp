// gbf._core: the extension module. Class FilterBase (gbf.Filter derives from it in
// gbf/_filter.py), the factories that make filters, the sizing and GPU probes, and
// the mapping of gbf::error subclasses onto gbf's Python exceptions (gbf/_errors.py).
#define GBF_NUMPY_IMPORT
#include "binding.hpp"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "docstrings.hpp"
#include "gbf/block_bits.hpp"
#include "gbf/io.hpp"
#include "gbf/sizing.hpp"
#include "gbf/version.hpp"
#include "host_chunks.hpp"

namespace gbf::python {

py_filter::py_filter(gbf::filter&& filter, double target_fpp, backend asked, unsigned cpu_threads)
    : f(std::move(filter)), fpp(target_fpp), requested(asked), threads(cpu_threads) {
  chunk_keys = f.where() == backend::gpu ? default_gpu_chunk_keys : default_cpu_chunk_keys;
}

backend parse_backend(const std::string& name) {
  if (name == "auto") return backend::automatic;
  if (name == "cpu") return backend::cpu;
  if (name == "gpu") return backend::gpu;
  throw nb::value_error(("backend must be 'auto', 'cpu' or 'gpu', got '" + name + "'").c_str());
}

options make_options(backend where, unsigned threads) {
  options o;
  o.where = where;
  o.cpu_threads = threads;
  return o;
}

namespace {

using namespace nb::literals;

// --- Errors ----------------------------------------------------------------------

// gbf._errors, imported once at module load and kept for the process's life.
nb::handle errors_module;

// A message as str. It may hold a path's OS bytes, which need not be UTF-8:
// decoded as os.fsdecode does (undecodable bytes as lone surrogates, which
// os.fsencode turns back into the name). A strict decode raised
// UnicodeDecodeError instead of the error itself.
nb::object message(const char* what) {
  PyObject* text = PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)), "surrogateescape");
  if (text == nullptr) throw nb::python_error();
  return nb::steal(text);
}

void raise(const char* name, const char* what) {
  nb::object cls = errors_module.attr(name);
  PyErr_SetObject(cls.ptr(), cls(message(what)).ptr());
}

template <class Value>
void raise_with(const char* name, const char* what, const char* attribute, Value value) {
  nb::object cls = errors_module.attr(name);
  nb::object exc = cls(message(what));
  exc.attr(attribute) = value;
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const invalid_argument& e) {
    raise("InvalidArgument", e.what());
  } catch (const layout_mismatch& e) {
    raise("LayoutMismatch", e.what());
  } catch (const format_error& e) {
    raise("FormatError", e.what());
  } catch (const no_gpu& e) {
    raise("NoGPU", e.what());
  } catch (const wrong_backend& e) {
    raise("WrongBackend", e.what());
  } catch (const allocation_error& e) {
    raise_with("AllocationError", e.what(), "bytes", e.bytes());
  } catch (const cuda_error& e) {
    raise_with("CudaError", e.what(), "code", e.code());
  } catch (const filter_full& e) {
    nb::object cls = errors_module.attr("FilterFull");
    nb::object exc = cls(message(e.what()));
    exc.attr("not_inserted") = e.not_inserted();
    exc.attr("fits") = e.fits();
    PyErr_SetObject(cls.ptr(), exc.ptr());
  } catch (const io_error& e) {
    // OSError(errno, text) picks FileNotFoundError, PermissionError, ... from errno.
    nb::object exc = nb::handle(PyExc_OSError)(e.os_error(), message(e.what()));
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (const error& e) {
    raise("Error", e.what());
  } catch (const std::bad_alloc&) {
    // A host allocation of gbf's own (packing keys, a staging buffer) that the
    // OS refused: the same class as the filter allocations it checks first, so
    // that one except clause catches both (it is a MemoryError as well).
    raise_with("AllocationError", "out of host memory: an allocation failed (std::bad_alloc)", "bytes",
               std::uint64_t{0});
  }
}

// --- Helpers ---------------------------------------------------------------------

// The bytes of any buffer (bytes, bytearray, memoryview, NumPy uint8 ...).
struct byte_view {
  Py_buffer view{};
  explicit byte_view(nb::handle obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) throw nb::python_error();
  }
  ~byte_view() { PyBuffer_Release(&view); }
  const std::uint8_t* data() const { return static_cast<const std::uint8_t*>(view.buf); }
  std::size_t size() const { return static_cast<std::size_t>(view.len); }
};

nb::tuple layout_tuple(const layout& l) {
  return nb::make_tuple(l.words_per_block, l.bits_per_key, l.seed, l.num_blocks);
}

layout make_layout(std::uint32_t w, std::uint32_t k, std::uint64_t seed, std::uint64_t blocks) {
  layout l;
  l.words_per_block = w;
  l.bits_per_key = k;
  l.seed = seed;
  l.num_blocks = blocks;
  return l;
}

new_filter made(filter&& f, double fpp, const std::string& where, unsigned threads) {
  new_filter n;
  n.f.emplace(std::move(f));
  n.fpp = fpp;
  n.requested = parse_backend(where);
  n.threads = threads;
  return n;
}

nb::bytes to_bytes(const std::vector<std::uint8_t>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

const char* const filter_doc = R"(The C++ filter under gbf.Filter (see gbf.Filter for the full documentation).)";

}  // namespace

void init_module(nb::module_& m) {
  if (_import_array() < 0) throw nb::python_error();
  errors_module = nb::module_::import_("gbf._errors").release();
  nb::register_exception_translator(translate);

  m.doc() = "gbf's C++ extension; use the gbf package, not this module.";
  m.attr("has_cuda_build") = library_has_cuda();
  m.attr("library_version") = library_version();
  m.attr("default_cpu_chunk_keys") = default_cpu_chunk_keys;
  m.attr("default_gpu_chunk_keys") = default_gpu_chunk_keys;

  nb::class_<new_filter>(m, "_NewFilter", "A filter on its way to becoming a Filter (internal).");

  // --- Factories: each returns a _NewFilter for FilterBase.__init__ ---------------
  m.def("_create", [](std::uint64_t capacity, double fpp, const std::string& where,
                      std::uint32_t w, std::uint32_t k, std::uint64_t seed, unsigned threads) {
    shape s;
    s.words_per_block = w;
    s.bits_per_key = k;
    s.seed = seed;
    return made(filter::create(capacity, fpp, make_options(parse_backend(where), threads), s),
                fpp, where, threads);
  });
  m.def("_from_layout", [](std::uint32_t w, std::uint32_t k, std::uint64_t seed,
                           std::uint64_t blocks, std::uint64_t capacity, double fpp,
                           const std::string& where, unsigned threads) {
    // fpp only travels with the filter (save, pickle): refuse here a value those would
    // refuse later, when the filter may hold a day's keys. 0 = unknown (fpp=None).
    if (!(fpp == 0 || (fpp > 0 && fpp < 1))) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", fpp);
      throw invalid_argument(std::string("fpp must be in (0, 1), or None (unknown) with an explicit layout; got ") +
                             text);
    }
    return made(filter(make_layout(w, k, seed, blocks), make_options(parse_backend(where), threads),
                       capacity),
                fpp, where, threads);
  });
  m.def("_from_words", [](nb::handle words, std::uint32_t w, std::uint32_t k, std::uint64_t seed,
                          std::uint64_t blocks, std::uint64_t capacity, double fpp, std::uint64_t keys_added,
                          const std::string& where, unsigned threads) {
    if (!(fpp == 0 || (fpp > 0 && fpp < 1)))
      throw invalid_argument("from_words: fpp must be in (0, 1), or None (unknown)");
    const layout l = make_layout(w, k, seed, blocks);
    if (const char* problem = layout_problem(l)) throw invalid_argument(std::string("from_words: invalid layout: ") + problem);
    // The words are read in place: a NumPy uint32 array as words() returns, nothing else
    // (another dtype converted would be other bits).
    auto* array = reinterpret_cast<PyArrayObject*>(words.ptr());
    if (!PyArray_Check(words.ptr()) || PyArray_TYPE(array) != NPY_UINT32 || PyArray_NDIM(array) != 1) {
      const std::string got = PyArray_Check(words.ptr())
                                  ? std::to_string(PyArray_NDIM(array)) + "-D " +
                                        nb::cast<std::string>(nb::steal<nb::str>(PyObject_Str(words.attr("dtype").ptr()))) + " array"
                                  : nb::cast<std::string>(nb::str(words.type().attr("__name__")));
      throw nb::type_error(("from_words: words must be a 1-D NumPy uint32 array (what words() returns), not a " + got)
                               .c_str());
    }
    if (static_cast<std::uint64_t>(PyArray_SIZE(array)) != l.num_words())
      throw invalid_argument("from_words: the layout (" + to_string(l) + ") has " + std::to_string(l.num_words()) +
                             " words, the array " + std::to_string(PyArray_SIZE(array)));
    nb::object contiguous = nb::steal(PyArray_FromAny(words.ptr(), PyArray_DescrFromType(NPY_UINT32), 1, 1,
                                                      NPY_ARRAY_IN_ARRAY, nullptr));
    if (!contiguous.is_valid()) throw nb::python_error();
    const auto* data = static_cast<const std::uint32_t*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(contiguous.ptr())));
    const options opts = make_options(parse_backend(where), threads);
    std::optional<filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(filter::from_words(l, data, opts, capacity, keys_added));
    }
    return made(std::move(*f), fpp, where, threads);
  });
  m.def("_block_bits", [](nb::handle keys, std::uint32_t w, std::uint32_t k, std::uint64_t seed,
                          std::uint64_t blocks) {
    // gbf::block_bits of host keys for gbf.dask: (blocks uint32, words uint32, keys added),
    // the words W per block, flat; the keys as Filter.add reads them, nulls skipped.
    if (device_keys(keys)) throw invalid_argument("block bits are computed from host keys, not device arrays");
    const host_keys host = read_host_keys(keys);
    block_bits bits(make_layout(w, k, seed, blocks));
    {
      nb::gil_scoped_release release;
      gather_buffer gathered;
      for (const key_piece& piece : host.pieces)
        add_non_null(piece, gathered, [&](const auto&... k) { bits.add(k...); });
      (void)bits.size_bytes();  // the last pieces' hashes are merged here, not under the GIL
    }
    const auto to_array = [](const std::vector<std::uint32_t>& values) {
      nb::object out = new_numpy_array(values.size(), NPY_UINT32);
      std::copy(values.begin(), values.end(),
                static_cast<std::uint32_t*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(out.ptr()))));
      return out;
    };
    return nb::make_tuple(to_array(bits.blocks()), to_array(bits.words()), bits.keys_added());
  });
  m.def("_parquet_layout", [](std::uint64_t capacity, double fpp) {
    return layout_tuple(parquet_compatible_layout(capacity, fpp));
  });
  m.def("_parquet_compatible", [](std::uint64_t capacity, double fpp, const std::string& where,
                                  unsigned threads) {
    return made(filter(parquet_compatible_layout(capacity, fpp),
                       make_options(parse_backend(where), threads), capacity),
                fpp, where, threads);
  });
  m.def("_deserialize", [](nb::handle data, const std::string& where, unsigned threads) {
    byte_view bytes(data);
    file_metadata meta;
    const options opts = make_options(parse_backend(where), threads);
    std::optional<filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(deserialize(bytes.data(), bytes.size(), opts, &meta));
    }
    return made(std::move(*f), meta.fpp, where, threads);
  });
  m.def("_load", [](nb::handle path_object, const std::string& where, unsigned threads) {
    const std::string path = os_path(path_object);
    file_metadata meta;
    const options opts = make_options(parse_backend(where), threads);
    std::optional<filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(load(path, opts, &meta));
    }
    return made(std::move(*f), meta.fpp, where, threads);
  });
  m.def("_from_parquet_sbbf", [](nb::handle data, bool header, const std::string& where,
                                 unsigned threads) {
    byte_view bytes(data);
    const options opts = make_options(parse_backend(where), threads);
    std::optional<filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(from_parquet_sbbf(bytes.data(), bytes.size(), header, opts));
    }
    return made(std::move(*f), 0, where, threads);
  });
  m.def("_load_parquet_sbbf", [](nb::handle path_object, bool header, const std::string& where,
                                 unsigned threads) {
    const std::string path = os_path(path_object);
    const options opts = make_options(parse_backend(where), threads);
    std::optional<filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(load_parquet_sbbf(path, header, opts));
    }
    return made(std::move(*f), 0, where, threads);
  });

  // --- Sizing and the machine --------------------------------------------------------
  m.def("size_for", [](std::uint64_t capacity, double fpp, std::uint32_t w, std::uint32_t k,
                       std::uint64_t seed) {
    shape s;
    s.words_per_block = w;
    s.bits_per_key = k;
    s.seed = seed;
    return layout_tuple(size_for(capacity, fpp, s));
  });
  m.def("expected_fpr", [](std::uint32_t w, std::uint32_t k, std::uint64_t seed,
                           std::uint64_t blocks, double keys) {
    const layout l = make_layout(w, k, seed, blocks);
    if (const char* problem = layout_problem(l)) throw invalid_argument(std::string("invalid layout: ") + problem);
    return expected_fpr(l, keys);
  });
  m.def("classic_bits_per_key", &classic_bits_per_key);
  m.def("parquet_problem", [](std::uint32_t w, std::uint32_t k, std::uint64_t seed,
                              std::uint64_t blocks) {
    return parquet_problem(make_layout(w, k, seed, blocks));
  });
  m.def("layout_description", [](std::uint32_t w, std::uint32_t k, std::uint64_t seed,
                                 std::uint64_t blocks) {
    return to_string(make_layout(w, k, seed, blocks));
  });
  m.def("query_gpu", [] {
    const gpu_status s = query_gpu();
    return std::make_pair(s.available, s.description);
  });
  m.def("cpu_has_avx2", &cpu_has_avx2);
  m.def("cpu_has_avx512", &cpu_has_avx512);
  m.def("_arrow_device_strings", &arrow_device_strings);
  m.def("_stream_value", &stream_value, "keys"_a, "stream"_a.none(),
        "The stream number device keys would run on (see Filter.contains), or None.");

  // --- FilterBase ----------------------------------------------------------------------
  nb::class_<py_filter> cls(m, "FilterBase", filter_doc);
  cls.def("__init__", [](py_filter* self, new_filter& source) {
    if (!source.f) throw nb::value_error("this _NewFilter was already used");
    new (self) py_filter(std::move(*source.f), source.fpp, source.requested, source.threads);
    source.f.reset();
  });

  // Docstrings live for the process (nanobind keeps the pointers).
  static const std::string add_doc = std::string(docs::add) + docs::keys_note;
  static const std::string add_new_doc = std::string(docs::add_new) + docs::keys_note;
  static const std::string contains_doc = std::string(docs::contains) + docs::keys_note;
  static const std::string count_doc = std::string(docs::count) + docs::keys_note;
  static const std::string select_doc = std::string(docs::select) + docs::keys_note;
  cls.def("add", [](py_filter& self, nb::handle keys, nb::handle stream) {
        if (device_keys(keys)) return device_add(self, keys, stream);
        no_stream_for_host(stream);
        host_add(self, read_host_keys(keys));
      }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(), add_doc.c_str());
  cls.def("add_new", [](py_filter& self, nb::handle keys, nb::handle out, nb::handle stream) {
        if (device_keys(keys)) return device_add_new(self, keys, out, stream);
        no_stream_for_host(stream);
        return host_add_new(self, read_host_keys(keys), out);
      }, "keys"_a.none(), nb::kw_only(), "out"_a = nb::none(), "stream"_a = nb::none(), add_new_doc.c_str());
  cls.def("contains", [](py_filter& self, nb::handle keys, nb::handle out, const std::string& format,
                         nb::handle stream) {
        if (device_keys(keys)) {
          if (format != "numpy") throw nb::value_error("contains: format is for host keys; device keys answer with a device array");
          return device_contains(self, keys, out, stream);
        }
        no_stream_for_host(stream);
        return host_contains(self, read_host_keys(keys), out, parse_answer_format(format));
      }, "keys"_a.none(), nb::kw_only(), "out"_a = nb::none(), "format"_a = "numpy", "stream"_a = nb::none(), contains_doc.c_str());
  cls.def("count", [](py_filter& self, nb::handle keys, nb::handle stream) {
        if (device_keys(keys)) return device_count(self, keys, stream);
        no_stream_for_host(stream);
        return host_count(self, read_host_keys(keys));
      }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(), count_doc.c_str());
  cls.def("select", [](py_filter& self, nb::handle keys, nb::handle stream) {
        if (device_keys(keys)) return device_select(self, keys, stream);
        no_stream_for_host(stream);
        return host_select(self, read_host_keys(keys));
      }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(), select_doc.c_str());
  cls.def("__contains__", [](py_filter& self, nb::handle key) {
        if (device_keys(key)) throw nb::type_error("`key in filter` takes one host key; use contains() for device arrays");
        const host_keys keys = read_host_keys(key);
        if (!keys.scalar || keys.count != 1)
          throw nb::type_error("`key in filter` takes one key (an int, str, bytes or NumPy scalar); use contains() for a batch");
        return nb::cast<bool>(host_contains(self, keys, nb::none(), answer_format::numpy));
      }, "key"_a.none(), docs::contains_one);

  cls.def("merge", [](py_filter& self, py_filter& other) {
        with_both_locked(self, other, [&] { self.f.merge(other.f); });
      }, "other"_a, docs::merge);
  cls.def("_merge_block_bits", [](py_filter& self, nb::handle blocks, nb::handle words, std::uint64_t keys_added) {
        // gbf.BlockBits' arrays (uint32, C-contiguous, as BlockBits keeps them), checked
        // by block_bits::from_blocks before the filter changes.
        const auto to_vector = [](nb::handle array_object, const char* name) {
          auto* array = reinterpret_cast<PyArrayObject*>(array_object.ptr());
          if (!PyArray_Check(array_object.ptr()) || PyArray_TYPE(array) != NPY_UINT32 || !PyArray_IS_C_CONTIGUOUS(array))
            throw nb::type_error((std::string("BlockBits.") + name + " must be a C-contiguous NumPy uint32 array").c_str());
          const auto* data = static_cast<const std::uint32_t*>(PyArray_DATA(array));
          return std::vector<std::uint32_t>(data, data + PyArray_SIZE(array));
        };
        std::vector<std::uint32_t> block_list = to_vector(blocks, "blocks");
        std::vector<std::uint32_t> word_list = to_vector(words, "words");
        nb::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(self.mutex);
        self.f.merge(block_bits::from_blocks(self.f.layout(), std::move(block_list), std::move(word_list), keys_added));
      });
  cls.def("intersect", [](py_filter& self, py_filter& other) {
        with_both_locked(self, other, [&] { self.f.intersect(other.f); });
      }, "other"_a, docs::intersect);
  cls.def("symmetric_difference", [](py_filter& self, py_filter& other) {
        with_both_locked(self, other, [&] { self.f.symmetric_difference(other.f); });
      }, "other"_a, docs::symmetric_difference);
  cls.def("clear", [](py_filter& self) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    self.f.clear();
  }, docs::clear);
  cls.def("synchronize", [](py_filter& self) { device_synchronize(self); }, docs::synchronize);

  cls.def("_stats", [](py_filter& self) {
    filter_stats s;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(self.mutex);
      s = self.f.stats();
    }
    return nb::make_tuple(s.bits_set, s.num_bits, s.fill_ratio, s.estimated_keys,
                          s.estimated_fpr, s.keys_added, s.capacity, s.over_capacity);
  });
  cls.def("words", [](py_filter& self) {
    // Copied straight into the array: one copy of the bits, not two.
    const std::uint64_t n = self.f.layout().num_words();
    nb::object out = new_numpy_array(n, NPY_UINT32);
    auto* data = static_cast<std::uint32_t*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(out.ptr())));
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(self.mutex);
      self.f.copy_words(0, n, data);
    }
    return out;
  }, docs::words);
  cls.def("_serialize", [](py_filter& self) {
    return serialized_bytes(
        self, [&] { return serialized_size(self.f); },
        [&](std::uint8_t* out, std::size_t size) { serialize_into(self.f, out, size, self.fpp); });
  });
  cls.def("_to_parquet_sbbf", [](py_filter& self, bool header) {
    std::vector<std::uint8_t> bytes;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(self.mutex);
      bytes = to_parquet_sbbf(self.f, header);
    }
    return to_bytes(bytes);
  });
  cls.def("_save", [](py_filter& self, nb::handle path_object) {
    const std::string path = os_path(path_object);
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    save(self.f, path, self.fpp);
  });
  cls.def("_save_parquet_sbbf", [](py_filter& self, nb::handle path_object, bool header) {
    const std::string path = os_path(path_object);
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex);
    save_parquet_sbbf(self.f, path, header);
  });
  cls.def("_copy", [](py_filter& self, const std::string& where, unsigned threads) {
    const backend target = parse_backend(where);
    std::optional<filter> copy;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(self.mutex);
      copy.emplace(self.f.copy_to(target, make_options(target, threads)));
    }
    return made(std::move(*copy), self.fpp, where, threads);
  });

  cls.def_prop_ro("backend", [](py_filter& self) { return std::string(to_string(self.f.where())); },
                  docs::backend);
  cls.def_prop_ro("requested_backend", [](py_filter& self) { return std::string(to_string(self.requested)); },
                  docs::requested_backend);
  cls.def_prop_ro("backend_description", [](py_filter& self) { return self.f.description(); },
                  docs::backend_description);
  cls.def_prop_ro("threads", [](py_filter& self) { return self.threads; });
  cls.def_prop_ro("_layout", [](py_filter& self) { return layout_tuple(self.f.layout()); });
  cls.def_prop_ro("_capacity", [](py_filter& self) { return self.f.capacity(); });
  cls.def_prop_ro("_fpp", [](py_filter& self) { return self.fpp; });
  cls.def_prop_ro("size_bytes", [](py_filter& self) { return self.f.layout().size_bytes(); });
  cls.def_prop_ro("num_bits", [](py_filter& self) { return self.f.layout().num_bits(); });
  cls.def_prop_rw(
      "chunk_keys", [](py_filter& self) { return self.chunk_keys; },
      [](py_filter& self, std::size_t keys) { self.chunk_keys = checked_chunk_keys(keys); },
      docs::chunk_keys);

  bind_timing(m);
  bind_parquet(m);
  bind_kinds(m);
}

}  // namespace gbf::python

NB_MODULE(_core, m) { gbf::python::init_module(m); }
