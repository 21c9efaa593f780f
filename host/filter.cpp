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

namespace gbf {
namespace {

using detail::key_batch;
using detail::key_kind;
using detail::memory_space;

std::size_t key_bytes(key_kind kind) { return kind == key_kind::u32 ? 4 : 8; }

const char* space_name(memory_space space) {
  return space == memory_space::device ? "device" : "host";
}

// Describes a caller's key array; `what` names the operation in errors.
key_batch make_batch(const char* what, const void* keys, std::size_t n, key_kind kind) {
  if (n > 0 && keys == nullptr)
    throw invalid_argument(std::string(what) + ": keys is null but n = " + std::to_string(n));
  return key_batch{keys, n, kind, n > 0 ? detail::locate(keys) : memory_space::host};
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
  backend where = opts.where;
  std::string reason;
  if (where == backend::automatic) {
    const gpu_status gpu = query_gpu();
    where = gpu.available ? backend::gpu : backend::cpu;
    reason = gpu.available ? "auto: GPU present" : "auto: no GPU (" + gpu.description + ")";
  }
  if (where == backend::gpu) {
    placed.impl = detail::make_gpu_backend(l, opts.gpu_chunk_keys, opts.gpu_streams,
                                           &placed.description);
  } else {
    placed.impl = detail::make_cpu_backend(l, opts.simd, opts.cpu_threads, &placed.description);
  }
  if (!reason.empty()) placed.description += "; " + reason;
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

}  // namespace

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

void filter::add_impl(const void* keys, std::size_t n, key_kind kind) {
  const key_batch batch = make_batch("add", keys, n, kind);
  if (n == 0) return;
  impl_->add(batch);
  keys_added_ += n;
}

void filter::add_new_impl(const void* keys, std::size_t n, key_kind kind, bool* is_new) {
  const key_batch batch = make_batch("add_new", keys, n, kind);
  check_results("add_new", batch, is_new);
  if (n == 0) return;
  impl_->add_new(batch, is_new);
  keys_added_ += n;
}

void filter::contains_impl(const void* keys, std::size_t n, key_kind kind, bool* found) const {
  const key_batch batch = make_batch("contains", keys, n, kind);
  check_results("contains", batch, found);
  if (n == 0) return;
  impl_->contains(batch, found);
}

std::uint64_t filter::count_impl(const void* keys, std::size_t n, key_kind kind) const {
  const key_batch batch = make_batch("count", keys, n, kind);
  return n == 0 ? 0 : impl_->count(batch);
}

void filter::add_async_impl(const void* keys, std::size_t n, key_kind kind, stream_t stream) {
  impl_->add_async(make_batch("add_async", keys, n, kind), stream);
  keys_added_ += n;
}

void filter::contains_async_impl(const void* keys, std::size_t n, key_kind kind, bool* found,
                                 stream_t stream) const {
  const key_batch batch = make_batch("contains_async", keys, n, kind);
  check_results("contains_async", batch, found);
  impl_->contains_async(batch, found, stream);
}

void filter::count_async_impl(const void* keys, std::size_t n, key_kind kind,
                              std::uint64_t* count, stream_t stream) const {
  if (count == nullptr) throw invalid_argument("count_async: count is null");
  impl_->count_async(make_batch("count_async", keys, n, kind), count, stream);
}

verify_report filter::verify_impl(const void* keys, std::size_t n, key_kind kind,
                                  const bool* found) const {
  const key_batch batch = make_batch("verify_contains", keys, n, kind);
  check_results("verify_contains", batch, found);
  verify_report report;
  if (n == 0) return report;

  // Bring keys and answers to the host when they live on the device.
  std::vector<unsigned char> host_keys;
  std::vector<unsigned char> host_found_bytes;
  key_batch host_batch = batch;
  const bool* host_found = found;
  if (batch.space == memory_space::device) {
    host_keys.resize(n * key_bytes(kind));
    detail::copy_device_to_host(host_keys.data(), keys, host_keys.size());
    host_found_bytes.resize(n);
    detail::copy_device_to_host(host_found_bytes.data(), found, n);
    host_batch.data = host_keys.data();
    host_batch.space = memory_space::host;
    host_found = reinterpret_cast<const bool*>(host_found_bytes.data());
  }

  // The CPU twin: same layout, same bits, recomputed with the scalar reference kernel.
  auto cpu = detail::make_cpu_backend(layout_, cpu_simd::scalar, 0, nullptr);
  const std::vector<std::uint32_t> bits = words();
  cpu->write_words(bits.data());
  std::unique_ptr<bool[]> expected(new bool[n]);
  cpu->contains(host_batch, expected.get());

  report.keys_checked = n;
  for (std::size_t i = 0; i < n; ++i) {
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
    throw layout_mismatch(std::string("cannot ") + verb + " filters with different layouts: " +
                          to_string(layout_) + " vs " + to_string(other.layout_));
  const detail::set_op op = is_union ? detail::set_op::union_or : detail::set_op::intersect_and;
  if (other.impl_->kind() == impl_->kind()) {
    impl_->combine(*other.impl_, op);
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
  s.over_capacity = capacity_ > 0 && s.estimated_keys > static_cast<double>(capacity_);
  return s;
}

std::vector<std::uint32_t> filter::words() const {
  std::vector<std::uint32_t> out(layout_.num_words());
  impl_->read_words(out.data());
  return out;
}

const std::uint32_t* filter::device_words() const { return impl_->device_words(); }

}  // namespace gbf
