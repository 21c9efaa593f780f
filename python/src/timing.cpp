// The library's own speed on the same keys, timed from C++ with no Python in the
// loop: `python -m gbf bench` and docs/python.md put it beside the same call made
// from Python, so the difference is the binding's cost (argument parsing, reading the
// array, the result array, releasing the GIL).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <vector>

#include "binding.hpp"

namespace gbf::python {

using namespace nb::literals;

namespace {

// Runs `op` on the whole batch `calls` times and returns each call's seconds. One
// NumPy array (one piece) of integer keys; the result buffer is allocated once.
std::vector<double> time_op(py_filter& self, nb::handle keys_obj, const std::string& op,
                            std::size_t calls) {
  const host_keys keys = read_host_keys(keys_obj);
  if (keys.pieces.size() != 1 || keys.pieces[0].is_string())
    throw nb::value_error("_time_op times one array of integer keys");
  const key_piece& k = keys.pieces[0];
  if (op != "contains" && op != "add" && op != "count")
    throw nb::value_error("_time_op: op is 'contains', 'add' or 'count'");
  std::unique_ptr<bool[]> found(new bool[k.count + 1]);
  std::vector<double> seconds;
  seconds.reserve(calls);
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex);
  auto run = [&](const auto* data) {
    for (std::size_t i = 0; i < calls; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (op == "contains") self.f.contains(data, k.count, found.get());
      else if (op == "add") self.f.add(data, k.count);
      else (void)self.f.count(data, k.count);
      const auto stop = std::chrono::steady_clock::now();
      seconds.push_back(std::chrono::duration<double>(stop - start).count());
    }
  };
  if (k.kind == detail::key_kind::u32) run(static_cast<const std::uint32_t*>(k.data));
  else run(static_cast<const std::uint64_t*>(k.data));
  return seconds;
}

}  // namespace

void bind_timing(nb::module_& m) {
  m.def("_time_op", &time_op, "filter"_a, "keys"_a, "op"_a, "calls"_a,
        "Seconds of each of `calls` calls of op ('contains', 'add', 'count') on the whole "
        "batch, made from C++ without Python in the loop (for the benchmark).");
  m.def("_time_device_op", &device_time_op, "filter"_a, "keys"_a, "op"_a, "calls"_a,
        "_time_op for device keys (CuPy, PyTorch, ...): the library's synchronous call on the "
        "device pointers (GPU filters only).");
}

}  // namespace gbf::python
