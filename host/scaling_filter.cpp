// gbf::scaling_filter: the growth rule, the add's control loop both backends
// share, argument checks and bookkeeping over a scaling_backend.
#include "gbf/scaling_filter.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "host/backend.hpp"
#include "host/counts.hpp"
#include "host/keys.hpp"
#include "host/verify.hpp"
#include "host/scaling_backend.hpp"
#include "host/number_text.hpp"
#include "host/word_range.hpp"

namespace gbf {
namespace detail {

const char* config_problem(const scaling_config& c) {
  if (c.initial_capacity == 0) return "initial capacity must be at least 1";
  if (!(c.fpp > 0 && c.fpp < 1)) return "fpp must be in (0, 1)";
  if (c.policy.expansion == 0) return "expansion must be at least 1";
  if (!(c.policy.tightening > 0 && c.policy.tightening <= 1))
    return "tightening ratio must be in (0, 1], 1 for levels that all keep fpp (Hadoop's dynamic filter)";
  layout l;
  l.words_per_block = c.s.words_per_block;
  l.bits_per_key = c.s.bits_per_key;
  l.seed = c.s.seed;
  return layout_problem(l);
}

std::uint64_t level_capacity(const scaling_config& c, std::size_t index) {
  std::uint64_t capacity = c.initial_capacity;
  for (std::size_t i = 0; i < index; ++i) {
    if (capacity > std::numeric_limits<std::uint64_t>::max() / c.policy.expansion) return 0;
    capacity *= c.policy.expansion;
  }
  return capacity;
}

namespace {

// fpp (1 - r) r^index: the targets of all levels sum to fpp, a geometric series.
// r = 1: every level at fpp, the chain's FPR growing with its levels (Hadoop's
// DynamicBloomFilter).
double level_fpp(const scaling_config& c, std::size_t index) {
  if (c.policy.non_scaling || c.policy.tightening == 1) return c.fpp;
  return c.fpp * (1 - c.policy.tightening) * std::pow(c.policy.tightening, static_cast<double>(index));
}

}  // namespace

scaling_level plan_level(const scaling_config& c, std::size_t index) {
  const std::string which = "cannot open level " + std::to_string(index) + " of the chain: ";
  if (index >= max_scaling_levels)
    throw filter_full(which + "a chain has at most " + std::to_string(max_scaling_levels) +
                          " levels (create it with a larger capacity or expansion)",
                      0, 0);
  if (c.policy.non_scaling && index > 0)
    throw filter_full(which + "non scaling filter is full", 0, 0);
  scaling_level level;
  level.capacity = level_capacity(c, index);
  if (level.capacity == 0)
    throw filter_full(which + "its capacity, initial * expansion^" + std::to_string(index) +
                          ", passes 2^64",
                      0, 0);
  level.fpp = level_fpp(c, index);
  if (!(level.fpp > 0))
    throw filter_full(which + "its target fpp, fpp (1 - r) r^" + std::to_string(index) +
                          ", underflows to 0",
                      0, 0);
  try {
    level.l = size_for(level.capacity, level.fpp, c.s);
  } catch (const invalid_argument& e) {
    // size_for's message names the capacity and fpp it was given.
    throw filter_full(which + e.what(), 0, 0);
  }
  // k is fixed, so as the targets tighten a level's bits per key grow, slowly
  // at first, then (below about one key per block) doubling per level: with
  // expansion 1 a chain of small levels reached gigabytes per level by its 60th.
  // Past max_level_bits_per_key the chain stops instead, its memory bounded by
  // its keys (512 bytes each at most).
  const double bits_per_key = bits_per_key_at(level.l, level.capacity);
  // Level 0's target, fpp (1 - r), is met by a larger fpp, an r nearer 0 or
  // more bits set per key; the later levels' fpp (1 - r) r^i also by fewer
  // levels (a larger capacity or expansion) or an r nearer 1 (a slower decay).
  if (bits_per_key > max_level_bits_per_key)
    throw filter_full(which + "its target fpp " + number_text(level.fpp) + " needs " +
                          std::to_string(static_cast<std::uint64_t>(bits_per_key)) +
                          " bits per key with k = " + std::to_string(c.s.bits_per_key) + ", more than " +
                          std::to_string(static_cast<std::uint64_t>(max_level_bits_per_key)) +
                          (index == 0 ? " (create the chain with a larger fpp, a tightening nearer 0, "
                                        "or a larger k)"
                                      : " (create the chain with a larger capacity or expansion, a "
                                        "tightening nearer 1, or a larger k)"),
                      0, 0);
  return level;
}

// Why fill is exactly the sequential add. Inserting keys one by one, key j
// (batch order) is inserted when it is non-null and absent from every level at
// its turn; it goes to the newest level, a new level opening first when the
// newest is full (RedisBloom's SBChain_Add). fill does the same in bulk:
//  1. probe_all keeps the keys absent at the start; a key present then is
//     present at its turn (bits only grow) and is never inserted.
//  2. Only the newest level changes during the batch, so a candidate is absent
//     from the others at its turn as well; whether it is absent from the newest
//     is what add_new answers: is it covered by the level's bits before the
//     slice plus those of the slice's earlier keys?
//  3. A slice holds at most `room` candidates, so the level cannot pass its
//     capacity inside one; when it reaches capacity, every key of the slice was
//     new, so nothing of the slice follows the key that filled it. The
//     candidates after the slice are then checked against the full level
//     (drop_present) before a new level opens, as their turn would check them,
//     and the new level opens only when a candidate remains.
//  4. drop_present after a slice that left room, and drop_repeats, remove only
//     keys that would not be new at their turn (present in the level already, or
//     with the hash of an earlier candidate, which sets the same bits in every
//     level): they spare later slices work and change no answer.
// Work: a slice that leaves room inserted c < room keys. While more than half
// of each slice is new, the room at least halves per slice; the first slice
// with less triggers the one deduplication, after which only false positives
// inside the level (a rate below the level's fpp) keep a candidate from being
// new. So a level takes 1 to 3 slices in practice and O(log capacity) at worst,
// and the batch hashes its keys once.
std::uint64_t fill(fill_steps& steps, const scaling_config& config,
                   std::vector<scaling_level>& levels) {
  std::size_t candidates = steps.probe_all();
  std::size_t first = 0;
  std::uint64_t inserted = 0;
  bool deduplicated = false;
  while (first < candidates) {
    if (!config.policy.non_scaling && levels.back().keys >= levels.back().capacity) {
      const scaling_level next = plan_level(config, levels.size());
      steps.open_level(next.l);
      levels.push_back(next);
    }
    const std::size_t newest = levels.size() - 1;
    scaling_level& level = levels[newest];
    const std::size_t left = candidates - first;
    const std::size_t slice =
        config.policy.non_scaling
            ? left
            : static_cast<std::size_t>(std::min<std::uint64_t>(left, level.capacity - level.keys));
    const std::uint64_t added = steps.add_slice(newest, first, slice);
    level.keys = detail::saturating_add(level.keys, added);
    inserted += added;
    first += slice;
    if (first == candidates) break;
    candidates = steps.drop_present(newest, first);
    first = 0;
    if (!deduplicated && 2 * added < slice) {
      candidates = steps.drop_repeats();
      deduplicated = true;
    }
  }
  return inserted;
}

}  // namespace detail

namespace {

using detail::call_options;
using detail::key_batch;
using detail::scaling_backend;

struct placed_chain {
  std::unique_ptr<scaling_backend> impl;
  std::string description;
};

// A chain with `levels` allocated (zeroed) on the side opts picks: the levels are made
// inside the placing, so that an automatic chain whose levels the GPU cannot hold goes
// to the CPU (detail::place) rather than failing after its small GPU state was made.
placed_chain place(const shape& s, const options& opts, const std::vector<scaling_level>& levels) {
  placed_chain placed;
  const auto with_levels = [&levels](std::unique_ptr<scaling_backend> impl) {
    for (const scaling_level& level : levels) impl->push_level(level.l);
    return impl;
  };
  placed.impl = detail::place(
      opts, placed.description,
      [&] { return with_levels(detail::make_gpu_scaling(s, opts, &placed.description)); },
      [&] { return with_levels(detail::make_cpu_scaling(s, opts, &placed.description)); });
  return placed;
}

std::string config_differences(const scaling_config& a, const scaling_config& b) {
  std::string out;
  auto field = [&out](const char* name, const std::string& x, const std::string& y) {
    if (x == y) return;
    if (!out.empty()) out += ", ";
    out += std::string(name) + " " + x + " vs " + y;
  };
  field("initial capacity", std::to_string(a.initial_capacity), std::to_string(b.initial_capacity));
  field("fpp", detail::number_text(a.fpp, 17), detail::number_text(b.fpp, 17));
  field("expansion", std::to_string(a.policy.expansion), std::to_string(b.policy.expansion));
  field("tightening", detail::number_text(a.policy.tightening, 17), detail::number_text(b.policy.tightening, 17));
  field("non-scaling", a.policy.non_scaling ? "yes" : "no", b.policy.non_scaling ? "yes" : "no");
  field("words_per_block", std::to_string(a.s.words_per_block), std::to_string(b.s.words_per_block));
  field("bits_per_key", std::to_string(a.s.bits_per_key), std::to_string(b.s.bits_per_key));
  field("seed", std::to_string(a.s.seed), std::to_string(b.s.seed));
  return out;
}

// "level 2 (capacity 4,000, keys 17)": a level for messages.
std::string describe_level(std::size_t index, const scaling_level& level) {
  return "level " + std::to_string(index) + " (capacity " + std::to_string(level.capacity) +
         ", " + std::to_string(level.keys) + " keys)";
}

// invalid_argument unless `levels` is a chain `config` could have grown.
void check_levels(const scaling_config& config, const std::vector<scaling_level>& levels) {
  if (levels.empty()) throw invalid_argument("a chain has at least one level");
  if (levels.size() > detail::max_scaling_levels)
    throw invalid_argument(std::to_string(levels.size()) + " levels; a chain has at most " +
                           std::to_string(detail::max_scaling_levels));
  if (config.policy.non_scaling && levels.size() != 1)
    throw invalid_argument("a non-scaling chain has one level, not " +
                           std::to_string(levels.size()));
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const scaling_level& level = levels[i];
    const std::string name = "level " + std::to_string(i) + ": ";
    if (const char* problem = layout_problem(level.l))
      throw invalid_argument(name + "impossible layout: " + problem);
    if (level.l.words_per_block != config.s.words_per_block ||
        level.l.bits_per_key != config.s.bits_per_key || level.l.seed != config.s.seed)
      throw invalid_argument(name + "its shape " + to_string(level.l) +
                             " is not the chain's (W, k and seed are shared)");
    const std::uint64_t capacity = detail::level_capacity(config, i);
    if (level.capacity != capacity)
      throw invalid_argument(name + "capacity " + std::to_string(level.capacity) +
                             " is not initial * expansion^" + std::to_string(i) + " = " +
                             std::to_string(capacity));
    const double fpp = detail::level_fpp(config, i);
    if (!(std::fabs(level.fpp - fpp) <= 1e-12 * fpp))
      throw invalid_argument(name + "target fpp " + detail::number_text(level.fpp, 17) +
                             " is not the rule's " + detail::number_text(fpp, 17));
    // A level smaller than its capacity and fpp need (e.g. a crafted file)
    // would silently break the chain's FPR bound; size_for gives the smallest
    // that meets it, and a larger one is harmless.
    if (const double fpr = expected_fpr(level.l, static_cast<double>(level.capacity));
        !(fpr <= level.fpp * (1 + 1e-9)))
      throw invalid_argument(name + std::to_string(level.l.num_blocks) + " blocks give an FPR of " +
                             detail::number_text(fpr) + " at its capacity " +
                             std::to_string(level.capacity) + ", above its target fpp " +
                             detail::number_text(level.fpp) + " (too small for its rule)");
    if (level.keys > level.capacity)
      throw invalid_argument(name + std::to_string(level.keys) + " keys exceed its capacity " +
                             std::to_string(level.capacity));
    if (i + 1 < levels.size() && level.keys != level.capacity)
      throw invalid_argument(name + "holds " + std::to_string(level.keys) + " of " +
                             std::to_string(level.capacity) +
                             " keys, yet a newer level exists (a level opens only when the "
                             "one before is full)");
  }
}

}  // namespace

scaling_filter::scaling_filter(const scaling_config& config, std::vector<scaling_level> levels,
                               std::unique_ptr<scaling_backend> impl, std::string description)
    : config_(config),
      levels_(std::move(levels)),
      impl_(std::move(impl)),
      description_(std::move(description)) {}

detail::scaling_backend& scaling_filter::impl() const {
  if (!impl_)
    throw invalid_argument("gbf::scaling_filter: this object was moved from; assign a scaling filter to it "
                           "before using it");
  return *impl_;
}

scaling_filter::scaling_filter(scaling_filter&&) noexcept = default;
scaling_filter& scaling_filter::operator=(scaling_filter&&) noexcept = default;
scaling_filter::~scaling_filter() = default;

scaling_filter scaling_filter::create(std::uint64_t initial_capacity, double fpp,
                                      const scaling_policy& policy, const options& opts,
                                      const shape& s) {
  scaling_config config;
  config.initial_capacity = initial_capacity;
  config.fpp = fpp;
  config.policy = policy;
  config.s = s;
  return create(config, opts);
}

scaling_filter scaling_filter::create(const scaling_config& config, const options& opts) {
  if (const char* problem = detail::config_problem(config))
    throw invalid_argument(std::string("scaling_filter: ") + problem);
  scaling_level first;
  try {
    first = detail::plan_level(config, 0);
  } catch (const filter_full& e) {
    throw invalid_argument(std::string("scaling_filter: ") + e.what());
  }
  placed_chain placed = place(config.s, opts, {first});
  return scaling_filter(config, {first}, std::move(placed.impl), std::move(placed.description));
}

namespace {

/// Copies every level's words from `from` into `to`, whose levels already exist, a
/// staged slice at a time (copy_to, the CPU twin of verify).
void copy_levels(const detail::scaling_backend& from, detail::scaling_backend& to,
                 const std::vector<scaling_level>& levels) {
  for (std::size_t i = 0; i < levels.size(); ++i)
    detail::copy_in_steps(
        levels[i].l.num_words(),
        [&from, i](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
          from.read_words(i, first, count, out);
        },
        [&to, i](std::uint64_t first, std::uint64_t count, const std::uint32_t* in) {
          to.write_words(i, first, count, in);
        });
}

}  // namespace

scaling_filter scaling_filter::with_zeroed_levels(const scaling_config& config,
                                                  const std::vector<scaling_level>& levels,
                                                  const options& opts) {
  if (const char* problem = detail::config_problem(config))
    throw invalid_argument(std::string("scaling_filter: ") + problem);
  check_levels(config, levels);
  placed_chain placed = place(config.s, opts, levels);
  return scaling_filter(config, levels, std::move(placed.impl), std::move(placed.description));
}

scaling_filter scaling_filter::from_levels(const scaling_config& config,
                                           const std::vector<scaling_level>& levels,
                                           const std::vector<const std::uint32_t*>& words,
                                           const options& opts) {
  // The arguments are checked before any level is allocated.
  if (const char* problem = detail::config_problem(config))
    throw invalid_argument(std::string("scaling_filter: ") + problem);
  check_levels(config, levels);
  if (words.size() != levels.size())
    throw invalid_argument("from_levels: " + std::to_string(words.size()) + " word arrays for " +
                           std::to_string(levels.size()) + " levels");
  for (std::size_t i = 0; i < levels.size(); ++i)
    if (words[i] == nullptr)
      throw invalid_argument("from_levels: level " + std::to_string(i) + "'s words are null");
  scaling_filter f = with_zeroed_levels(config, levels, opts);
  for (std::size_t i = 0; i < levels.size(); ++i)
    f.impl().write_words(i, 0, levels[i].l.num_words(), words[i]);
  return f;
}

scaling_filter scaling_filter::copy_to(backend where, const options& opts) const {
  options target = opts;
  target.where = where;
  scaling_filter copy = with_zeroed_levels(config_, levels_, target);
  copy_levels(impl(), copy.impl(), levels_);
  return copy;
}

std::uint64_t scaling_filter::keys_inserted() const noexcept {
  std::uint64_t keys = 0;
  for (const scaling_level& level : levels_) keys += level.keys;
  return keys;
}

backend scaling_filter::where() const { return impl().kind(); }

void scaling_filter::synchronize() const { impl().synchronize("synchronize"); }

std::uint64_t scaling_filter::add_keys(const key_batch& keys, bool* is_new,
                                       const call_options& call) {
  const key_batch batch = detail::check_batch(call.what, keys);
  if (is_new != nullptr || call.answers) detail::check_results(call.what, batch, is_new);
  if (batch.count == 0) return 0;
  if (config_.policy.non_scaling) return add_bounded(batch, is_new, call);
  const std::uint64_t held_before = keys_inserted();
  // A level could not open mid-batch (its plan passed a limit, or its memory could
  // not be had): the keys inserted before stay (every level's count says so), the
  // rest do not. Say how many of each, the latter counted from the bits (one
  // probe, on this error path only), so that the caller knows what the chain holds.
  const auto what_went_in = [&](const char* problem, std::uint64_t& absent) {
    const std::uint64_t inserted = keys_inserted() - held_before;
    // count first: it synchronizes the stream, which waits for the validity
    // bitmap's producer, before keys_to_count copies the bitmap on another stream.
    const std::uint64_t present = impl().count(batch, nullptr, {call.what, call.stream, false});
    absent = detail::keys_to_count(batch) - present;
    return std::string(call.what) + ": " + problem + "; " + std::to_string(inserted) +
           " keys of the batch were inserted before it, " + std::to_string(absent) +
           " are not in the chain (contains() says which)";
  };
  try {
    return impl().add(batch, is_new, call, config_, levels_);
  } catch (const filter_full& e) {
    std::uint64_t absent = 0;
    const std::string message = what_went_in(e.what(), absent);
    throw filter_full(message, absent, 0);
  } catch (const allocation_error& e) {
    if (keys_inserted() == held_before) throw;  // nothing went in: the chain is as it was
    std::uint64_t absent = 0;
    throw allocation_error(what_went_in(e.what(), absent), e.bytes());
  }
}

// A non-scaling chain refuses an add that would pass its capacity before any
// of the filter's bits change. Three tests, each needed only when the cheaper
// one before cannot decide: the batch is no larger than the room; its keys
// absent now (one probe) are no more than the room (repeats and keys made
// present by earlier keys of the batch only lower the count); else the exact
// count, from the add itself run on a copy of the level, which replaces the
// level when it fits and is dropped when it does not. The copy costs the
// level's memory once more, for the duration of the call.
std::uint64_t scaling_filter::add_bounded(const key_batch& batch, bool* is_new,
                                          const call_options& call) {
  const scaling_level& only = levels_.front();
  const std::uint64_t room = only.capacity - only.keys;
  if (batch.count <= room) return impl().add(batch, is_new, call, config_, levels_);
  // count before keys_to_count (see add_keys' error path): a device validity
  // bitmap is read only once the stream, ordered after its producer, is done.
  const std::uint64_t present = impl().count(batch, nullptr, {call.what, call.stream, false});
  const std::uint64_t valid = detail::keys_to_count(batch);
  if (valid - present <= room) return impl().add(batch, is_new, call, config_, levels_);

  std::vector<scaling_level> trial = levels_;
  impl().begin_trial();
  std::uint64_t inserted = 0;
  try {
    inserted = impl().add(batch, is_new, call, config_, trial);
  } catch (...) {
    impl().end_trial(false);
    throw;
  }
  if (inserted > room) {
    impl().end_trial(false);
    throw filter_full(std::string(call.what) + ": non scaling filter is full: the batch holds at least " +
                          std::to_string(inserted) + " new keys but only " +
                          std::to_string(room) + " more fit (capacity " +
                          std::to_string(only.capacity) + ", " + std::to_string(only.keys) +
                          " inserted); nothing was added",
                      valid, room);
  }
  impl().end_trial(true);
  levels_ = std::move(trial);
  return inserted;
}

void scaling_filter::contains_keys(const key_batch& keys, bool* found,
                                   const call_options& call) const {
  detail::checked_contains(impl(), keys, found, call);
}

std::uint64_t scaling_filter::count_keys(const key_batch& keys, std::uint64_t* device_count,
                                         const call_options& call) const {
  return detail::checked_count(impl(), keys, device_count, call);
}

std::uint64_t scaling_filter::select_keys(const key_batch& keys, std::uint64_t* rows,
                                          std::uint64_t* device_count,
                                          const call_options& call) const {
  return detail::checked_select(impl(), keys, rows, device_count, call);
}

verify_report scaling_filter::verify_keys(const key_batch& keys, const bool* found) const {
  return detail::verify_answers(keys, found, [&](const key_batch& host_keys, bool* expected) {
    // The CPU twin of every level, probed with the scalar reference kernel.
    auto cpu = detail::make_cpu_scaling(config_.s, detail::scalar_twin_options(), nullptr);
    for (const scaling_level& level : levels_) cpu->push_level(level.l);
    copy_levels(impl(), *cpu, levels_);
    cpu->contains(host_keys, expected, {"verify_contains", nullptr, false});
  });
}

void scaling_filter::merge(const scaling_filter& other) {
  impl();  // a moved-from chain on either side throws, even where nothing would be copied
  other.impl();
  if (&other == this) return;  // x | x == x, and its keys are its own
  const scaling_config& a = config_;
  const scaling_config& b = other.config_;
  if (a.initial_capacity != b.initial_capacity || a.fpp != b.fpp ||
      a.policy.expansion != b.policy.expansion || a.policy.tightening != b.policy.tightening ||
      a.policy.non_scaling != b.policy.non_scaling || a.s.words_per_block != b.s.words_per_block ||
      a.s.bits_per_key != b.s.bits_per_key || a.s.seed != b.s.seed)
    throw layout_mismatch("cannot merge chains made from different configs (" +
                          config_differences(a, b) + ")");
  const std::size_t common = std::min(levels_.size(), other.levels_.size());
  for (std::size_t i = 0; i < common; ++i) {
    if (levels_[i].l != other.levels_[i].l)
      throw layout_mismatch("cannot merge chains whose level " + std::to_string(i) +
                            " layouts differ: " + to_string(levels_[i].l) + " vs " +
                            to_string(other.levels_[i].l));
    // The union holds at most keys_a + keys_b distinct keys; more than the
    // level's capacity and its FPR could pass its target.
    if (levels_[i].keys > levels_[i].capacity - other.levels_[i].keys)
      throw filter_full("cannot merge: " + describe_level(i, levels_[i]) + " and " +
                            describe_level(i, other.levels_[i]) +
                            " together may hold more keys than the level's capacity, which "
                            "would break the chain's false-positive bound (merge chains that "
                            "are at most half full, or add the keys of one to the other)",
                        0, levels_[i].capacity - levels_[i].keys);
  }
  // The other chain's words come over a step at a time through one staging
  // buffer (no copy of a whole level). The levels only `other` has come first,
  // then the ORs into the common levels (a GPU chain's first OR allocates its
  // device staging); a failure anywhere drops the pushed levels again and
  // changes no count, so a merge that fails for memory leaves this chain as it
  // was, but for bits an interrupted OR may have added (false positives, never
  // a lost key). The level list changes last, when nothing can fail.
  std::uint64_t most_words = 0;
  for (const scaling_level& level : other.levels_) most_words = std::max(most_words, level.l.num_words());
  std::vector<std::uint32_t> staging(static_cast<std::size_t>(std::min(detail::staging_words, most_words)));
  levels_.reserve(std::max(levels_.size(), other.levels_.size()));  // the last step cannot throw
  const auto for_each_step = [&](std::size_t level, const auto& apply) {
    detail::copy_in_steps(
        other.levels_[level].l.num_words(), staging.data(),
        [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
          other.impl().read_words(level, first, count, out);
        },
        apply);
  };
  std::size_t pushed = 0;
  try {
    for (std::size_t i = common; i < other.levels_.size(); ++i) {
      impl().push_level(other.levels_[i].l);
      ++pushed;
      for_each_step(i, [&](std::uint64_t first, std::uint64_t count, const std::uint32_t* in) {
        impl().write_words(i, first, count, in);
      });
    }
    for (std::size_t i = 0; i < common; ++i) {
      for_each_step(i, [&](std::uint64_t first, std::uint64_t count, const std::uint32_t* in) {
        impl().or_words(i, first, count, in);
      });
    }
  } catch (...) {
    for (; pushed > 0; --pushed) impl().pop_level();
    throw;
  }
  for (std::size_t i = 0; i < common; ++i) levels_[i].keys = detail::saturating_add(levels_[i].keys, other.levels_[i].keys);
  for (std::size_t i = common; i < other.levels_.size(); ++i) levels_.push_back(other.levels_[i]);
}

scaling_stats scaling_filter::stats() const {
  const detail::scaling_backend& chain = impl();
  scaling_stats s;
  s.num_levels = levels_.size();
  s.expansion = config_.policy.non_scaling ? 0 : config_.policy.expansion;
  s.fpp = config_.fpp;
  double none = 1;  // probability that no level answers a false positive
  for (std::size_t i = 0; i < levels_.size(); ++i) {
    scaling_level_stats level;
    level.level = levels_[i];
    level.bits_set = chain.popcount(i);
    level.fill_ratio =
        static_cast<double>(level.bits_set) / static_cast<double>(levels_[i].l.num_bits());
    level.fpr = levels_[i].keys == 0
                    ? 0
                    : expected_fpr(levels_[i].l, static_cast<double>(levels_[i].keys));
    none *= 1 - level.fpr;
    s.capacity += levels_[i].capacity;
    s.size_bytes += levels_[i].l.size_bytes();
    s.keys_inserted += levels_[i].keys;
    s.levels.push_back(level);
  }
  s.compound_fpr = 1 - none;
  return s;
}

std::vector<std::uint32_t> scaling_filter::level_words(std::size_t level) const {
  if (level >= levels_.size())
    throw invalid_argument("level_words: level " + std::to_string(level) + " does not exist (" +
                           std::to_string(levels_.size()) + " levels)");
  std::vector<std::uint32_t> out(levels_[level].l.num_words());
  impl().read_words(level, 0, out.size(), out.data());
  return out;
}

void scaling_filter::copy_level_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                                      std::uint32_t* out) const {
  if (level >= levels_.size())
    throw invalid_argument("copy_level_words: level " + std::to_string(level) + " does not exist (" +
                           std::to_string(levels_.size()) + " levels)");
  detail::check_word_range("copy_level_words", first, count, levels_[level].l.num_words(), out);
  if (count > 0) impl().read_words(level, first, count, out);
}

}  // namespace gbf
