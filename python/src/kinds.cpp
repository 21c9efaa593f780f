// The other filter kinds: gbf::counting_filter, gbf::scaling_filter and gbf::cuckoo_filter
// as gbf._core.CountingFilterBase / ScalingFilterBase / CuckooFilterBase (gbf.CountingFilter,
// gbf.ScalingFilter and gbf.CuckooFilter derive from them in gbf/_kinds.py).
//
// Keys are read as gbf.Filter reads them: host keys by keys.cpp (NumPy, buffers, Arrow
// arrays and streams, Python scalars and lists), run in chunks as host_ops.cpp runs them
// (GIL released, the filter's lock held, Ctrl-C between chunks); device keys (CuPy,
// PyTorch, DLPack, gbf.DeviceStrings) on a GPU filter by device.cpp (device_batch.hpp),
// run as one synchronous library call on the batch's stream, per-key answers in a new
// device array of the keys' kind. These kinds have no _async calls in Python: a call
// returns when its work is done, so nothing is kept alive after it.
//
// Nulls: the library's integer calls take no validity bitmap, so an integer chunk with
// nulls (an Arrow array) is compacted first and per-key answers are scattered back; a null
// key is never added, removed nor found, as in the library's string calls.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "binding.hpp"
#include "device_batch.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/scaling_filter.hpp"
#include "host_chunks.hpp"

namespace gbf::python {
namespace {

using namespace nb::literals;

/// A filter of kind F as Python holds it (as py_filter for gbf::filter).
template <class F>
struct py_kind {
  F f;
  std::mutex mutex;  ///< One batch at a time (a filter is not thread-safe).
  double fpp = 0;    ///< Target fpp recorded in files (0 = unknown).
  backend requested = backend::automatic;
  unsigned threads = 0;
  std::size_t chunk_keys = default_cpu_chunk_keys;

  py_kind(F&& filter, double target_fpp, backend asked, unsigned cpu_threads)
      : f(std::move(filter)), fpp(target_fpp), requested(asked), threads(cpu_threads) {
    chunk_keys = f.where() == backend::gpu ? default_gpu_chunk_keys : default_cpu_chunk_keys;
  }
};

/// A filter made by a factory, before it becomes a Python object (as new_filter).
template <class F>
struct new_kind {
  std::optional<F> f;
  double fpp = 0;
  backend requested = backend::automatic;
  unsigned threads = 0;
};

template <class F>
new_kind<F> made(F&& f, double fpp, const std::string& where, unsigned threads) {
  new_kind<F> n;
  n.f.emplace(std::move(f));
  n.fpp = fpp;
  n.requested = parse_backend(where);
  n.threads = threads;
  return n;
}

template <class T>
struct is_int_keys : std::false_type {};
template <class T>
struct is_int_keys<int_keys<T>> : std::true_type {};

// Runs op on one chunk: op(out, key args...) with (data, n) for integers or (string_keys)
// for strings; returns what op returns (a uint64). Integer chunks with nulls are compacted
// and the per-key answers in `out` (may be null) scattered back, `null_value` for nulls.
template <class Out, class Op>
std::uint64_t apply(const key_piece& part, Out* out, Out null_value, gather_buffer& gathered, Op&& op) {
  return visit(part, [&](const auto& k) -> std::uint64_t {
    using K = std::decay_t<decltype(k)>;
    if constexpr (is_int_keys<K>::value) {
      if (k.validity == nullptr) return op(out, k.data, k.count);
      const auto kept = non_null(k, gathered);
      std::unique_ptr<Out[]> kept_out(out != nullptr ? new Out[kept.size() + 1] : nullptr);
      const std::uint64_t result = op(kept_out.get(), kept.data(), kept.size());
      if (out != nullptr)
        for (std::size_t i = 0, j = 0; i < k.count; ++i)
          out[i] = valid_at(k.validity, i) ? kept_out[j++] : null_value;
      return result;
    } else {
      return op(out, k);
    }
  });
}

// Every chunk of `keys` through op (see apply), with per-key answers into `out` (n items,
// may be null); returns the sum of op's results.
template <class Self, class Out, class Op>
std::uint64_t over_chunks(Self& self, const host_keys& keys, Out* out, Out null_value, Op&& op) {
  std::uint64_t total = 0;
  gather_buffer gathered;
  run_chunks(self, keys, [&](const key_piece& part, std::size_t first_row) {
    total += apply(part, out != nullptr ? out + first_row : nullptr, null_value, gathered, op);
  });
  return total;
}

// over_chunks for an add that refuses a whole chunk with filter_full (a non-scaling
// chain past its capacity): the chunks before it stay inserted, so the error is
// restated for the batch: not_inserted counts every row from the refused chunk on
// (the chunk's keys and all later rows), and the message says where the batch stopped.
template <class Self, class Out, class Op>
std::uint64_t over_chunks_until_full(Self& self, const host_keys& keys, Out* out, Out null_value, Op&& op) {
  std::uint64_t total = 0;
  std::size_t chunk_begin = 0, chunk_end = 0;
  gather_buffer gathered;
  try {
    run_chunks(self, keys, [&](const key_piece& part, std::size_t first_row) {
      chunk_begin = first_row;
      chunk_end = first_row + part.count;
      total += apply(part, out != nullptr ? out + first_row : nullptr, null_value, gathered, op);
    });
  } catch (const filter_full& e) {
    if (chunk_begin == 0 && chunk_end == keys.count) throw;  // one chunk: the batch itself
    const std::uint64_t later_rows = keys.count - chunk_end;
    throw filter_full(std::string(e.what()) + " (of the chunk of rows " + std::to_string(chunk_begin) + " to " +
                          std::to_string(chunk_end - 1) + "; the " + std::to_string(total) +
                          " new keys of the rows before it, added chunk_keys at a time, stay inserted, and the " +
                          std::to_string(later_rows) + " rows after it were not tried)",
                      e.not_inserted() + later_rows, e.fits());
  }
  return total;
}

template <class T>
T* array_data(const nb::object& array) {
  return static_cast<T*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(array.ptr())));
}

// A per-key answer array: its first item as a Python scalar for one key, else the array.
nb::object per_key(const host_keys& keys, const nb::object& array) {
  if (!keys.scalar) return array;
  nb::object first = nb::steal(PySequence_GetItem(array.ptr(), 0));
  if (!first.is_valid()) throw nb::python_error();
  return first.attr("item")();  // a Python bool / int, as gbf.Filter answers one key
}


// Per-key answers: bool (found, removed, is_new) or one byte (counts, cuckoo_status).
template <class Out>
constexpr int numpy_type_of = std::is_same_v<Out, bool> ? NPY_BOOL : NPY_UINT8;
template <class Out>
using device_item_of = std::conditional_t<std::is_same_v<Out, bool>, bool, std::uint8_t>;

/// How run_batch runs a call: `what` names it in errors; `per_key` asks for an array of
/// one Out per key (`null_value` for a null host key); `until_full` restates a
/// filter_full for the whole host batch (over_chunks_until_full).
template <class Out>
struct batch_call {
  const char* what;
  bool per_key = false;
  Out null_value{};
  bool until_full = false;
};

/// The sum of a call's per-chunk results (keys inserted, removed, found ...) and its
/// per-key answers (None unless asked for).
struct batch_answer {
  std::uint64_t total = 0;
  nb::object per_key = nb::none();
};

// Runs op over a batch wherever its keys are: op(Out* out, stream_t s, key args...) makes
// the library call and returns its count. Host keys run chunk by chunk on the default
// stream, out the chunk's slice of a NumPy array (one key: answered as a Python scalar).
// Device keys, on a GPU filter only, run as one synchronous call on the batch's stream,
// out a new device array returned as the keys' kind of array.
template <class Out, class Self, class Op>
batch_answer run_batch(Self& self, nb::handle keys_obj, nb::handle stream, const batch_call<Out>& call,
                       Op&& op) {
  static_assert(sizeof(Out) == 1, "per-key answers are bool or one byte");
  batch_answer answer;
  if (device_keys(keys_obj)) {
    require_gpu_filter(self.f.where());
    const device_batch keys = read_device_batch(keys_obj, stream);
    device_result out;
    if (call.per_key)
      out = result_for(keys, nb::none(), std::is_same_v<Out, bool> ? result_item::boolean : result_item::uint8,
                       call.what);
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(self.mutex);
      answer.total = with_keys(keys, [&](const auto&... key) -> std::uint64_t {
        return op(static_cast<Out*>(out.data), keys.stream, key...);
      });
    }
    if (call.per_key) answer.per_key = wrap_result<device_item_of<Out>>(keys, out, keys.count);
    return answer;
  }
  no_stream_for_host(stream);
  const host_keys keys = read_host_keys(keys_obj);
  nb::object array = call.per_key ? new_numpy_array(keys.count, numpy_type_of<Out>) : nb::none();
  Out* const out = call.per_key ? array_data<Out>(array) : nullptr;
  auto on_host = [&](Out* o, const auto&... key) -> std::uint64_t { return op(o, stream_t{}, key...); };
  answer.total = call.until_full ? over_chunks_until_full(self, keys, out, call.null_value, on_host)
                                 : over_chunks(self, keys, out, call.null_value, on_host);
  if (call.per_key) answer.per_key = per_key(keys, array);
  return answer;
}

struct byte_view {
  Py_buffer view{};
  explicit byte_view(nb::handle obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) throw nb::python_error();
  }
  ~byte_view() { PyBuffer_Release(&view); }
  const std::uint8_t* data() const { return static_cast<const std::uint8_t*>(view.buf); }
  std::size_t size() const { return static_cast<std::size_t>(view.len); }
};

/// A uint32 array of `n` words that copy(first, count, out) fills with the GIL
/// released and the filter locked: the array is the only copy made (a filter's
/// copy_words, not words() copied again).
template <class Self, class Copy>
nb::object words_array(Self& self, std::uint64_t n, Copy&& copy) {
  nb::object out = new_numpy_array(n, NPY_UINT32);
  std::uint32_t* const data = array_data<std::uint32_t>(out);
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  copy(std::uint64_t{0}, n, data);
  return out;
}

// What every kind binds the same way: construction from its _New holder, contains,
// count, `key in f`, clear, the backend properties and chunk_keys.
template <class F>
nb::class_<py_kind<F>> bind_common(nb::module_& m, const char* name, const char* holder,
                                   const char* doc) {
  using self_t = py_kind<F>;
  nb::class_<new_kind<F>>(m, holder, "A filter on its way to becoming a Python object (internal).");
  nb::class_<self_t> cls(m, name, doc);
  cls.def("__init__", [](self_t* self, new_kind<F>& source) {
    if (!source.f) throw nb::value_error("this holder was already used");
    new (self) self_t(std::move(*source.f), source.fpp, source.requested, source.threads);
    source.f.reset();
  });
  cls.def("contains", [](self_t& self, nb::handle keys, nb::handle stream) {
    const F& f = self.f;
    return run_batch(self, keys, stream, batch_call<bool>{"contains", true},
                     [&](bool* o, stream_t s, const auto&... key) {
                       f.contains(key..., o, s);
                       return std::uint64_t{0};
                     })
        .per_key;
  }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(),
     "found[i] = key i may be present (NumPy bool array, a bool for one key; a device array for device keys).");
  cls.def("__contains__", [](self_t& self, nb::handle key) {
    if (device_keys(key)) throw nb::type_error("`key in filter` takes one host key; use contains() for device arrays");
    const host_keys keys = read_host_keys(key);
    if (!keys.scalar || keys.count != 1)
      throw nb::type_error("`key in filter` takes one key (an int, str, bytes or NumPy scalar); use contains() for a batch");
    bool found = false;
    const F& f = self.f;
    over_chunks(self, keys, &found, false, [&](bool* o, const auto&... k) {
      f.contains(k..., o);
      return std::uint64_t{0};
    });
    return found;
  }, "key"_a.none());
  cls.def("count", [](self_t& self, nb::handle keys, nb::handle stream) {
    const F& f = self.f;
    return run_batch(self, keys, stream, batch_call<bool>{"count"},
                     [&](bool*, stream_t s, const auto&... key) { return f.count(key..., s); })
        .total;
  }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(), "How many of the keys may be present (nulls never are).");
  // select for device keys: the library's select on the GPU (row numbers as a device
  // int64 array of the keys' kind); None for host keys, which Python selects from contains.
  cls.def("_device_select", [](self_t& self, nb::handle keys, nb::handle stream) -> nb::object {
    if (!device_keys(keys)) {
      no_stream_for_host(stream);
      return nb::none();
    }
    return select_rows(self, keys, stream);
  }, "keys"_a.none(), "stream"_a.none());
  cls.def_prop_ro("backend", [](self_t& self) { return std::string(to_string(self.f.where())); });
  cls.def_prop_ro("requested_backend", [](self_t& self) { return std::string(to_string(self.requested)); });
  cls.def_prop_ro("backend_description", [](self_t& self) { return self.f.description(); });
  cls.def_prop_ro("threads", [](self_t& self) { return self.threads; });
  cls.def_prop_ro("_fpp", [](self_t& self) { return self.fpp; });
  cls.def_prop_rw(
      "chunk_keys", [](self_t& self) { return self.chunk_keys; },
      [](self_t& self, std::size_t keys) { self.chunk_keys = checked_chunk_keys(keys); });
  // copy(): the library's copy_to, a slice at a time (through the file bytes it held
  // three copies of the filter at once).
  cls.def("_copy", [](self_t& self, const std::string& where, unsigned threads) {
    const options opts = make_options(parse_backend(where), threads);
    std::optional<F> copy;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(self.mutex);
      copy.emplace(self.f.copy_to(opts.where, opts));
    }
    return made(std::move(*copy), self.fpp, where, threads);
  });
  return cls;
}

// approximate_count, which counting and cuckoo filters answer alike: one byte per key.
template <class F>
void bind_approximate_count(nb::class_<py_kind<F>>& cls, const char* doc) {
  cls.def("approximate_count", [](py_kind<F>& self, nb::handle keys, nb::handle stream) {
    const F& f = self.f;
    return run_batch(self, keys, stream, batch_call<std::uint8_t>{"approximate_count", true},
                     [&](std::uint8_t* o, stream_t s, const auto&... key) {
                       f.approximate_count(key..., o, s);
                       return std::uint64_t{0};
                     })
        .per_key;
  }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(), doc);
}

template <class F, class Fn>
auto locked(py_kind<F>& self, Fn&& fn) {
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  return fn();
}

nb::tuple layout_tuple(const layout& l) {
  return nb::make_tuple(l.words_per_block, l.bits_per_key, l.seed, l.num_blocks);
}

shape make_shape(std::uint32_t w, std::uint32_t k, std::uint64_t seed) {
  shape s;
  s.words_per_block = w;
  s.bits_per_key = k;
  s.seed = seed;
  return s;
}

// --- Counting ----------------------------------------------------------------------

void bind_counting(nb::module_& m) {
  using self_t = py_kind<counting_filter>;
  auto cls = bind_common<counting_filter>(m, "CountingFilterBase", "_NewCounting",
                                          "The C++ counting filter under gbf.CountingFilter.");
  m.def("_counting_create", [](std::uint64_t capacity, double fpp, const std::string& where,
                               std::uint32_t w, std::uint32_t k, std::uint64_t seed,
                               std::uint32_t counter_bits, unsigned threads) {
    return made(counting_filter::create(capacity, fpp, make_options(parse_backend(where), threads),
                                        make_shape(w, k, seed), counter_bits),
                fpp, where, threads);
  });
  m.def("_counting_deserialize", [](nb::handle data, const std::string& where, unsigned threads) {
    byte_view bytes(data);
    counting_file_metadata meta;
    const options opts = make_options(parse_backend(where), threads);
    std::optional<counting_filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(deserialize_counting(bytes.data(), bytes.size(), opts, &meta));
    }
    return made(std::move(*f), meta.fpp, where, threads);
  });
  m.def("_counting_load", [](nb::handle path_object, const std::string& where, unsigned threads) {
    const std::string path = os_path(path_object);
    counting_file_metadata meta;
    const options opts = make_options(parse_backend(where), threads);
    std::optional<counting_filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(load_counting(path, opts, &meta));
    }
    return made(std::move(*f), meta.fpp, where, threads);
  });

  cls.def("add", [](self_t& self, nb::handle keys, nb::handle stream) {
    counting_filter& f = self.f;
    run_batch(self, keys, stream, batch_call<bool>{"add"}, [&](bool*, stream_t s, const auto&... key) {
      f.add(key..., s);
      return std::uint64_t{0};
    });
  }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(),
     "Adds the keys: increments the counters of each key's bits (saturating at 2**counter_bits - 1).");
  // (removed, refused, per-key array or None); unchecked: (None, None, None).
  cls.def("_remove", [](self_t& self, nb::handle keys, bool unchecked, bool want_per_key, nb::handle stream) {
    counting_filter& f = self.f;
    if (unchecked) {
      if (want_per_key) throw nb::value_error("remove: per_key is for checked removes (unchecked=False)");
      run_batch(self, keys, stream, batch_call<bool>{"remove"}, [&](bool*, stream_t s, const auto&... key) {
        f.remove_unchecked(key..., s);
        return std::uint64_t{0};
      });
      return nb::make_tuple(nb::none(), nb::none(), nb::none());
    }
    std::uint64_t refused = 0;
    const batch_answer removed = run_batch(
        self, keys, stream, batch_call<bool>{"remove", want_per_key},
        [&](bool* o, stream_t s, const auto&... key) {
          const remove_report r = o != nullptr ? f.remove_with_status(key..., o, s) : f.remove(key..., s);
          refused += r.refused;
          return r.removed;
        });
    return nb::make_tuple(removed.total, refused, removed.per_key);
  }, "keys"_a.none(), "unchecked"_a, "per_key"_a, "stream"_a.none());
  bind_approximate_count(cls, "counts[i] = the smallest counter of key i (uint8): an upper bound on its adds "
                              "minus removes, until a counter saturates.");
  cls.def("merge", [](self_t& self, self_t& other) {
    with_both_locked(self, other, [&] { self.f.merge(other.f); });
  }, "other"_a, "self += other, counter by counter, saturating; gbf.LayoutMismatch when the layouts or counter widths differ.");
  cls.def("intersect", [](self_t& self, self_t& other) {
    with_both_locked(self, other, [&] { self.f.intersect(other.f); });
  }, "other"_a, "self = min(self, other), counter by counter: the keys counted in both stay; keys_added becomes "
                "the smaller count of keys held, keys_removed 0; gbf.LayoutMismatch as merge.");
  cls.def("clear", [](self_t& self) { locked(self, [&] { self.f.clear(); }); },
          "Sets every counter to zero and resets the key counts.");
  cls.def("_stats", [](self_t& self) {
    const counting_stats s = locked(self, [&] { return self.f.stats(); });
    return nb::make_tuple(s.counter_bits, s.num_counters, s.nonzero_counters, s.saturated_counters,
                          s.fill_ratio, s.estimated_keys, s.estimated_fpr, s.keys_added,
                          s.keys_removed, s.capacity, s.size_bytes, s.bytes_per_key,
                          s.over_capacity);
  });
  cls.def("counters", [](self_t& self) {
    const std::uint64_t n = num_counter_words(self.f.layout(), self.f.counter_bits());
    return words_array(self, n, [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
      self.f.copy_counters(first, count, out);
    });
  }, "The counter array as uint32 words (docs/counting.md gives the packing).");
  cls.def("_projection", [](self_t& self) {
    new_filter n;
    n.f.emplace(locked(self, [&] { return self.f.projection(); }));
    n.fpp = self.fpp;
    n.requested = self.requested;
    n.threads = self.threads;
    return n;
  });
  cls.def("_serialize", [](self_t& self) {
    return serialized_bytes(
        self, [&] { return serialized_size(self.f); },
        [&](std::uint8_t* out, std::size_t size) { serialize_into(self.f, out, size, self.fpp); });
  });
  cls.def("_save", [](self_t& self, nb::handle path_object) {
    const std::string path = os_path(path_object);
    locked(self, [&] { save(self.f, path, self.fpp); });
  });
  cls.def_prop_ro("_layout", [](self_t& self) { return layout_tuple(self.f.layout()); });
  cls.def_prop_ro("_capacity", [](self_t& self) { return self.f.capacity(); });
  cls.def_prop_ro("counter_bits", [](self_t& self) { return self.f.counter_bits(); });
}

// --- Scaling -----------------------------------------------------------------------

void bind_scaling(nb::module_& m) {
  using self_t = py_kind<scaling_filter>;
  auto cls = bind_common<scaling_filter>(m, "ScalingFilterBase", "_NewScaling",
                                         "The C++ scaling filter under gbf.ScalingFilter.");
  m.def("_scaling_create", [](std::uint64_t capacity, double fpp, const std::string& where,
                              std::uint32_t w, std::uint32_t k, std::uint64_t seed,
                              std::uint32_t expansion, double tightening, bool non_scaling,
                              unsigned threads) {
    scaling_policy policy;
    policy.expansion = expansion;
    policy.tightening = tightening;
    policy.non_scaling = non_scaling;
    return made(scaling_filter::create(capacity, fpp, policy,
                                       make_options(parse_backend(where), threads),
                                       make_shape(w, k, seed)),
                fpp, where, threads);
  });
  m.def("_scaling_deserialize", [](nb::handle data, const std::string& where, unsigned threads) {
    byte_view bytes(data);
    const options opts = make_options(parse_backend(where), threads);
    std::optional<scaling_filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(deserialize_scaling_filter(bytes.data(), bytes.size(), opts));
    }
    const double fpp = f->config().fpp;
    return made(std::move(*f), fpp, where, threads);
  });
  m.def("_scaling_load", [](nb::handle path_object, const std::string& where, unsigned threads) {
    const std::string path = os_path(path_object);
    const options opts = make_options(parse_backend(where), threads);
    std::optional<scaling_filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(load_scaling_filter(path, opts));
    }
    const double fpp = f->config().fpp;
    return made(std::move(*f), fpp, where, threads);
  });

  // Host batches run chunk by chunk, and a filter_full is restated for the whole batch.
  constexpr bool until_full = true;
  cls.def("add", [](self_t& self, nb::handle keys, nb::handle stream) {
    scaling_filter& f = self.f;
    return run_batch(self, keys, stream, batch_call<bool>{"add", false, false, until_full},
                     [&](bool*, stream_t s, const auto&... key) { return f.add(key..., s); })
        .total;
  }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(),
     "Inserts the keys new to the chain, in batch order (opening levels as needed); returns how many. "
     "Non-scaling: gbf.FilterFull when they would pass its capacity (the chunk of chunk_keys rows that "
     "would inserts nothing; earlier chunks stay inserted; not_inserted counts the rows from that chunk on; "
     "device keys are one chunk). Scaling: gbf.FilterFull when a level cannot open (64 levels, 4096 bits "
     "per key); the keys inserted before stay, not_inserted counts the batch's keys not in the chain (and "
     "rows of later chunks).");
  cls.def("add_new", [](self_t& self, nb::handle keys, nb::handle stream) {
    scaling_filter& f = self.f;
    return run_batch(self, keys, stream, batch_call<bool>{"add_new", true, false, until_full},
                     [&](bool* o, stream_t s, const auto&... key) { return f.add_new(key..., o, s); })
        .per_key;
  }, "keys"_a.none(), nb::kw_only(), "stream"_a = nb::none(),
     "add, answering per key: is_new[i] = key i was inserted (absent before it; False for nulls and repeats).");
  cls.def("merge", [](self_t& self, self_t& other) {
    with_both_locked(self, other, [&] { self.f.merge(other.f); });
  }, "other"_a, "self |= other, level by level; gbf.LayoutMismatch when the configs differ, gbf.FilterFull "
                "(nothing changed) when a merged level could pass its capacity.");
  // (capacity, size_bytes, num_levels, keys_inserted, expansion, fpp, compound_fpr,
  //  [(W, K, seed, blocks, capacity, fpp, keys, bits_set, fill_ratio, fpr), ...])
  cls.def("_stats", [](self_t& self) {
    const scaling_stats s = locked(self, [&] { return self.f.stats(); });
    nb::list levels;
    for (const scaling_level_stats& l : s.levels)
      levels.append(nb::make_tuple(l.level.l.words_per_block, l.level.l.bits_per_key,
                                   l.level.l.seed, l.level.l.num_blocks, l.level.capacity,
                                   l.level.fpp, l.level.keys, l.bits_set, l.fill_ratio, l.fpr));
    return nb::make_tuple(s.capacity, s.size_bytes, s.num_levels, s.keys_inserted, s.expansion,
                          s.fpp, s.compound_fpr, levels);
  });
  cls.def("level_words", [](self_t& self, std::size_t level) {
    // A level's size never changes once it exists (the rule fixes it); a level
    // that a concurrent clear() drops makes copy_level_words throw.
    const std::uint64_t n = locked(self, [&]() -> std::uint64_t {
      if (level >= self.f.levels().size()) (void)self.f.level_words(level);  // throws, naming the level
      return self.f.levels()[level].l.num_words();
    });
    return words_array(self, n, [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
      self.f.copy_level_words(level, first, count, out);
    });
  }, "level"_a, "Level `level`'s bit array (oldest first) as uint32 words; InvalidArgument past the newest.");
  cls.def("_serialize", [](self_t& self) {
    return serialized_bytes(
        self, [&] { return serialized_size(self.f); },
        [&](std::uint8_t* out, std::size_t size) { serialize_into(self.f, out, size); });
  });
  cls.def("_save", [](self_t& self, nb::handle path_object) {
    const std::string path = os_path(path_object);
    locked(self, [&] { save(self.f, path); });
  });
  // The levels' bytes without the popcount stats() makes (Dask sizes every task result).
  cls.def_prop_ro("_size_bytes", [](self_t& self) {
    return locked(self, [&] {
      std::uint64_t bytes = 0;
      for (const scaling_level& level : self.f.levels()) bytes += level.l.size_bytes();
      return bytes;
    });
  });
  cls.def_prop_ro("_config", [](self_t& self) {
    const scaling_config& c = self.f.config();
    return nb::make_tuple(c.initial_capacity, c.fpp, c.policy.expansion, c.policy.tightening,
                          c.policy.non_scaling, c.s.words_per_block, c.s.bits_per_key, c.s.seed);
  });
}

// --- Cuckoo ------------------------------------------------------------------------

void bind_cuckoo(nb::module_& m) {
  using self_t = py_kind<cuckoo_filter>;
  auto cls = bind_common<cuckoo_filter>(m, "CuckooFilterBase", "_NewCuckoo",
                                        "The C++ cuckoo filter under gbf.CuckooFilter.");
  m.attr("cuckoo_default_max_kicks") = cuckoo_default_max_kicks;
  m.def("_cuckoo_create", [](std::uint64_t capacity, double fpp, const std::string& where,
                             std::uint32_t tag_bits, std::uint32_t max_kicks, std::uint64_t seed,
                             unsigned threads) {
    cuckoo_shape s;
    s.tag_bits = tag_bits;
    s.max_kicks = max_kicks;
    s.seed = seed;
    return made(cuckoo_filter::create(capacity, fpp, make_options(parse_backend(where), threads), s),
                fpp, where, threads);
  });
  m.def("_cuckoo_deserialize", [](nb::handle data, const std::string& where, unsigned threads) {
    byte_view bytes(data);
    cuckoo_file_metadata meta;
    const options opts = make_options(parse_backend(where), threads);
    std::optional<cuckoo_filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(deserialize_cuckoo(bytes.data(), bytes.size(), opts, &meta));
    }
    return made(std::move(*f), meta.fpp, where, threads);
  });
  m.def("_cuckoo_load", [](nb::handle path_object, const std::string& where, unsigned threads) {
    const std::string path = os_path(path_object);
    cuckoo_file_metadata meta;
    const options opts = make_options(parse_backend(where), threads);
    std::optional<cuckoo_filter> f;
    {
      nb::gil_scoped_release release;
      f.emplace(load_cuckoo(path, opts, &meta));
    }
    return made(std::move(*f), meta.fpp, where, threads);
  });

  // unique=False: CF.ADD over every chunk, then filter_full naming the keys of the whole
  // batch that found no room (the others are inserted, as the library's add). unique=True:
  // CF.ADDNX, the per-key status array (cuckoo_status values), never filter_full.
  cls.def("_add", [](self_t& self, nb::handle keys, bool unique, bool deterministic, nb::handle stream) {
    cuckoo_add_options how;
    how.unique = unique;
    how.placement = deterministic ? cuckoo_placement::deterministic : cuckoo_placement::fastest;
    cuckoo_filter& f = self.f;
    std::uint64_t inserted = 0;
    const batch_answer added = run_batch(
        self, keys, stream, batch_call<cuckoo_status>{"add", unique, cuckoo_status::skipped},
        [&](cuckoo_status* o, stream_t s, const auto&... key) {
          const cuckoo_add_report r = f.add(key..., o, how, s);
          inserted += r.inserted;
          return r.failed;
        });
    if (unique) return added.per_key;
    if (added.total != 0)
      throw filter_full("add: the cuckoo filter is full: " + std::to_string(added.total) + " of " +
                            std::to_string(inserted + added.total) +
                            " keys were not inserted (no free slot within " +
                            std::to_string(f.max_kicks()) +
                            " moves); the other keys were inserted and every key inserted "
                            "before is still present; a larger filter holds them",
                        added.total, 0);
    return nb::object(nb::none());
  }, "keys"_a.none(), "unique"_a, "deterministic"_a, "stream"_a.none());
  // (removed, per-key array or None)
  cls.def("_remove", [](self_t& self, nb::handle keys, bool want_per_key, nb::handle stream) {
    cuckoo_filter& f = self.f;
    const batch_answer removed =
        run_batch(self, keys, stream, batch_call<bool>{"remove", want_per_key},
                  [&](bool* o, stream_t s, const auto&... key) { return f.remove(key..., o, s); });
    return nb::make_tuple(removed.total, removed.per_key);
  }, "keys"_a.none(), "per_key"_a, "stream"_a.none());
  bind_approximate_count(cls, "CF.COUNT: copies[i] (uint8) = copies of key i's tag in its two buckets, an upper "
                              "bound on its adds minus removes.");
  cls.def("clear", [](self_t& self) { locked(self, [&] { self.f.clear(); }); },
          "Empties the table (keeps layout, capacity and max_kicks; zeroes the totals).");
  cls.def("merge", [](self_t& self, self_t& other) {
    with_both_locked(self, other, [&] { self.f.merge(other.f); });
  }, "other"_a, "self += other: other's tags inserted into this table (a multiset union; key counts add up); "
                "gbf.LayoutMismatch when the layouts differ, gbf.FilterFull (nothing changed) when some tag "
                "finds no slot.");
  cls.def("_stats", [](self_t& self) {
    const cuckoo_stats s = locked(self, [&] { return self.f.stats(); });
    return nb::make_tuple(s.occupied_slots, s.num_slots, s.load_factor, s.max_load,
                          s.estimated_fpr, s.capacity, s.keys_added, s.keys_removed, s.evictions,
                          s.failed_inserts, s.over_capacity);
  });
  cls.def("words", [](self_t& self) {
    return words_array(self, self.f.layout().num_words(),
                       [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
                         self.f.copy_words(first, count, out);
                       });
  }, "The table as uint32 words (8 per bucket; docs/cuckoo.md).");
  cls.def("_serialize", [](self_t& self) {
    return serialized_bytes(
        self, [&] { return serialized_size(self.f); },
        [&](std::uint8_t* out, std::size_t size) { serialize_into(self.f, out, size, self.fpp); });
  });
  cls.def("_save", [](self_t& self, nb::handle path_object) {
    const std::string path = os_path(path_object);
    locked(self, [&] { save(self.f, path, self.fpp); });
  });
  cls.def_prop_ro("_layout", [](self_t& self) {
    const cuckoo_layout& l = self.f.layout();
    return nb::make_tuple(l.tag_bits, l.num_buckets, l.seed);
  });
  cls.def_prop_ro("_capacity", [](self_t& self) { return self.f.capacity(); });
  cls.def_prop_ro("max_kicks", [](self_t& self) { return self.f.max_kicks(); });
}

}  // namespace

void bind_kinds(nb::module_& m) {
  bind_counting(m);
  bind_scaling(m);
  bind_cuckoo(m);
}

}  // namespace gbf::python
