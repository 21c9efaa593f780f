// gbf::filter: argument checks, backend choice and bookkeeping over a
// backend_impl. The bit work itself lives in the backends.
#include "gbf/filter.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "host/backend.hpp"
#include "host/hybrid_backend.hpp"

namespace gbf {
namespace {

using detail::key_batch;
using detail::key_kind;
using detail::memory_space;

std::size_t key_bytes(key_kind kind) { return kind == key_kind::u32 ? 4 : 8; }

const char* space_name(memory_space space) {
  return space == memory_space::device ? "device" : "host";
}

// Results must live where the keys live: the backends write them in place.
void check_results(const char* what, const key_batch& keys, const void* results) {
  if (keys.count == 0) return;
  if (results == nullptr) throw invalid_argument(std::string(what) + ": result array is null");
  const memory_space results_space = detail::locate(results);
  if (results_space != keys.space)
    throw invalid_argument(std::string(what) + ": keys are in " + space_name(keys.space) +
                           " memory but results are in " + space_name(results_space) +
                           " memory; both must be in the same memory space");
}

// The non-null keys among the first `count` of a host bitmap (all when there is none).
std::uint64_t valid_keys(const std::uint8_t* validity, std::size_t count) {
  if (validity == nullptr) return count;
  std::uint64_t valid = 0;
  for (std::size_t byte = 0; byte < count / 8; ++byte)
    valid += static_cast<std::uint64_t>(__builtin_popcount(validity[byte]));
  for (std::size_t i = count / 8 * 8; i < count; ++i) valid += detail::key_valid(validity, 0, i);
  return valid;
}

// Checks the offsets of a host string batch (the rule of bad_offset_message).
void check_host_offsets(const char* what, const key_batch& keys) {
  std::int64_t previous = 0;
  for (std::size_t i = 0; i <= keys.count; ++i) {
    const std::int64_t value = detail::offset_at(keys, i);
    const bool bad = (i == 0 && value < 0) || (i > 0 && value < previous) ||
                     (value > 0 && static_cast<std::uint64_t>(value) > keys.data_bytes);
    if (bad)
      throw invalid_argument(std::string(what) + ": " +
                             detail::bad_offset_message(i, value, previous, keys.data_bytes));
    previous = value;
  }
}

bool is_string(key_kind kind) { return kind == key_kind::str32 || kind == key_kind::str64; }

// Describes a caller's batch and checks what can be checked where it lives:
// pointers and memory spaces always, string offsets when they are in host memory
// (the GPU backend checks device offsets before it writes a bit). `what` names
// the operation in errors.
key_batch make_batch(const char* what, const detail::key_input& in) {
  key_batch batch;
  batch.kind = in.kind;
  batch.count = in.count;
  batch.data = in.data;
  batch.data_bytes = in.data_bytes;
  batch.offsets = in.offsets;
  batch.validity = in.validity;
  if (in.count == 0) return batch;
  const bool strings = is_string(in.kind);
  const std::string prefix = std::string(what) + (strings ? ": string keys: " : ": ");
  if (strings && in.offsets == nullptr)
    throw invalid_argument(prefix + "offsets is null but count = " + std::to_string(in.count));
  if (strings && in.data == nullptr && in.data_bytes > 0)
    throw invalid_argument(prefix + "data is null but data_bytes = " +
                           std::to_string(in.data_bytes));
  if (!strings && in.data == nullptr)
    throw invalid_argument(prefix + "keys is null but n = " + std::to_string(in.count));
  const char* anchor = strings ? "offsets" : "keys";
  batch.space = detail::locate(strings ? in.offsets : in.data);
  const auto same_space = [&](const void* p, const char* name) {
    if (p == nullptr) return;
    const memory_space space = detail::locate(p);
    if (space != batch.space)
      throw invalid_argument(prefix + anchor + " are in " + space_name(batch.space) +
                             " memory but " + name + " is in " + space_name(space) +
                             " memory; all must be in the same memory space");
  };
  if (strings) same_space(in.data, "data");
  same_space(in.validity, "validity");
  if (strings && batch.space == memory_space::host) check_host_offsets(what, batch);
  return batch;
}

// A host copy of a device batch (keys or offsets and bytes, the bitmap) and of its
// answers, for recomputing them on the CPU; a host batch is used in place.
struct host_view {
  key_batch batch;
  const bool* found = nullptr;
  std::vector<unsigned char> keys, data, validity, answers;

  host_view(const key_batch& b, const bool* device_or_host_found) : batch(b), found(device_or_host_found) {
    if (b.space == memory_space::host) return;
    const std::size_t n = b.count;
    if (is_string(b.kind)) {
      keys.resize((n + 1) * (b.kind == key_kind::str32 ? 4 : 8));  // the offsets
      detail::copy_device_to_host(keys.data(), b.offsets, keys.size());
      data.resize(b.data_bytes);
      if (!data.empty()) detail::copy_device_to_host(data.data(), b.data, data.size());
      batch.offsets = keys.data();
      batch.data = data.data();
    } else {
      keys.resize(n * key_bytes(b.kind));
      detail::copy_device_to_host(keys.data(), b.data, keys.size());
      batch.data = keys.data();
    }
    if (b.validity != nullptr) {
      validity.resize((n + 7) / 8);
      detail::copy_device_to_host(validity.data(), b.validity, validity.size());
      batch.validity = validity.data();
    }
    answers.resize(n);
    detail::copy_device_to_host(answers.data(), device_or_host_found, n);
    found = reinterpret_cast<const bool*>(answers.data());
    batch.space = memory_space::host;
    if (is_string(b.kind)) check_host_offsets("verify_contains", batch);
  }
};

// Keys an add counts in keys_added: the non-null ones where the bitmap can be
// read now (host memory, or device memory in a synchronous call), else all.
std::uint64_t keys_to_count(const key_batch& batch) {
  if (batch.validity == nullptr || batch.count == 0) return batch.count;
  if (batch.space == memory_space::host) return valid_keys(batch.validity, batch.count);
  std::vector<std::uint8_t> bits((batch.count + 7) / 8);
  detail::copy_device_to_host(bits.data(), batch.validity, bits.size());
  return valid_keys(bits.data(), batch.count);
}

void check_layout(const layout& l) {
  if (const char* problem = layout_problem(l))
    throw invalid_argument(std::string("invalid layout: ") + problem);
}

struct placed_backend {
  std::unique_ptr<detail::backend_impl> impl;
  std::string description;
};

placed_backend place(const layout& l, const options& opts) {
  check_layout(l);
  placed_backend placed;
  if (opts.where == backend::cpu) {
    placed.impl = detail::make_cpu_backend(l, opts.simd, opts.cpu_threads, &placed.description,
                                           opts.cpu_huge_pages);
    return placed;
  }
  if (opts.where == backend::gpu) {
    placed.impl = detail::make_gpu_backend(l, opts.gpu_chunk_keys, opts.gpu_streams,
                                           &placed.description);
    return placed;
  }
  const gpu_status gpu = query_gpu();
  if (!gpu.available) {
    placed.impl = detail::make_cpu_backend(l, opts.simd, opts.cpu_threads, &placed.description,
                                           opts.cpu_huge_pages);
    placed.description += "; auto: no GPU (" + gpu.description + ")";
    return placed;
  }
  const cost_model costs = opts.costs ? *opts.costs : cost_model::for_automatic_backend();
  // Checked here so that a bad simd / thread request fails at creation, not at
  // the first batch that wants the mirror.
  std::string mirror_description;
  layout one_block = l;
  one_block.num_blocks = 1;
  detail::make_cpu_backend(one_block, opts.simd, opts.cpu_threads, &mirror_description);
  auto make_mirror = [l, opts] {
    return detail::make_cpu_backend(l, opts.simd, opts.cpu_threads, nullptr, opts.cpu_huge_pages);
  };
  placed.impl = detail::make_hybrid_backend(
      detail::make_gpu_backend(l, opts.gpu_chunk_keys, opts.gpu_streams, &placed.description),
      make_mirror, costs, detail::default_mirror_limit_bytes());
  placed.description += " + " + mirror_description + " mirror for the host batches the cost model (" +
                        costs.source + ") gives the CPU; auto: GPU present";
  return placed;
}

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buf;
}

// "words_per_block 8 vs 16, num_blocks 100 vs 50": the fields where a and b differ.
std::string layout_differences(const layout& a, const layout& b) {
  std::string out;
  auto field = [&out](const char* name, std::uint64_t x, std::uint64_t y) {
    if (x == y) return;
    if (!out.empty()) out += ", ";
    out += std::string(name) + " " + std::to_string(x) + " vs " + std::to_string(y);
  };
  field("words_per_block", a.words_per_block, b.words_per_block);
  field("bits_per_key", a.bits_per_key, b.bits_per_key);
  field("seed", a.seed, b.seed);
  field("num_blocks", a.num_blocks, b.num_blocks);
  field("hash id", static_cast<std::uint64_t>(a.hash), static_cast<std::uint64_t>(b.hash));
  return out;
}

}  // namespace

namespace detail {
std::string bad_offset_message(std::size_t index, std::int64_t value, std::int64_t previous,
                               std::size_t data_bytes) {
  const std::string at = "offsets[" + std::to_string(index) + "] = " + std::to_string(value);
  if (index == 0 && value < 0) return "string keys: " + at + " is negative";
  if (index > 0 && value < previous)
    return "string keys: " + at + " < offsets[" + std::to_string(index - 1) +
           "] = " + std::to_string(previous) + " (offsets must not decrease)";
  return "string keys: " + at + " is past the end of the data (data_bytes = " +
         std::to_string(data_bytes) + ")";
}
}  // namespace detail

std::string to_string(const layout& l) {
  return std::to_string(l.words_per_block) + " words/block, " + std::to_string(l.bits_per_key) +
         " bits/key, seed " + std::to_string(l.seed) +
         (l.hash == hash_id::xxh64 ? ", xxh64, " : ", unknown hash, ") +
         std::to_string(l.num_blocks) + " blocks (" + format_bytes(l.size_bytes()) + ")";
}

const char* to_string(backend b) {
  switch (b) {
    case backend::cpu: return "cpu";
    case backend::gpu: return "gpu";
    case backend::automatic: return "auto";
  }
  return "unknown";
}

filter::filter(const layout& l, const options& opts, std::uint64_t capacity)
    : layout_(l), capacity_(capacity) {
  placed_backend placed = place(l, opts);
  impl_ = std::move(placed.impl);
  description_ = std::move(placed.description);
}

filter filter::create(std::uint64_t capacity, double fpp, const options& opts, const shape& s) {
  return filter(size_for(capacity, fpp, s), opts, capacity);
}

filter filter::from_words(const layout& l, const std::uint32_t* words, const options& opts,
                          std::uint64_t capacity, std::uint64_t keys_added) {
  if (words == nullptr) throw invalid_argument("from_words: words is null");
  filter f(l, opts, capacity);
  f.impl_->write_words(words);
  f.keys_added_ = keys_added;
  return f;
}

filter::filter(filter&&) noexcept = default;
filter& filter::operator=(filter&&) noexcept = default;
filter::~filter() = default;

filter filter::copy_to(backend where, const options& opts) const {
  options target = opts;
  target.where = where;
  const std::vector<std::uint32_t> bits = words();
  return from_words(layout_, bits.data(), target, capacity_, keys_added_);
}

backend filter::where() const noexcept { return impl_->kind(); }

dispatch_stats filter::dispatch() const { return impl_->dispatch(); }

void filter::synchronize() const { impl_->synchronize("synchronize"); }

void filter::add_keys(const detail::key_input& keys) {
  const key_batch batch = make_batch("add", keys);
  if (batch.count == 0) return;
  impl_->add(batch);
  keys_added_ += keys_to_count(batch);
}

void filter::add_new_keys(const detail::key_input& keys, bool* is_new) {
  const key_batch batch = make_batch("add_new", keys);
  check_results("add_new", batch, is_new);
  if (batch.count == 0) return;
  impl_->add_new(batch, is_new);
  keys_added_ += keys_to_count(batch);
}

void filter::contains_keys(const detail::key_input& keys, bool* found) const {
  const key_batch batch = make_batch("contains", keys);
  check_results("contains", batch, found);
  if (batch.count == 0) return;
  impl_->contains(batch, found);
}

std::uint64_t filter::count_keys(const detail::key_input& keys) const {
  const key_batch batch = make_batch("count", keys);
  return batch.count == 0 ? 0 : impl_->count(batch);
}

std::uint64_t filter::select_keys(const detail::key_input& keys, std::uint64_t* rows) const {
  const key_batch batch = make_batch("select", keys);
  check_results("select", batch, rows);
  return batch.count == 0 ? 0 : impl_->select(batch, rows);
}

void filter::select_keys_async(const detail::key_input& keys, std::uint64_t* rows,
                               std::uint64_t* count, stream_t stream) const {
  if (count == nullptr) throw invalid_argument("select_async: count is null");
  const key_batch batch = make_batch("select_async", keys);
  check_results("select_async", batch, rows);
  impl_->select_async(batch, rows, count, stream);
}

void filter::add_keys_async(const detail::key_input& keys, stream_t stream) {
  impl_->add_async(make_batch("add_async", keys), stream);
  // A device bitmap cannot be read without synchronizing: every key counts.
  keys_added_ += keys.count;
}

void filter::contains_keys_async(const detail::key_input& keys, bool* found,
                                 stream_t stream) const {
  const key_batch batch = make_batch("contains_async", keys);
  check_results("contains_async", batch, found);
  impl_->contains_async(batch, found, stream);
}

void filter::count_keys_async(const detail::key_input& keys, std::uint64_t* count,
                              stream_t stream) const {
  if (count == nullptr) throw invalid_argument("count_async: count is null");
  impl_->count_async(make_batch("count_async", keys), count, stream);
}

verify_report filter::verify_keys(const detail::key_input& keys, const bool* found) const {
  const key_batch batch = make_batch("verify_contains", keys);
  check_results("verify_contains", batch, found);
  if (batch.count == 0) return {};
  const host_view host(batch, found);
  return verify_on_cpu(host.batch, host.found);
}

verify_report filter::verify_on_cpu(const key_batch& host_batch, const bool* host_found) const {
  // The CPU twin: same layout, same bits, recomputed with the scalar reference kernel.
  // Made, written and probed once: not worth huge pages' allocation cost.
  auto cpu = detail::make_cpu_backend(layout_, cpu_simd::scalar, 0, nullptr, false);
  const std::vector<std::uint32_t> bits = words();
  cpu->write_words(bits.data());
  std::unique_ptr<bool[]> expected(new bool[host_batch.count]);
  cpu->contains(host_batch, expected.get());

  verify_report report;
  report.keys_checked = host_batch.count;
  for (std::size_t i = 0; i < host_batch.count; ++i) {
    if (expected[i] != host_found[i]) {
      if (report.mismatches == 0) report.first_mismatch = i;
      ++report.mismatches;
    }
  }
  return report;
}

void filter::clear() {
  impl_->clear();
  keys_added_ = 0;
}

void filter::combine(const filter& other, bool is_union) {
  const char* verb = is_union ? "merge" : "intersect";
  if (other.layout_ != layout_)
    throw layout_mismatch(std::string("cannot ") + verb + " filters with different layouts (" +
                          layout_differences(layout_, other.layout_) + "): " +
                          to_string(layout_) + " vs " + to_string(other.layout_));
  const detail::set_op op = is_union ? detail::set_op::union_or : detail::set_op::intersect_and;
  if (const detail::backend_impl* same_side = other.impl_->current_on(impl_->kind())) {
    impl_->combine(*same_side, op);
  } else {
    const std::vector<std::uint32_t> bits = other.words();
    impl_->combine_host(bits.data(), op);
  }
}

void filter::merge(const filter& other) {
  combine(other, true);
  if (&other != this) keys_added_ += other.keys_added_;
}

void filter::intersect(const filter& other) {
  combine(other, false);
  keys_added_ = std::min(keys_added_, other.keys_added_);
}

std::uint64_t filter::bits_set() const { return impl_->popcount(); }

filter_stats filter::stats() const {
  filter_stats s;
  s.bits_set = bits_set();
  s.num_bits = layout_.num_bits();
  s.fill_ratio = static_cast<double>(s.bits_set) / static_cast<double>(s.num_bits);
  s.estimated_keys = estimate_distinct_keys(layout_, s.bits_set);
  s.estimated_fpr = std::isinf(s.estimated_keys) ? 1.0 : expected_fpr(layout_, s.estimated_keys);
  s.keys_added = keys_added_;
  s.capacity = capacity_;
  // Without a margin a filter holding exactly its capacity would read as over it
  // half the time. The margin is 3 standard errors of the estimate at capacity
  // (0.13% of such filters warn). That error is 0.01-1.2 sqrt(n) depending on
  // layout and fill (measured and modelled, tests/test_promises.cpp), so the
  // former fixed 3 sqrt(n) ranged from 2.5 to 400 standard errors; at 1.1x a
  // 1000-key default-layout filter (1%) warned in 731 of 1000 trials, now 1000.
  const double capacity = static_cast<double>(capacity_);
  const double margin = 3 * estimate_standard_error(layout_, capacity);
  s.over_capacity = capacity_ > 0 && s.estimated_keys > capacity + margin;
  return s;
}

std::vector<std::uint32_t> filter::words() const {
  std::vector<std::uint32_t> out(layout_.num_words());
  impl_->read_words(out.data());
  return out;
}

const std::uint32_t* filter::device_words() const { return impl_->device_words(); }

}  // namespace gbf
