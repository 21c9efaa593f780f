// The automatic backend: a GPU copy of the bits, a CPU mirror, and a router.
//
// Each copy is current (holds every key added so far), behind (misses the
// adds in its log, host batches that ran on the other copy) or stale (must be
// copied whole from the other). At least one copy is always current: a batch
// runs only on a copy brought up to date first, and a write leaves the other
// behind (its log gains the keys) or, once the log outgrows its bound or the
// keys were in device memory, stale.
//
// Routing a host batch of n keys: each copy's price is its catch-up cost
// (0 / replaying the log or copying, whichever is cheaper / copying) plus the
// call's cost from the model; the batch goes to the cheaper one. A stale copy
// is bought like skis in the ski-rental problem: every batch the other copy
// ran although this one would have been cheaper adds the difference to this
// copy's regret, and once the regret reaches the price of a copy, the copy is
// made. The time lost to a wrong guess about the future (the small batches
// stop coming) is then at most the price of that one copy, so routing costs at
// most twice the best choice made in hindsight.
//
// Device batches and the _async calls always run on the GPU copy, and so does
// everything once device_words() has given out its address.
#include "host/hybrid_backend.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <utility>
#include <vector>

#include "gbf/error.hpp"

namespace gbf::detail {
namespace {

constexpr double never = std::numeric_limits<double>::infinity();

/// Host batches one copy missed: integer keys by width, string keys (nulls
/// dropped) as one int64-offset batch; replayed as up to three adds, since an
/// add commutes with every other add.
class add_log {
 public:
  std::size_t bytes() const noexcept {
    return u32_.size() * 4 + u64_.size() * 8 + offsets_.size() * 8 + string_bytes_.size();
  }
  std::size_t u32_keys() const noexcept { return u32_.size(); }
  std::size_t u64_keys() const noexcept { return u64_.size(); }
  std::size_t string_keys() const noexcept { return offsets_.size() - 1; }
  std::size_t string_bytes() const noexcept { return string_bytes_.size(); }

  /// Appends the non-null keys of a host batch. May throw bad_alloc, after which
  /// the log is inconsistent and must be cleared.
  void append(const key_batch& keys) {
    switch (keys.kind) {
      case key_kind::u32: {
        const auto* k = static_cast<const std::uint32_t*>(keys.data);
        u32_.insert(u32_.end(), k, k + keys.count);
        break;
      }
      case key_kind::u64: {
        const auto* k = static_cast<const std::uint64_t*>(keys.data);
        u64_.insert(u64_.end(), k, k + keys.count);
        break;
      }
      case key_kind::str32:
      case key_kind::str64: {
        const auto* data = static_cast<const unsigned char*>(keys.data);
        for (std::size_t i = 0; i < keys.count; ++i) {
          if (!key_valid(keys.validity, keys.validity_bit, i)) continue;
          const std::int64_t begin = offset_at(keys, i);
          const std::int64_t end = offset_at(keys, i + 1);
          string_bytes_.insert(string_bytes_.end(), data + begin, data + end);
          offsets_.push_back(static_cast<std::int64_t>(string_bytes_.size()));
        }
        break;
      }
    }
  }

  /// The logged keys as host batches (at most one per key kind).
  std::vector<key_batch> batches() const {
    std::vector<key_batch> out;
    if (!u32_.empty()) out.push_back(integer_batch(u32_.data(), u32_.size(), key_kind::u32));
    if (!u64_.empty()) out.push_back(integer_batch(u64_.data(), u64_.size(), key_kind::u64));
    if (offsets_.size() > 1) {
      key_batch b;
      b.kind = key_kind::str64;
      b.count = offsets_.size() - 1;
      b.offsets = offsets_.data();
      b.data = string_bytes_.data();
      b.data_bytes = string_bytes_.size();
      out.push_back(b);
    }
    return out;
  }

  void clear() {
    // Release the memory too: a log can grow to its bound.
    std::vector<std::uint32_t>().swap(u32_);
    std::vector<std::uint64_t>().swap(u64_);
    std::vector<std::int64_t>{0}.swap(offsets_);
    std::vector<unsigned char>().swap(string_bytes_);
  }

 private:
  static key_batch integer_batch(const void* data, std::size_t count, key_kind kind) {
    key_batch b;
    b.kind = kind;
    b.count = count;
    b.data = data;
    return b;
  }

  std::vector<std::uint32_t> u32_;
  std::vector<std::uint64_t> u64_;
  std::vector<std::int64_t> offsets_{0};
  std::vector<unsigned char> string_bytes_;
};

enum class freshness { current, behind, stale };

/// Adds (add, add_new) or probes (contains, count, select): the two cost rows of the model.
enum class work { add, probe };

struct replica {
  std::unique_ptr<backend_impl> impl;  // the mirror's is null until it is first made
  freshness state = freshness::current;
  add_log missed;       // behind: the adds this copy has not seen
  double regret_s = 0;  // stale: seconds lost so far by not having this copy
  bool is_gpu = false;
};

/// String bytes of a host string batch (0 for integer keys and device batches).
double string_bytes(const key_batch& keys) {
  if (!keys.is_string() || keys.space != memory_space::host || keys.count == 0) return 0;
  return static_cast<double>(offset_at(keys, keys.count) - offset_at(keys, 0));
}

class hybrid_backend final : public backend_impl {
 public:
  hybrid_backend(std::unique_ptr<backend_impl> gpu, mirror_factory make_mirror,
                 const cost_model& model, std::uint64_t mirror_limit_bytes)
      : make_mirror_(std::move(make_mirror)),
        point_(model.at(gpu->get_layout().size_bytes())),
        copy_(model.copy) {
    gpu_.impl = std::move(gpu);
    gpu_.is_gpu = true;
    cpu_.state = freshness::stale;
    const std::uint64_t bytes = layout_bytes();
    log_limit_bytes_ = std::clamp<std::uint64_t>(bytes, std::uint64_t{1} << 20, std::uint64_t{256} << 20);
    stats_.mirrored = true;
    if (bytes > mirror_limit_bytes) {
      mirror_off("the bit array (" + std::to_string(bytes >> 20) + " MiB) is larger than the mirror limit (" +
                 std::to_string(mirror_limit_bytes >> 20) + " MiB, a quarter of host memory)");
    }
  }

  backend kind() const noexcept override { return gpu_.impl->kind(); }
  const layout& get_layout() const noexcept override { return gpu_.impl->get_layout(); }

  void add(const key_batch& keys) override {
    replica& r = route(keys, work::add, "add");
    write_on(r, [&] { r.impl->add(keys); });
    after_write(r, keys);
  }

  void add_new(const key_batch& keys, bool* is_new) override {
    replica& r = route(keys, work::add, "add_new");
    write_on(r, [&] { r.impl->add_new(keys, is_new); });
    after_write(r, keys);
  }

  void contains(const key_batch& keys, bool* found) const override {
    replica& r = route(keys, work::probe, "contains");
    r.impl->contains(keys, found);
    after_read(r);
  }

  std::uint64_t count(const key_batch& keys) const override {
    replica& r = route(keys, work::probe, "count");
    const std::uint64_t hits = r.impl->count(keys);
    after_read(r);
    return hits;
  }

  std::uint64_t select(const key_batch& keys, std::uint64_t* rows) const override {
    replica& r = route(keys, work::probe, "select");
    const std::uint64_t hits = r.impl->select(keys, rows);
    after_read(r);
    return hits;
  }

  void clear() override {
    reset_both([](backend_impl& copy) { copy.clear(); });
  }

  void write_words(const std::uint32_t* in) override {
    reset_both([in](backend_impl& copy) { copy.write_words(in); });
  }

  // `other` is a GPU backend (what current_on(gpu) gave): the set operation runs there.
  void combine(const backend_impl& other, set_op op) override {
    bring_current(gpu_);
    make_stale(cpu_);
    gpu_.impl->combine(other, op);
  }

  void combine_host(const std::uint32_t* words, set_op op) override {
    bring_current(gpu_);
    // A current mirror takes the same operation (a memory pass); a log would not
    // commute with an intersection, so a behind mirror is dropped to stale.
    const bool mirror_too = cpu_.state == freshness::current;
    make_stale(cpu_);
    gpu_.impl->combine_host(words, op);
    if (mirror_too) {
      cpu_.impl->combine_host(words, op);
      cpu_.state = freshness::current;
    }
  }

  std::uint64_t popcount() const override {
    return current_copy().popcount();
  }

  void read_words(std::uint32_t* out) const override {
    // The mirror, when current, is a memcpy away.
    (cpu_.state == freshness::current ? cpu_ : gpu_).impl->read_words(out);
  }

  // A bad _async string batch is reported by the GPU backend at its next
  // synchronous call; async_strings_ makes sure there is one even when the
  // next batch runs on the mirror.
  void add_async(const key_batch& keys, stream_t stream) override {
    backend_impl& gpu = *run_on_gpu().impl;
    if (keys.count != 0) make_stale(cpu_);
    gpu.add_async(keys, stream);
    async_strings_ = async_strings_ || keys.is_string();
  }
  void contains_async(const key_batch& keys, bool* found, stream_t stream) const override {
    run_on_gpu().impl->contains_async(keys, found, stream);
    async_strings_ = async_strings_ || keys.is_string();
  }
  void count_async(const key_batch& keys, std::uint64_t* count, stream_t stream) const override {
    run_on_gpu().impl->count_async(keys, count, stream);
    async_strings_ = async_strings_ || keys.is_string();
  }
  void select_async(const key_batch& keys, std::uint64_t* rows, std::uint64_t* count,
                    stream_t stream) const override {
    run_on_gpu().impl->select_async(keys, rows, count, stream);
    async_strings_ = async_strings_ || keys.is_string();
  }

  void synchronize(const char* what) const override {
    async_strings_ = false;
    gpu_.impl->synchronize(what);
  }

  // The caller's kernels may write through this address (device_ref::add), and
  // nothing tells the mirror: from here on the GPU copy is the only one.
  const std::uint32_t* device_words() const override {
    bring_current(gpu_);
    if (mirror_usable()) mirror_off("device_words() gave out the GPU copy's address, which kernels may write");
    return gpu_.impl->device_words();
  }

  const backend_impl* current_on(backend where) const override {
    if (where == gpu_.impl->kind()) {
      bring_current(gpu_);
      return gpu_.impl.get();
    }
    return cpu_.state == freshness::current && cpu_.impl->kind() == where ? cpu_.impl.get() : nullptr;
  }

  dispatch_stats dispatch() const override { return stats_; }

 private:
  std::uint64_t layout_bytes() const { return gpu_.impl->get_layout().size_bytes(); }
  double copy_seconds() const { return copy_.seconds(static_cast<double>(layout_bytes())); }
  bool mirror_usable() const { return stats_.mirror_note.empty(); }

  const call_cost& cost_row(const replica& r, work w) const {
    if (r.is_gpu) return w == work::add ? point_.gpu_add : point_.gpu_probe;
    return w == work::add ? point_.cpu_add : point_.cpu_probe;
  }

  double call_seconds(const replica& r, work w, const key_batch& keys) const {
    return cost_row(r, w).seconds(static_cast<double>(keys.count), string_bytes(keys));
  }

  /// The adds of r's log, one call per key kind in it.
  double replay_seconds(const replica& r) const {
    const call_cost& add = cost_row(r, work::add);
    const add_log& log = r.missed;
    double s = 0;
    if (log.u32_keys()) s += add.seconds(static_cast<double>(log.u32_keys()));
    if (log.u64_keys()) s += add.seconds(static_cast<double>(log.u64_keys()));
    if (log.string_keys())
      s += add.seconds(static_cast<double>(log.string_keys()), static_cast<double>(log.string_bytes()));
    return s;
  }

  /// What bringing `r` up to date costs now.
  double catch_up_seconds(const replica& r) const {
    switch (r.state) {
      case freshness::current: return 0;
      case freshness::behind: return std::min(replay_seconds(r), copy_seconds());
      case freshness::stale: return copy_seconds();
    }
    return never;
  }

  replica& other_of(const replica& r) const { return &r == &gpu_ ? cpu_ : gpu_; }

  backend_impl& current_copy() const {
    return *(gpu_.state == freshness::current ? gpu_ : cpu_).impl;
  }

  /// Picks the copy a batch runs on and brings it up to date. `what` names the
  /// operation in a deferred error of an earlier _async string call.
  replica& route(const key_batch& keys, work w, const char* what) const {
    if (async_strings_) synchronize(what);
    const bool gpu_only = keys.space == memory_space::device || !mirror_usable();
    if (gpu_only) return run_on_gpu();
    const double gpu_s = catch_up_seconds(gpu_) + call_seconds(gpu_, w, keys);
    const double cpu_s = catch_up_seconds(cpu_) + call_seconds(cpu_, w, keys);
    replica& chosen = cpu_s < gpu_s ? cpu_ : gpu_;
    replica& other = other_of(chosen);
    if (other.state == freshness::stale)
      other.regret_s += std::max(0.0, std::min(gpu_s, cpu_s) - call_seconds(other, w, keys));
    if (!chosen.is_gpu && !have_mirror()) return run_on_gpu();
    bring_current(chosen);
    ++(chosen.is_gpu ? stats_.gpu_batches : stats_.cpu_batches);
    return chosen;
  }

  replica& run_on_gpu() const {
    bring_current(gpu_);
    ++stats_.gpu_batches;
    return gpu_;
  }

  /// Runs a write on `r`. A write that fails partway may have set some of its
  /// bits on r and none on the other copy: r, a superset of what the other
  /// holds, stays the one current copy.
  template <class Write>
  void write_on(replica& r, Write&& write) {
    try {
      write();
    } catch (...) {
      make_stale(other_of(r));
      throw;
    }
  }

  /// The copy that ran a write is current; the other misses these keys.
  void after_write(replica& ran, const key_batch& keys) {
    replica& other = other_of(ran);
    if (other.state == freshness::stale || keys.space == memory_space::device ||
        other.missed.bytes() + log_bytes(keys) > log_limit_bytes_) {
      make_stale(other);
    } else {
      try {
        other.missed.append(keys);
        other.state = freshness::behind;
      } catch (const std::bad_alloc&) {
        make_stale(other);  // no room for the log: a copy will catch it up instead
      }
    }
    after_read(ran);
  }

  /// Buys the other copy once the regret of not having it reaches its price.
  /// The batch itself has succeeded: a copy that fails leaves the other copy
  /// stale and starts its regret afresh, and does not fail the call.
  void after_read(const replica& ran) const {
    replica& other = other_of(ran);
    if (other.state != freshness::stale || other.regret_s < copy_seconds()) return;
    if (!other.is_gpu && !have_mirror()) return;
    try {
      copy_into(other);
    } catch (const error&) {
      other.regret_s = 0;
    } catch (const std::bad_alloc&) {
      other.regret_s = 0;
    }
  }

  static std::size_t log_bytes(const key_batch& keys) {
    switch (keys.kind) {
      case key_kind::u32: return keys.count * 4;
      case key_kind::u64: return keys.count * 8;
      default: return keys.count * 8 + static_cast<std::size_t>(string_bytes(keys));
    }
  }

  void make_stale(replica& r) const {
    r.missed.clear();
    r.state = freshness::stale;
  }

  /// Makes `r` current: replays its log or copies the whole array, whichever the model prices lower.
  void bring_current(replica& r) const {
    if (r.state == freshness::current) return;
    if (r.state == freshness::behind && replay_seconds(r) <= copy_seconds()) {
      for (const key_batch& b : r.missed.batches()) r.impl->add(b);
      ++stats_.replays;
      r.missed.clear();
      r.state = freshness::current;
      return;
    }
    copy_into(r);
  }

  /// Copies the other (current) copy's words into `r`.
  void copy_into(replica& r) const {
    backend_impl& from = *other_of(r).impl;
    backend_impl& to = *r.impl;
    if (std::uint32_t* host = to.host_words()) {
      from.read_words(host);
    } else if (std::uint32_t* source = from.host_words()) {
      to.write_words(source);
    } else {
      std::vector<std::uint32_t> staged(get_layout().num_words());
      from.read_words(staged.data());
      to.write_words(staged.data());
    }
    ++(r.is_gpu ? stats_.copies_to_gpu : stats_.copies_to_cpu);
    r.missed.clear();
    r.regret_s = 0;
    r.state = freshness::current;
  }

  /// Makes the mirror if it does not exist yet; false (and the mirror off for good) when it cannot be.
  bool have_mirror() const {
    if (cpu_.impl) return true;
    if (!mirror_usable()) return false;
    try {
      cpu_.impl = make_mirror_();
    } catch (const allocation_error& e) {
      mirror_off(std::string("the mirror could not be allocated: ") + e.what());
    } catch (const std::bad_alloc&) {
      mirror_off("the mirror could not be allocated (" + std::to_string(layout_bytes()) + " bytes)");
    }
    return cpu_.impl != nullptr;
  }

  void mirror_off(const std::string& why) const {
    stats_.mirror_note = "CPU mirror off: " + why;
    cpu_.impl.reset();
    make_stale(cpu_);
  }

  /// clear / write_words: `apply` replaces every bit, on the GPU copy and on an
  /// existing mirror; the mirror is current again only once its apply has succeeded.
  template <class Apply>
  void reset_both(Apply&& apply) {
    make_stale(cpu_);
    // Whatever apply leaves on the GPU, even if it fails partway, is the filter now.
    gpu_.missed.clear();
    gpu_.regret_s = 0;
    gpu_.state = freshness::current;
    apply(*gpu_.impl);
    if (cpu_.impl) {
      apply(*cpu_.impl);
      cpu_.regret_s = 0;
      cpu_.state = freshness::current;
    }
  }

  // Reads may bring a copy up to date or make the mirror: the bits a caller
  // sees never change, so these are mutable state of const calls.
  mutable replica gpu_;
  mutable replica cpu_;
  mutable dispatch_stats stats_;
  mutable bool async_strings_ = false;  // an _async string call not yet checked by synchronize()
  mirror_factory make_mirror_;
  cost_point point_;
  copy_cost copy_;
  std::uint64_t log_limit_bytes_ = 0;
};

}  // namespace

std::unique_ptr<backend_impl> make_hybrid_backend(std::unique_ptr<backend_impl> gpu,
                                                  mirror_factory make_mirror,
                                                  const cost_model& model,
                                                  std::uint64_t mirror_limit_bytes) {
  if (const std::string bad = model.problem(); !bad.empty())
    throw invalid_argument("cost model (" + model.source + "): " + bad);
  return std::make_unique<hybrid_backend>(std::move(gpu), std::move(make_mirror), model,
                                          mirror_limit_bytes);
}

std::uint64_t default_mirror_limit_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return std::uint64_t{1} << 30;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_bytes) / 4;
}

}  // namespace gbf::detail
