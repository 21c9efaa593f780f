// gbf::counting_filter: argument checks, backend choice and bookkeeping over a
// counting_backend. The counter work itself lives in the backends.
#include "gbf/counting_filter.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "host/backend.hpp"
#include "host/counting_backend.hpp"
#include "host/counts.hpp"
#include "host/filter_access.hpp"
#include "host/keys.hpp"
#include "host/word_range.hpp"

namespace gbf {
namespace {

using detail::call_options;
using detail::key_batch;

void check_counting_layout(const layout& l, std::uint32_t counter_bits) {
  if (const char* problem = counting_layout_problem(l, counter_bits))
    throw invalid_argument(std::string("invalid counting filter layout: ") + problem);
}

std::unique_ptr<detail::counting_backend> place(const layout& l, std::uint32_t counter_bits,
                                                const options& opts, std::string& description) {
  check_counting_layout(l, counter_bits);
  return detail::place(
      opts, description, [&] { return detail::make_gpu_counting(l, counter_bits, opts, &description); },
      [&] { return detail::make_cpu_counting(l, counter_bits, opts, &description); });
}

std::string counting_text(const layout& l, std::uint32_t counter_bits) {
  return to_string(l) + " with " + std::to_string(counter_bits) + "-bit counters";
}

}  // namespace

counting_filter::counting_filter(const gbf::layout& l, const options& opts,
                                 std::uint64_t capacity, std::uint32_t counter_bits)
    : layout_(l), counter_bits_(counter_bits), options_(opts), capacity_(capacity) {
  impl_ = place(l, counter_bits, opts, description_);
}

counting_filter counting_filter::create(std::uint64_t capacity, double fpp, const options& opts,
                                        const shape& s, std::uint32_t counter_bits) {
  return counting_filter(size_for(capacity, fpp, s), opts, capacity, counter_bits);
}

counting_filter counting_filter::from_counters(const gbf::layout& l, std::uint32_t counter_bits,
                                               const std::uint32_t* counters, const options& opts,
                                               std::uint64_t capacity, std::uint64_t keys_added,
                                               std::uint64_t keys_removed) {
  if (counters == nullptr) throw invalid_argument("from_counters: counters is null");
  counting_filter f(l, opts, capacity, counter_bits);
  f.impl().write_counters(0, num_counter_words(l, counter_bits), counters);
  f.keys_added_ = keys_added;
  f.keys_removed_ = keys_removed;
  return f;
}

detail::counting_backend& counting_filter::impl() const {
  if (!impl_)
    throw invalid_argument("gbf::counting_filter: this object was moved from; assign a counting filter to it "
                           "before using it");
  return *impl_;
}

counting_filter::counting_filter(counting_filter&&) noexcept = default;
counting_filter& counting_filter::operator=(counting_filter&&) noexcept = default;
counting_filter::~counting_filter() = default;

counting_filter counting_filter::copy_to(backend where, const options& opts) const {
  options target = opts;
  target.where = where;
  counting_filter copy(layout_, target, capacity_, counter_bits_);
  detail::copy_in_steps(
      num_counter_words(layout_, counter_bits_),
      [this](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
        impl().read_counters(first, count, out);
      },
      [&copy](std::uint64_t first, std::uint64_t count, const std::uint32_t* in) {
        copy.impl().write_counters(first, count, in);
      });
  copy.keys_added_ = keys_added_;
  copy.keys_removed_ = keys_removed_;
  return copy;
}

backend counting_filter::where() const { return impl().kind(); }

void counting_filter::synchronize() const { impl().synchronize("synchronize"); }

void counting_filter::add_keys(const key_batch& keys, const call_options& call) {
  const key_batch batch = detail::check_batch(call.what, keys);
  if (batch.count == 0 && !call.async) return;
  impl().add(batch, call);
  keys_added_ = detail::saturating_add(keys_added_, call.async ? batch.count : detail::keys_to_count(batch));
}

remove_report counting_filter::remove_keys(const key_batch& keys, bool* removed,
                                           std::uint64_t* device_refused,
                                           const call_options& call) {
  const key_batch batch = detail::check_batch(call.what, keys);
  if (removed != nullptr || call.answers) detail::check_results(call.what, batch, removed);
  if (batch.count == 0 && !call.async) return {};
  const std::uint64_t refused = impl().remove(batch, removed, device_refused, call);
  if (call.async) {
    // The refusals stay on the device (device_refused): every key counts.
    keys_removed_ = detail::saturating_add(keys_removed_, batch.count);
    return {};
  }
  remove_report report;
  report.refused = refused;
  report.removed = detail::keys_to_count(batch) - refused;
  keys_removed_ = detail::saturating_add(keys_removed_, report.removed);
  return report;
}

void counting_filter::remove_unchecked_keys(const key_batch& keys, const call_options& call) {
  const key_batch batch = detail::check_batch(call.what, keys);
  if (batch.count == 0 && !call.async) return;
  impl().remove_unchecked(batch, call);
  keys_removed_ = detail::saturating_add(keys_removed_, call.async ? batch.count : detail::keys_to_count(batch));
}

void counting_filter::contains_keys(const key_batch& keys, bool* found,
                                    const call_options& call) const {
  detail::checked_contains(impl(), keys, found, call);
}

std::uint64_t counting_filter::count_keys(const key_batch& keys, std::uint64_t* device_count,
                                          const call_options& call) const {
  return detail::checked_count(impl(), keys, device_count, call);
}

std::uint64_t counting_filter::select_keys(const key_batch& keys, std::uint64_t* rows,
                                           std::uint64_t* device_count,
                                           const call_options& call) const {
  return detail::checked_select(impl(), keys, rows, device_count, call);
}

void counting_filter::approximate_count_keys(const key_batch& keys, std::uint8_t* counts,
                                             const call_options& call) const {
  const key_batch batch = detail::check_batch(call.what, keys);
  detail::check_results(call.what, batch, counts);
  if (batch.count == 0) return;
  impl().approximate_count(batch, counts, call);
}

void counting_filter::clear() {
  impl().clear();
  keys_added_ = 0;
  keys_removed_ = 0;
}

std::uint64_t counting_filter::keys_held() const noexcept {
  // Unchecked removes of absent keys can make the difference negative.
  return keys_added_ > keys_removed_ ? keys_added_ - keys_removed_ : 0;
}

void counting_filter::combine(const counting_filter& other, detail::counter_merge op) {
  const char* verb = op == detail::counter_merge::sum ? "merge" : "intersect";
  if (other.layout_ != layout_ || other.counter_bits_ != counter_bits_)
    throw layout_mismatch(std::string("cannot ") + verb + " counting filters of different layouts: " +
                          counting_text(layout_, counter_bits_) + " vs " +
                          counting_text(other.layout_, other.counter_bits_));
  if (other.impl().kind() == impl().kind()) {
    impl().merge(other.impl(), op);
  } else {
    // Another backend: its counters come over in steps (as filter::combine).
    detail::copy_in_steps(
        num_counter_words(layout_, counter_bits_),
        [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
          other.impl().read_counters(first, count, out);
        },
        [&](std::uint64_t first, std::uint64_t count, const std::uint32_t* in) {
          impl().merge_host(first, count, in, op);
        });
  }
}

void counting_filter::merge(const counting_filter& other) {
  const std::uint64_t added = other.keys_added_;  // read first: `other` may be this
  const std::uint64_t removed = other.keys_removed_;
  combine(other, detail::counter_merge::sum);
  keys_added_ = detail::saturating_add(keys_added_, added);
  keys_removed_ = detail::saturating_add(keys_removed_, removed);
}

void counting_filter::intersect(const counting_filter& other) {
  // Keys both may hold: at most the smaller of the two counts of keys held.
  const std::uint64_t common = std::min(keys_held(), other.keys_held());
  combine(other, detail::counter_merge::min);
  keys_added_ = common;
  keys_removed_ = 0;
}

counting_stats counting_filter::stats() const {
  const detail::counter_census census = impl().census();
  counting_stats s;
  s.counter_bits = counter_bits_;
  s.num_counters = layout_.num_bits();
  s.nonzero_counters = census.nonzero;
  s.saturated_counters = census.saturated;
  s.fill_ratio = static_cast<double>(census.nonzero) / static_cast<double>(s.num_counters);
  // The projection is a plain filter of this layout: its estimate, FPR and
  // over-capacity rule (host/filter.cpp) are the plain filter's.
  s.estimated_keys = estimate_distinct_keys(layout_, census.nonzero);
  s.estimated_fpr = std::isinf(s.estimated_keys) ? 1.0 : expected_fpr(layout_, s.estimated_keys);
  s.keys_added = keys_added_;
  s.keys_removed = keys_removed_;
  s.capacity = capacity_;
  s.size_bytes = counter_bytes(layout_, counter_bits_);
  s.bytes_per_key =
      capacity_ == 0 ? 0 : static_cast<double>(s.size_bytes) / static_cast<double>(capacity_);
  const double capacity = static_cast<double>(capacity_);
  s.over_capacity = capacity_ > 0 &&
                    s.estimated_keys > capacity + 3 * estimate_standard_error(layout_, capacity);
  return s;
}

std::vector<std::uint32_t> counting_filter::counters() const {
  std::vector<std::uint32_t> out(num_counter_words(layout_, counter_bits_));
  impl().read_counters(out.data());
  return out;
}

void counting_filter::copy_counters(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const {
  detail::check_word_range("copy_counters", first, count, num_counter_words(layout_, counter_bits_), out);
  if (count > 0) impl().read_counters(first, count, out);
}

filter counting_filter::projection() const {
  options opts = options_;
  opts.where = where();
  // Projected straight into the new filter's array, on either backend.
  filter projected(layout_, opts, capacity_);
  std::uint32_t* const host = detail::filter_access::host_words(projected);
  impl().project(host != nullptr ? host : projected.device_words());
  detail::filter_access::set_keys_added(projected, keys_held());
  return projected;
}

}  // namespace gbf
