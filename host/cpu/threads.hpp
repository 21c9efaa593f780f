// Splitting a CPU batch over threads, for every filter kind: contiguous ranges
// of keys (of equal work) or of blocks, each run on a thread of its own, or a
// team of threads that meet at a barrier between rounds.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "gbf/keys.hpp"
#include "host/cpu/thread_pool.hpp"
#include "host/keys.hpp"

namespace gbf::detail::cpu {

/// Keys below which one more CPU thread costs more than it saves (waking a
/// parked worker, or starting a thread, is 10-50 us; 2^16 keys take 70-180
/// us): a batch under 2 * min_keys_per_thread runs on one thread.
inline constexpr std::uint64_t min_keys_per_thread = std::uint64_t{1} << 16;
/// Words (4 MiB) below which whole-array work (popcount, merge) stays on fewer threads.
inline constexpr std::uint64_t min_words_per_thread = std::uint64_t{1} << 20;

/// Start of part `part` when [0, n) is cut into `parts` contiguous ranges whose
/// sizes differ by at most one (no n * part product, so no overflow).
inline std::uint64_t part_begin(std::uint64_t n, unsigned parts, unsigned part) {
  return n / parts * part + std::min<std::uint64_t>(part, n % parts);
}

/// `parts` contiguous ranges of [0, n) whose sizes differ by at most one.
inline std::vector<std::uint64_t> even_bounds(unsigned parts, std::uint64_t n) {
  std::vector<std::uint64_t> bounds(parts + 1);
  for (unsigned part = 0; part <= parts; ++part) bounds[part] = part_begin(n, parts, part);
  return bounds;
}

/// Worker threads, all joined when this goes out of scope (an exception
/// leaving the scope included).
struct joined_threads {
  std::vector<std::thread> threads;
  explicit joined_threads(std::size_t expected) { threads.reserve(expected); }
  ~joined_threads() {
    for (std::thread& t : threads) t.join();
  }
  joined_threads(const joined_threads&) = delete;
  joined_threads& operator=(const joined_threads&) = delete;
};

/// Calls fn(part, begin, end) for each range [bounds[part], bounds[part + 1]):
/// part 0 on the calling thread, the others on the process's thread_pool
/// (where a worker starts late, the calling thread runs its part) or, where
/// the pool cannot serve the call, on threads started for it. A thread that
/// cannot be started leaves its part to the calling thread: the work is done
/// either way.
template <class Fn>
void run_in_ranges(const std::vector<std::uint64_t>& bounds, const Fn& fn) {
  const auto parts = static_cast<unsigned>(bounds.size() - 1);
  if (parts == 1) {
    fn(0u, bounds[0], bounds[1]);
    return;
  }
  const auto part_of = [&](unsigned part) { fn(part, bounds[part], bounds[part + 1]); };
  if (thread_pool::instance().run(parts, part_of)) return;
  joined_threads workers(parts - 1);
  unsigned started = parts;  // parts [1, started) run on threads of their own
  {
    const process_signals_blocked blocked;  // inherited by the threads, as by the pool's
    for (unsigned part = 1; part < parts; ++part) {
      const std::uint64_t begin = bounds[part];
      const std::uint64_t end = bounds[part + 1];
      try {
        workers.threads.emplace_back([&fn, part, begin, end] { fn(part, begin, end); });
      } catch (const std::system_error&) {
        started = part;
        break;
      }
    }
  }
  for (unsigned part = started; part < parts; ++part) fn(part, bounds[part], bounds[part + 1]);
  fn(0u, bounds[0], bounds[1]);
}

/// A reusable barrier for a team of threads that meet many times a call (a
/// threaded add meets once per chunk). A waiter spins briefly first: rounds
/// are balanced, so the others usually arrive within microseconds, and a
/// condition variable's wake-up costs tens of them. Then it sleeps, which is
/// what a thread descheduled on a shared machine needs of the others.
class team_barrier {
 public:
  explicit team_barrier(unsigned count) : count_(count) {}

  /// Blocks until all `count` threads have called it; every write made before
  /// the call by any of them is visible after it to all of them.
  void arrive_and_wait() {
    const unsigned generation = generation_.load(std::memory_order_acquire);
    // acq_rel: the last arrival acquires every earlier one's writes, then
    // publishes them all with the release store of the next generation.
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
      arrived_.store(0, std::memory_order_relaxed);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        generation_.store(generation + 1, std::memory_order_release);
      }
      wake_.notify_all();
      return;
    }
    for (int spin = 0; spin < spins_before_sleep; ++spin) {
      if (generation_.load(std::memory_order_acquire) != generation) return;
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != generation; });
  }

 private:
  static constexpr int spins_before_sleep = 500;
  const unsigned count_;
  std::atomic<unsigned> arrived_{0};
  std::atomic<unsigned> generation_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
};

/// Runs fn(part, barrier) on `parts` threads at once (part 0 on the calling
/// thread), which may meet at `barrier` (a team_barrier of `parts`). Unlike
/// run_in_ranges, no part can be left to another thread: the parts wait for
/// one another. So either every thread starts and the call returns true after
/// all parts ran, or some thread cannot be started, none of fn runs, and it
/// returns false (the caller then does the work another way). fn must not throw.
template <class Fn>
bool run_team(unsigned parts, const Fn& fn) {
  team_barrier barrier(parts);
  // The pool runs every part at once, on threads of their own, as the barrier needs.
  if (thread_pool::instance().run_together(parts, [&](unsigned part) { fn(part, barrier); }))
    return true;
  std::mutex gate_mutex;
  std::condition_variable gate;
  enum class start { wait, go, abort } state = start::wait;
  const auto open_gate = [&](start to) {
    {
      std::lock_guard<std::mutex> lock(gate_mutex);
      state = to;
    }
    gate.notify_all();
  };
  joined_threads workers(parts - 1);  // after the gate: joined before it goes
  {
    const process_signals_blocked blocked;  // inherited by the threads, as by the pool's
    for (unsigned part = 1; part < parts; ++part) {
      try {
        workers.threads.emplace_back([&, part] {
          {
            std::unique_lock<std::mutex> lock(gate_mutex);
            gate.wait(lock, [&] { return state != start::wait; });
            if (state == start::abort) return;
          }
          fn(part, barrier);
        });
      } catch (const std::system_error&) {
        open_gate(start::abort);
        return false;
      }
    }
  }
  open_gate(start::go);
  fn(0u, barrier);
  return true;
}

/// Calls fn(part, begin, end) for each of `parts` even ranges of [0, n) (see run_in_ranges).
template <class Fn>
void run_in_parts(unsigned parts, std::uint64_t n, const Fn& fn) {
  run_in_ranges(even_bounds(parts, n), fn);
}

/// What hashing a string costs, in "keys": one per key plus one per this many bytes
/// (xxh64 runs at a few GB/s; a probe costs about what hashing 16 bytes does).
inline constexpr std::uint64_t bytes_per_key_cost = 16;

/// The work of keys [0, i) of a batch: i, plus (bytes before key i) / 16 for strings.
inline std::uint64_t key_work(const key_batch& keys, std::size_t i) {
  if (!keys.is_string()) return i;
  const auto bytes = static_cast<std::uint64_t>(offset_at(keys, i) - offset_at(keys, 0));
  return i + bytes / bytes_per_key_cost;
}

/// `parts` contiguous key ranges of equal work: even by count for integers, by
/// count and bytes for strings (a batch with a few long strings among many short
/// ones would otherwise leave one thread hashing the long ones alone). Offsets
/// are non-decreasing, so work is monotone in i and each cut is a binary search.
inline std::vector<std::uint64_t> key_bounds(const key_batch& keys, unsigned parts) {
  if (!keys.is_string() || parts == 1) return even_bounds(parts, keys.count);
  std::vector<std::uint64_t> bounds(parts + 1);
  const std::uint64_t total = key_work(keys, keys.count);
  bounds[0] = 0;
  bounds[parts] = keys.count;
  for (unsigned part = 1; part < parts; ++part) {
    const std::uint64_t target = part_begin(total, parts, part);
    std::uint64_t lo = bounds[part - 1], hi = keys.count;  // first i with work(i) >= target
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (key_work(keys, mid) < target) lo = mid + 1; else hi = mid;
    }
    bounds[part] = lo;
  }
  return bounds;
}

/// Threads worth using for `work` items when each should get at least
/// `min_per_thread`, capped at `threads`.
inline unsigned parts_for(std::uint64_t work, std::uint64_t min_per_thread, unsigned threads) {
  return static_cast<unsigned>(std::clamp<std::uint64_t>(work / min_per_thread, 1, threads));
}

}  // namespace gbf::detail::cpu
