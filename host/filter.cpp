// gbf::filter: argument checks, backend choice and bookkeeping over a
// bloom_backend. The bit work itself lives in the backends.
#include "gbf/filter.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gbf/block_bits.hpp"
#include "host/backend.hpp"
#include "host/bloom_backend.hpp"
#include "host/counts.hpp"
#include "host/keys.hpp"
#include "host/layout_text.hpp"
#include "host/verify.hpp"
#include "host/word_range.hpp"

namespace gbf {
namespace {

using detail::call_options;
using detail::key_batch;
using detail::memory_space;

struct placed_backend {
  std::unique_ptr<detail::bloom_backend> impl;
  std::string description;
};

placed_backend place(const layout& l, const options& opts) {
  if (const char* problem = layout_problem(l))
    throw invalid_argument(std::string("invalid layout: ") + problem);
  placed_backend placed;
  placed.impl = detail::place(
      opts, placed.description, [&] { return detail::make_gpu_bloom(l, opts, &placed.description); },
      [&] { return detail::make_cpu_bloom(l, opts, &placed.description); });
  return placed;
}

std::uint32_t* gpu_words(detail::bloom_backend& impl) {
  std::uint32_t* words = impl.device_words();
  if (words == nullptr)
    throw wrong_backend("device_words needs the GPU backend, but this filter lives on the CPU");
  return words;
}

}  // namespace

namespace detail {

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

}  // namespace detail

std::string to_string(const layout& l) {
  return std::to_string(l.words_per_block) + " words/block, " + std::to_string(l.bits_per_key) +
         " bits/key, seed " + std::to_string(l.seed) +
         (l.hash == hash_id::xxh64 ? ", xxh64, " : ", unknown hash, ") +
         std::to_string(l.num_blocks) + " blocks (" + detail::format_bytes(l.size_bytes()) + ")";
}

filter::filter(const gbf::layout& l, const options& opts, std::uint64_t capacity)
    : layout_(l), capacity_(capacity) {
  placed_backend placed = place(l, opts);
  impl_ = std::move(placed.impl);
  description_ = std::move(placed.description);
}

filter filter::create(std::uint64_t capacity, double fpp, const options& opts, const shape& s) {
  return filter(size_for(capacity, fpp, s), opts, capacity);
}

filter filter::from_words(const gbf::layout& l, const std::uint32_t* words, const options& opts,
                          std::uint64_t capacity, std::uint64_t keys_added) {
  if (words == nullptr) throw invalid_argument("from_words: words is null");
  filter f(l, opts, capacity);
  f.impl().write_words(words);
  f.keys_added_ = keys_added;
  return f;
}

detail::bloom_backend& filter::impl() const {
  if (!impl_)
    throw invalid_argument("gbf::filter: this object was moved from; assign a filter to it "
                           "before using it");
  return *impl_;
}

filter::filter(filter&&) noexcept = default;
filter& filter::operator=(filter&&) noexcept = default;
filter::~filter() = default;

filter filter::copy_to(backend where, const options& opts) const {
  options target = opts;
  target.where = where;
  filter copy(layout_, target, capacity_);
  detail::copy_backend_words(impl(), copy.impl(), layout_.num_words());
  copy.keys_added_ = keys_added_;
  return copy;
}

backend filter::where() const { return impl().kind(); }

void filter::synchronize() const { impl().synchronize("synchronize"); }

void filter::add_keys(const key_batch& keys, bool* is_new, const call_options& call) {
  const key_batch batch = detail::check_batch(call.what, keys);
  if (is_new != nullptr || call.answers) detail::check_results(call.what, batch, is_new);
  if (batch.count == 0 && !call.async) return;
  impl().add(batch, is_new, call);
  // A device bitmap cannot be read by an _async call without synchronizing:
  // every key counts there.
  keys_added_ = detail::saturating_add(keys_added_, call.async ? batch.count : detail::keys_to_count(batch));
}

void filter::contains_keys(const key_batch& keys, bool* found,
                           const call_options& call) const {
  detail::checked_contains(impl(), keys, found, call);
}

std::uint64_t filter::count_keys(const key_batch& keys, std::uint64_t* device_count,
                                 const call_options& call) const {
  return detail::checked_count(impl(), keys, device_count, call);
}

std::uint64_t filter::select_keys(const key_batch& keys, std::uint64_t* rows,
                                  std::uint64_t* device_count,
                                  const call_options& call) const {
  return detail::checked_select(impl(), keys, rows, device_count, call);
}

verify_report filter::verify_keys(const key_batch& keys, const bool* found) const {
  return detail::verify_answers(keys, found, [&](const key_batch& host_keys, bool* expected) {
    // The CPU twin: same layout, same bits, the scalar reference kernel.
    auto cpu = detail::make_cpu_bloom(layout_, detail::scalar_twin_options(), nullptr);
    detail::copy_backend_words(impl(), *cpu, layout_.num_words());
    cpu->contains(host_keys, expected, {"verify_contains", nullptr, false});
  });
}

void filter::clear() {
  impl().clear();
  keys_added_ = 0;
}

void filter::combine(const filter& other, detail::set_op op) {
  const char* verb = op == detail::set_op::union_or        ? "merge"
                     : op == detail::set_op::intersect_and ? "intersect"
                                                           : "take the symmetric difference of";
  if (other.layout_ != layout_)
    throw layout_mismatch(std::string("cannot ") + verb + " filters with different layouts (" +
                          detail::layout_differences(layout_, other.layout_) + "): " +
                          to_string(layout_) + " vs " + to_string(other.layout_));
  if (other.impl().kind() == impl().kind()) {
    impl().combine(other.impl(), op);
  } else {
    // Another backend: its words come over in steps, so neither side holds a
    // second whole array (a 40 GB GPU filter merged with a CPU one needed 40 GB
    // more on the device and on the host).
    detail::copy_in_steps(
        layout_.num_words(),
        [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) { other.impl().read_words(first, count, out); },
        [&](std::uint64_t first, std::uint64_t count, const std::uint32_t* in) {
          impl().combine_host(first, count, in, op);
        });
  }
}

void filter::merge(const filter& other) {
  combine(other, detail::set_op::union_or);
  if (&other != this) keys_added_ = detail::saturating_add(keys_added_, other.keys_added_);
}

void filter::merge(const block_bits& bits) {
  if (bits.layout() != layout_)
    throw layout_mismatch("cannot merge block_bits into a filter of another layout (" +
                          detail::layout_differences(layout_, bits.layout()) +
                          "): " + to_string(layout_) + " vs " + to_string(bits.layout()));
  impl().or_blocks(bits.blocks().data(), bits.words().data(), bits.blocks().size());
  keys_added_ = detail::saturating_add(keys_added_, bits.keys_added());
}

void filter::intersect(const filter& other) {
  combine(other, detail::set_op::intersect_and);
  keys_added_ = std::min(keys_added_, other.keys_added_);
}

void filter::symmetric_difference(const filter& other) {
  combine(other, detail::set_op::symmetric_xor);
  keys_added_ = 0;
}

std::uint64_t filter::bits_set() const { return impl().popcount(); }

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
  // layout and fill (measured and modelled, tests/unit/test_promises.cpp), so the
  // former fixed 3 sqrt(n) ranged from 2.5 to 400 standard errors; at 1.1x a
  // 1000-key default-layout filter (1%) warned in 731 of 1000 trials, now 1000.
  const double capacity = static_cast<double>(capacity_);
  const double margin = 3 * estimate_standard_error(layout_, capacity);
  s.over_capacity = capacity_ > 0 && s.estimated_keys > capacity + margin;
  return s;
}

std::vector<std::uint32_t> filter::words() const {
  std::vector<std::uint32_t> out(layout_.num_words());
  impl().read_words(out.data());
  return out;
}

void filter::copy_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const {
  detail::check_word_range("copy_words", first, count, layout_.num_words(), out);
  if (count > 0) impl().read_words(first, count, out);
}

std::uint32_t* filter::device_words() { return gpu_words(impl()); }

const std::uint32_t* filter::device_words() const { return gpu_words(impl()); }

}  // namespace gbf
