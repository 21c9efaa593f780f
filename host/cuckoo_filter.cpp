// gbf::cuckoo_filter: sizing, argument checks, backend choice and stats over
// a cuckoo_backend. The table work lives in the backends.
#include "gbf/cuckoo_filter.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "host/backend.hpp"
#include "host/counts.hpp"
#include "host/cuckoo_backend.hpp"
#include "host/keys.hpp"
#include "host/verify.hpp"
#include "host/number_text.hpp"
#include "host/word_range.hpp"

namespace gbf {
namespace {

using detail::call_options;
using detail::key_batch;

void check_max_kicks(std::uint32_t max_kicks) {
  if (max_kicks < 1 || max_kicks > cuckoo_max_kicks_limit)
    throw invalid_argument("max_kicks must be between 1 and " +
                           std::to_string(cuckoo_max_kicks_limit) + ", got " +
                           std::to_string(max_kicks));
}

struct placed_backend {
  std::unique_ptr<detail::cuckoo_backend> impl;
  std::string description;
};

placed_backend place(const cuckoo_layout& l, std::uint32_t max_kicks, const options& opts) {
  if (const char* problem = cuckoo_layout_problem(l))
    throw invalid_argument(std::string("invalid cuckoo layout: ") + problem);
  check_max_kicks(max_kicks);
  placed_backend placed;
  placed.impl = detail::place(
      opts, placed.description, [&] { return detail::make_gpu_cuckoo(l, max_kicks, opts, &placed.description); },
      [&] { return detail::make_cpu_cuckoo(l, max_kicks, opts, &placed.description); });
  return placed;
}

/// 1 / (2^f - 1): the chance that one occupied slot holds a given non-zero tag.
double tag_match_probability(std::uint32_t tag_bits) {
  return 1.0 / (std::ldexp(1.0, static_cast<int>(tag_bits)) - 1.0);
}

/// The load at which cuckoo_expected_fpr equals `fpp` for f-bit tags.
double load_for_fpr(std::uint32_t tag_bits, double fpp) {
  const double slots = 256.0 / tag_bits;
  return std::log1p(-fpp) / (2 * slots * std::log1p(-tag_match_probability(tag_bits)));
}

}  // namespace

double cuckoo_max_load(std::uint32_t tag_bits) {
  // Measured (gbf_bench_cuckoo load, docs/cuckoo.md): with the default
  // max_kicks, tables of 2^10..2^20 buckets filled key by key, 5 seeds each,
  // first refused an insert at a load of at least 0.991 (8-bit tags, 32
  // slots), 0.982 (16-bit, 16 slots) and 0.969 (32-bit, 8 slots), falling by
  // about 0.003 per 4x buckets; these promises keep a margin, and
  // tests/unit/test_cuckoo.cpp pins them.
  switch (tag_bits) {
    case 8: return 0.95;
    case 16: return 0.95;
    case 32: return 0.93;
    default: return 0;
  }
}

double cuckoo_expected_fpr(const cuckoo_layout& l, std::uint64_t keys) {
  if (const char* problem = cuckoo_layout_problem(l))
    throw invalid_argument(std::string("cuckoo_expected_fpr: invalid layout: ") + problem);
  const double load =
      std::min(1.0, static_cast<double>(keys) / static_cast<double>(l.num_slots()));
  return -std::expm1(2.0 * l.slots_per_bucket() * load *
                     std::log1p(-tag_match_probability(l.tag_bits)));
}

cuckoo_layout cuckoo_size_for(std::uint64_t capacity, double fpp, const cuckoo_shape& s) {
  if (capacity == 0) throw invalid_argument("capacity must be at least 1");
  if (!(fpp > 0 && fpp < 1))
    throw invalid_argument("fpp must be in (0, 1), got " + detail::number_text(fpp));
  if (s.tag_bits != 0 && s.tag_bits != 8 && s.tag_bits != 16 && s.tag_bits != 32)
    throw invalid_argument("tag_bits must be 0 (choose), 8, 16 or 32, got " +
                           std::to_string(s.tag_bits));
  check_max_kicks(s.max_kicks);
  bool found = false;
  cuckoo_layout best;
  for (const std::uint32_t f : {8u, 16u, 32u}) {
    if (s.tag_bits != 0 && s.tag_bits != f) continue;
    cuckoo_layout l;
    l.tag_bits = f;
    l.seed = s.seed;
    const double load = std::min(cuckoo_max_load(f), load_for_fpr(f, fpp));
    const double buckets = std::ceil(static_cast<double>(capacity) / (l.slots_per_bucket() * load));
    if (!(buckets <= static_cast<double>(cuckoo_max_buckets))) continue;
    l.num_buckets = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(buckets));
    // The floating-point load may land a bucket off: settle on the fewest
    // buckets that keep both promises.
    const auto keeps_promises = [&](std::uint64_t buckets_now) {
      cuckoo_layout t = l;
      t.num_buckets = buckets_now;
      return cuckoo_expected_fpr(t, capacity) <= fpp &&
             static_cast<double>(capacity) <= cuckoo_max_load(f) * static_cast<double>(t.num_slots());
    };
    while (l.num_buckets < cuckoo_max_buckets && !keeps_promises(l.num_buckets)) ++l.num_buckets;
    while (l.num_buckets > 1 && keeps_promises(l.num_buckets - 1)) --l.num_buckets;
    if (!keeps_promises(l.num_buckets)) continue;
    if (!found || l.size_bytes() <= best.size_bytes()) best = l;  // ties: the wider tags
    found = true;
  }
  if (!found) {
    // Say which promise no table keeps: the keys' room (most with the narrowest
    // tags, which pack the most slots in a bucket), or the fpp, which a table of
    // f-bit tags lowers only by emptying itself (fpr ~ 2 x slots x load / 2^f):
    // then name the lowest fpp of the widest tags that still hold the keys.
    const std::string what = "a cuckoo filter for " + std::to_string(capacity) + " keys at fpp " +
                             detail::number_text(fpp) + " needs more than 2^32 - 1 buckets";
    const auto largest_table = [](std::uint32_t f) {
      cuckoo_layout t;
      t.tag_bits = f;
      t.num_buckets = cuckoo_max_buckets;
      return t;
    };
    const auto room = [&](std::uint32_t f) {
      return cuckoo_max_load(f) * static_cast<double>(largest_table(f).num_slots());
    };
    std::uint32_t holding = 0;  // the widest tags whose largest table holds the keys
    double most_room = 0;
    for (const std::uint32_t f : {8u, 16u, 32u}) {
      if (s.tag_bits != 0 && s.tag_bits != f) continue;
      most_room = std::max(most_room, room(f));
      if (static_cast<double>(capacity) <= room(f)) holding = f;
    }
    if (holding == 0)
      throw invalid_argument(what + ": the largest table holds about " + detail::number_text(most_room) +
                             " keys" + (s.tag_bits != 0 ? " with " + std::to_string(s.tag_bits) + "-bit tags" : ""));
    throw invalid_argument(what + ": with " + std::to_string(holding) + "-bit tags" +
                           (s.tag_bits != 0 ? "" : " (the widest that hold that many)") +
                           " the lowest fpp for that many keys is about " +
                           detail::number_text(cuckoo_expected_fpr(largest_table(holding), capacity)) +
                           "; a Bloom filter reaches any fpp");
  }
  return best;
}

double cuckoo_bits_per_key(const cuckoo_layout& l, std::uint64_t keys) {
  return keys == 0 ? 0 : static_cast<double>(l.size_bytes()) * 8 / static_cast<double>(keys);
}

std::string to_string(const cuckoo_layout& l) {
  return std::to_string(l.tag_bits) + "-bit tags, " + std::to_string(l.slots_per_bucket()) +
         " slots/bucket, seed " + std::to_string(l.seed) + ", " + std::to_string(l.num_buckets) +
         " buckets (" + detail::format_bytes(l.size_bytes()) + ")";
}

cuckoo_filter::cuckoo_filter(const cuckoo_layout& l, const options& opts, std::uint64_t capacity,
                             std::uint32_t max_kicks)
    : layout_(l), max_kicks_(max_kicks), capacity_(capacity) {
  placed_backend placed = place(l, max_kicks, opts);
  impl_ = std::move(placed.impl);
  description_ = std::move(placed.description);
}

cuckoo_filter cuckoo_filter::create(std::uint64_t capacity, double fpp, const options& opts,
                                    const cuckoo_shape& s) {
  return cuckoo_filter(cuckoo_size_for(capacity, fpp, s), opts, capacity, s.max_kicks);
}

cuckoo_filter cuckoo_filter::from_words(const cuckoo_layout& l, const std::uint32_t* words,
                                        const options& opts, std::uint64_t capacity,
                                        std::uint32_t max_kicks, const cuckoo_totals& totals) {
  if (words == nullptr) throw invalid_argument("from_words: words is null");
  cuckoo_filter f(l, opts, capacity, max_kicks);
  f.impl().write_words(0, l.num_words(), words);
  f.impl().set_totals(totals);
  return f;
}

detail::cuckoo_backend& cuckoo_filter::impl() const {
  if (!impl_)
    throw invalid_argument("gbf::cuckoo_filter: this object was moved from; assign a cuckoo filter to it "
                           "before using it");
  return *impl_;
}

cuckoo_filter::cuckoo_filter(cuckoo_filter&&) noexcept = default;
cuckoo_filter& cuckoo_filter::operator=(cuckoo_filter&&) noexcept = default;
cuckoo_filter::~cuckoo_filter() = default;

cuckoo_filter cuckoo_filter::copy_to(backend where, const options& opts) const {
  options target = opts;
  target.where = where;
  cuckoo_filter copy(layout_, target, capacity_, max_kicks_);
  detail::copy_backend_words(impl(), copy.impl(), layout_.num_words());
  copy.impl().set_totals(totals());
  return copy;
}

backend cuckoo_filter::where() const { return impl().kind(); }

void cuckoo_filter::synchronize() const { impl().synchronize("synchronize"); }

void cuckoo_filter::add_all(const key_batch& keys, const call_options& call) {
  const cuckoo_add_report report = add_keys(keys, nullptr, {}, call);
  if (report.failed == 0) return;
  const cuckoo_stats s = stats();
  char load[32];
  std::snprintf(load, sizeof load, "%.1f%%", 100 * s.load_factor);
  throw filter_full(std::string(call.what) + ": the cuckoo filter is full: " +
                        std::to_string(report.failed) + " of " +
                        std::to_string(report.inserted + report.failed) +
                        " keys were not inserted (no free slot within " +
                        std::to_string(max_kicks_) + " moves at load " + load +
                        "); the other keys were inserted and every key inserted before is "
                        "still present; a larger filter (create with a higher capacity) holds them",
                    report.failed, 0);
}

cuckoo_add_report cuckoo_filter::add_keys(const key_batch& keys, cuckoo_status* status,
                                          const cuckoo_add_options& how,
                                          const call_options& call) {
  if (how.placement != cuckoo_placement::fastest && how.placement != cuckoo_placement::deterministic)
    throw invalid_argument(std::string(call.what) + ": cuckoo_add_options::placement = " +
                           std::to_string(static_cast<unsigned>(how.placement)) +
                           " is not a cuckoo_placement (fastest or deterministic)");
  const key_batch batch = detail::check_batch(call.what, keys);
  if (status != nullptr) detail::check_results(call.what, batch, status);
  if (batch.count == 0 && !call.async) return {};
  return impl().add(batch, status, how, call);
}

std::uint64_t cuckoo_filter::remove_keys(const key_batch& keys, bool* removed,
                                         const call_options& call) {
  const key_batch batch = detail::check_batch(call.what, keys);
  if (removed != nullptr) detail::check_results(call.what, batch, removed);
  if (batch.count == 0 && !call.async) return 0;
  return impl().remove(batch, removed, call);
}

void cuckoo_filter::contains_keys(const key_batch& keys, bool* found,
                                  const call_options& call) const {
  detail::checked_contains(impl(), keys, found, call);
}

std::uint64_t cuckoo_filter::count_keys(const key_batch& keys, std::uint64_t* device_count,
                                        const call_options& call) const {
  return detail::checked_count(impl(), keys, device_count, call);
}

void cuckoo_filter::copies_keys(const key_batch& keys, std::uint8_t* copies,
                                const call_options& call) const {
  const key_batch batch = detail::check_batch(call.what, keys);
  detail::check_results(call.what, batch, copies);
  if (batch.count == 0 && !call.async) return;
  impl().approximate_count(batch, copies, call);
}

std::uint64_t cuckoo_filter::select_keys(const key_batch& keys, std::uint64_t* rows,
                                         std::uint64_t* device_count,
                                         const call_options& call) const {
  return detail::checked_select(impl(), keys, rows, device_count, call);
}

verify_report cuckoo_filter::verify_keys(const key_batch& keys, const bool* found) const {
  return detail::verify_answers(keys, found, [&](const key_batch& host_keys, bool* expected) {
    // The CPU twin with the portable probe.
    auto cpu = detail::make_cpu_cuckoo(layout_, max_kicks_, detail::scalar_twin_options(), nullptr);
    detail::copy_backend_words(impl(), *cpu, layout_.num_words());
    cpu->contains(host_keys, expected, {"verify_contains", nullptr, false});
  });
}

void cuckoo_filter::clear() { impl().clear(); }

void cuckoo_filter::merge(const cuckoo_filter& other) {
  detail::cuckoo_backend& mine = impl();
  const detail::cuckoo_backend& theirs = other.impl();
  if (other.layout_ != layout_)
    throw layout_mismatch("cannot merge cuckoo filters of different layouts: " + to_string(layout_) + " vs " +
                          to_string(other.layout_));
  const std::uint64_t held = mine.occupied_slots();
  const std::uint64_t incoming = theirs.occupied_slots();
  const auto refuse = [&](const std::string& why) {
    throw filter_full("merge: the other cuckoo filter's " + std::to_string(incoming) + " tags do not fit this one (" +
                          std::to_string(held) + " of " + std::to_string(layout_.num_slots()) + " slots taken): " +
                          why + "; nothing was merged (a merge needs equal layouts: a larger filter takes the keys "
                          "of both only by adding them again)",
                      0, 0);
  };
  if (held + incoming > layout_.num_slots()) refuse("more tags than slots");
  // This table comes to the host and the other's tags go in with the insert a CPU
  // thread runs (cuckoo_insert_exclusive), bucket by bucket and slot by slot: the
  // table is a function of the two inputs wherever they live. The other table is
  // read in steps from its backend, which the loop never writes (so a filter merged
  // with itself reads its own tags as they were), and nothing is written back
  // unless every tag found a slot.
  const std::uint64_t num_buckets = layout_.num_buckets;
  std::vector<std::uint64_t> table;
  std::vector<std::uint64_t> step;
  try {
    table.resize(num_buckets * cuckoo_bucket_words);
    step.resize(std::min<std::uint64_t>(num_buckets, detail::staging_words / (2 * cuckoo_bucket_words)) *
                cuckoo_bucket_words);
  } catch (const std::bad_alloc&) {
    throw allocation_error("merge: cannot allocate the " + detail::format_bytes(layout_.size_bytes()) +
                               " host copy of the cuckoo table the other filter's tags go into",
                           layout_.size_bytes());
  }
  mine.read_words(reinterpret_cast<std::uint32_t*>(table.data()));
  cuckoo_totals merged = mine.totals();
  const cuckoo_totals added = theirs.totals();
  std::vector<cuckoo_move> chain(max_kicks_);
  std::uint64_t moves = 0;
  const std::uint64_t buckets_a_step = step.size() / cuckoo_bucket_words;
  dispatch_tag_bits(layout_.tag_bits, [&](auto bits) {
    constexpr std::uint32_t tag_bits = decltype(bits)::value;
    using bucket_ops = cuckoo_bucket<tag_bits>;
    for (std::uint64_t first = 0; first < num_buckets; first += buckets_a_step) {
      const std::uint64_t count = std::min(buckets_a_step, num_buckets - first);
      theirs.read_words(first * 2 * cuckoo_bucket_words, count * 2 * cuckoo_bucket_words,
                        reinterpret_cast<std::uint32_t*>(step.data()));
      for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint64_t b = first + i;
        const std::uint64_t* bucket = step.data() + i * cuckoo_bucket_words;
        for (std::uint32_t s = 0; s < bucket_ops::slots; ++s) {
          const std::uint32_t tag = bucket_ops::tag_at(bucket, s);
          if (tag == 0) continue;
          // b is the key's primary bucket or its alternate; either way the pair is
          // {b, alternate(b, tag)}, the two buckets contains looks in.
          const std::uint32_t placed = cuckoo_insert_exclusive<tag_bits>(
              table.data(), num_buckets, b, cuckoo_alternate(b, tag, num_buckets), tag, max_kicks_, chain.data());
          // One tag without a slot fails the merge: stop rather than try the rest.
          if (placed == 0)
            refuse("a tag found no free slot within max_kicks = " + std::to_string(max_kicks_) + " moves");
          moves += placed - 1;
        }
      }
    }
  });
  mine.write_words(0, layout_.num_words(), reinterpret_cast<const std::uint32_t*>(table.data()));
  merged.keys_added = detail::saturating_add(merged.keys_added, added.keys_added);
  merged.keys_removed = detail::saturating_add(merged.keys_removed, added.keys_removed);
  // The other's own evictions and failures stay its history.
  merged.evictions = detail::saturating_add(merged.evictions, moves);
  mine.set_totals(merged);
}

cuckoo_totals cuckoo_filter::totals() const { return impl().totals(); }

cuckoo_stats cuckoo_filter::stats() const {
  cuckoo_stats s;
  s.occupied_slots = impl().occupied_slots();
  s.num_slots = layout_.num_slots();
  s.load_factor = static_cast<double>(s.occupied_slots) / static_cast<double>(s.num_slots);
  s.max_load = cuckoo_max_load(layout_.tag_bits);
  s.estimated_fpr = cuckoo_expected_fpr(layout_, s.occupied_slots);
  s.capacity = capacity_;
  const cuckoo_totals t = impl().totals();
  s.keys_added = t.keys_added;
  s.keys_removed = t.keys_removed;
  s.evictions = t.evictions;
  s.failed_inserts = t.failed_inserts;
  // Past the load where inserts may fail, or holding more keys than it was
  // sized for: below its maximum load a table sized for a low fpp still
  // takes keys, but its FPR grows past the target with every one.
  s.over_capacity = s.load_factor > s.max_load || (s.capacity > 0 && s.occupied_slots > s.capacity);
  return s;
}

std::vector<std::uint32_t> cuckoo_filter::words() const {
  std::vector<std::uint32_t> out(layout_.num_words());
  impl().read_words(out.data());
  return out;
}

void cuckoo_filter::copy_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const {
  detail::check_word_range("copy_words", first, count, layout_.num_words(), out);
  if (count > 0) impl().read_words(first, count, out);
}

const std::uint32_t* cuckoo_filter::device_words() const {
  const std::uint32_t* words = impl().device_words();
  if (words == nullptr)
    throw wrong_backend("device_words needs the GPU backend, but this cuckoo filter lives on the CPU");
  return words;
}

}  // namespace gbf
