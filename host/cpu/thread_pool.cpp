#include "host/cpu/thread_pool.hpp"

#include <chrono>
#include <system_error>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GBF_SPIN_PAUSE() _mm_pause()
#else
#define GBF_SPIN_PAUSE() std::this_thread::yield()
#endif

namespace gbf::detail::cpu {
namespace {

/// How long a worker polls for its next job before it sleeps: back-to-back
/// calls (a loop over batches) then find it awake, and an idle core burns at
/// most this much after a call. 2-vCPU VM, 2 threads adding 10^6 keys to a
/// 512 KiB filter call after call: 100 us and 20 us both 0.56 ms a call,
/// 0 us (sleep at once) 1.02 ms (docs/cpu.md, session 16).
constexpr auto worker_spin = std::chrono::microseconds(20);
/// How long a caller done with its parts polls for the workers' before it sleeps.
constexpr auto caller_spin = std::chrono::microseconds(100);

/// Polls `ready` for up to `spin`; whether it became true.
template <class Ready>
bool spin_until(const Ready& ready, std::chrono::microseconds spin) {
  const auto give_up = std::chrono::steady_clock::now() + spin;
  for (;;) {
    // The clock is read once per 64 polls (a read costs about as much as 64 pauses).
    for (int poll = 0; poll < 64; ++poll) {
      if (ready()) return true;
      GBF_SPIN_PAUSE();
    }
    if (std::chrono::steady_clock::now() >= give_up) return ready();
  }
}

/// The pool whose call this thread is serving, as a worker or as the caller
/// (null otherwise): such a thread's own calls on that pool are declined.
thread_local const thread_pool* serving_pool = nullptr;

// The process's pool: leaked on purpose (parked workers need no joining at
// exit, and no static destructor can run before a late user of the pool).
//
// fork() while another thread is inside instance() handed the child its lock
// held by a thread the child does not have, and the child's first threaded
// call waited forever (about 1 fork in 400 with threads creating filters): the
// lock is held across fork() and released on both sides. Nothing here is a
// function-local static either: a child forked while another thread ran the
// first instance() inherited that static's initialization guard taken, and
// waited on it forever (the CUDA build's test, 1 run in 5). The mutex is
// constant-initialized and the handlers are registered while the library
// loads, before any thread can call instance().
std::mutex instance_mutex;
thread_pool* instance_pool = nullptr;
#if defined(__unix__) || defined(__APPLE__)
pid_t instance_owner = 0;
const int fork_handlers = ::pthread_atfork([] { instance_mutex.lock(); }, [] { instance_mutex.unlock(); },
                                           [] { instance_mutex.unlock(); });
#endif

/// claim_'s packing: job number, parts, next unclaimed part.
constexpr std::uint64_t claimable(std::uint64_t job, unsigned parts, unsigned next) {
  return (job & 0xffffffffu) << 32 | std::uint64_t{parts} << 16 | next;
}

}  // namespace

thread_pool& thread_pool::instance() {
  std::lock_guard<std::mutex> lock(instance_mutex);
#if defined(__unix__) || defined(__APPLE__)
  if (instance_pool == nullptr || instance_owner != ::getpid()) {
    // After fork() the old pool's workers are gone (and its mutexes may be
    // held by threads that no longer exist): leave it, start a new one.
    instance_pool = new thread_pool();
    instance_owner = ::getpid();
  }
#else
  if (instance_pool == nullptr) instance_pool = new thread_pool();
#endif
  return *instance_pool;
}

thread_pool::~thread_pool() {
  for (auto& w : workers_) {
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->stop = true;
    }
    w->wake.notify_one();
  }
  for (auto& w : workers_) w->thread.join();
}

bool thread_pool::grow_to(unsigned count) {
  while (workers_.size() < count) {
    auto w = std::make_unique<worker>();
    worker& self = *w;
    const auto index = static_cast<unsigned>(workers_.size());
    try {
      const process_signals_blocked blocked;
      w->thread = std::thread([this, &self, index] {
#if defined(__linux__)
        ::pthread_setname_np(::pthread_self(), "gbf-worker");
#endif
        work(self, index);
      });
    } catch (const std::system_error&) {
      return false;
    }
    workers_.push_back(std::move(w));
  }
  return true;
}

bool thread_pool::run_parts(unsigned parts, part_fn fn, const void* context, bool together) {
  // parts - 1 <= max_workers < 2^16: parts fits claim_'s 16 bits.
  if (parts < 2 || parts - 1 > max_workers || serving_pool == this) return false;
  std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
  if (!busy.owns_lock() || !grow_to(parts - 1)) return false;
  const thread_pool* const served_before = serving_pool;
  serving_pool = this;  // a part calling back into the pool is declined, not deadlocked
  const std::uint64_t job = ++jobs_;
  fn_ = fn;
  context_ = context;
  error_ = nullptr;
  pending_.store(parts - 1, std::memory_order_relaxed);
  // A job run together has nothing to claim: each worker runs its own part.
  claim_.store(claimable(job, parts, together ? parts : 1), std::memory_order_release);
  for (unsigned i = 0; i + 1 < parts; ++i) {
    worker& w = *workers_[i];
    {
      // Under the worker's mutex, so a worker between its last poll and its
      // sleep cannot miss the ticket.
      std::lock_guard<std::mutex> lock(w.mutex);
      w.ticket.store(job * 2 + (together ? 1 : 0), std::memory_order_release);
    }
    w.wake.notify_one();
  }
  std::exception_ptr error;
  try {
    fn(context, 0);
  } catch (...) {
    error = std::current_exception();
  }
  // Parts whose worker has not started yet (asleep on a slow core, or busy)
  // run here rather than being waited for.
  for (unsigned part = 0; claim(job, part);) run_part(part);
  // Every part must have returned before the caller's frame (the context) goes.
  const auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done, caller_spin)) {
    std::unique_lock<std::mutex> lock(done_mutex_);
    done_.wait(lock, done);
  }
  {
    std::lock_guard<std::mutex> lock(done_mutex_);
    if (error == nullptr) error = error_;
  }
  serving_pool = served_before;
  busy.unlock();
  if (error != nullptr) std::rethrow_exception(error);
  return true;
}

bool thread_pool::claim(std::uint64_t job, unsigned& part) {
  std::uint64_t state = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (state >> 32 != (job & 0xffffffffu)) return false;  // that job is over
    const auto parts = static_cast<unsigned>(state >> 16 & 0xffffu);
    const auto next = static_cast<unsigned>(state & 0xffffu);
    if (next >= parts) return false;
    // acquire: the job's fn_ and context_, written before claim_ was stored.
    if (claim_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      part = next;
      return true;
    }
  }
}

void thread_pool::run_part(unsigned part) {
  try {
    fn_(context_, part);
  } catch (...) {
    std::lock_guard<std::mutex> lock(done_mutex_);
    if (error_ == nullptr) error_ = std::current_exception();
  }
  // acq_rel: the caller's acquire of 0 sees every part's writes.
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // Under the mutex, so a caller between its last poll and its sleep cannot miss it.
    { std::lock_guard<std::mutex> lock(done_mutex_); }
    done_.notify_one();
  }
}

void thread_pool::work(worker& self, unsigned index) {
  serving_pool = this;
  std::uint64_t seen = 0;
  const auto moved = [&] { return self.ticket.load(std::memory_order_acquire) != seen; };
  for (;;) {
    if (!spin_until(moved, worker_spin)) {
      std::unique_lock<std::mutex> lock(self.mutex);
      self.wake.wait(lock, [&] { return self.stop || moved(); });
      if (self.stop) return;
    }
    // The newest ticket: a worker that woke too late for a job whose parts
    // others ran skips it. A job run together waits for this worker's part,
    // so its ticket is always the newest one when the worker reads it.
    seen = self.ticket.load(std::memory_order_acquire);
    if (seen % 2 == 1) {
      run_part(index + 1);
    } else {
      for (unsigned part = 0; claim(seen / 2, part);) run_part(part);
    }
  }
}

}  // namespace gbf::detail::cpu
