// Worker threads kept between calls, for the parts of a threaded CPU call
// (run_in_ranges and run_team in host/cpu/threads.hpp).
//
// Starting and joining a thread cost 15-50 us on a 2-vCPU VM (up to 350 us),
// and a private-copy add starts two a call: about 85 us of a 2-thread add of
// 10^6 keys into a 512 KiB filter that takes 700 us (docs/cpu.md, session
// 16). A worker that spins briefly after its job picks the next one up at
// once; a sleeping one is woken, and where it wakes late (a busy or idle-slow
// core) the caller runs the parts nobody has started.
//
// Workers (named "gbf-worker" on Linux) block every signal sent to the
// process, so an application's handlers run on its own threads, where it can
// defer them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <signal.h>
#endif

namespace gbf::detail::cpu {

#if defined(__unix__) || defined(__APPLE__)
/// Blocks, for its lifetime, every signal the process is sent (not the faults a
/// thread raises itself): a thread started meanwhile inherits the mask. The
/// pool's workers (and the threads of a call the busy pool cannot take) run
/// beside the application's threads, so without it a signal sent to the
/// process could run its handler on one of them while the application's thread
/// blocks that signal to defer it (the gbf command blocks
/// SIGINT/SIGTERM around a save's rename so that "the file is in place" and
/// "the handler knows it" are one step).
class process_signals_blocked {
 public:
  process_signals_blocked() {
    sigset_t process_signals;
    sigfillset(&process_signals);
    for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&process_signals, fault);
    ::pthread_sigmask(SIG_BLOCK, &process_signals, &previous_);
  }
  ~process_signals_blocked() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  process_signals_blocked(const process_signals_blocked&) = delete;
  process_signals_blocked& operator=(const process_signals_blocked&) = delete;

 private:
  sigset_t previous_;
};
#else
struct process_signals_blocked {};
#endif

class thread_pool {
 public:
  /// The process's pool: one per process (a child of fork() gets a new one,
  /// since the parent's workers do not exist in it); its workers start on
  /// first use and live until the process ends.
  static thread_pool& instance();

  /// Runs part(p) once for each p = 0 .. parts - 1 and returns true after all
  /// returned (rethrowing the first exception any of them threw): part 0 on
  /// the calling thread, the others on workers, except that the caller, once
  /// its own part is done, runs any part no worker has started yet. Returns
  /// false, having run nothing, where the pool cannot serve the call: it
  /// serves another call (another thread's, or the one whose part calls it),
  /// or it cannot have parts - 1 workers (more than max_workers, or a thread
  /// that cannot be started). The caller then starts threads of its own.
  template <class Part>
  bool run(unsigned parts, const Part& part) {
    return run_parts(parts, &call_part<Part>, &part, false);
  }

  /// As run, but each part on a thread of its own, all at once, whatever it
  /// waits for: parts that meet at a barrier (run_team).
  template <class Part>
  bool run_together(unsigned parts, const Part& part) {
    return run_parts(parts, &call_part<Part>, &part, true);
  }

  /// Most workers a pool keeps: calls with more parts start their own threads.
  static constexpr unsigned max_workers = 255;

  thread_pool() = default;
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  /// Joins the workers; no call may be running.
  ~thread_pool();

 private:
  using part_fn = void (*)(const void* context, unsigned part);
  template <class Part>
  static void call_part(const void* context, unsigned part) {
    (*static_cast<const Part*>(context))(part);
  }

  /// One worker. Its ticket, bumped (release) for each job it is asked to
  /// join, is job * 2 + 1 for a job run together (it runs part index + 1)
  /// and job * 2 for one whose parts any thread may claim.
  struct worker {
    std::thread thread;
    std::atomic<std::uint64_t> ticket{0};
    std::mutex mutex;  ///< with `wake`: sleeping until the ticket moves
    std::condition_variable wake;
    bool stop = false;  ///< under `mutex`: leave (the pool's destruction)
  };

  bool run_parts(unsigned parts, part_fn fn, const void* context, bool together);
  bool grow_to(unsigned workers);
  void work(worker& self, unsigned index);
  /// Claims the next unstarted part of job `job` (false: none left, or the
  /// job is over).
  bool claim(std::uint64_t job, unsigned& part);
  /// Runs part `part` of the current job and counts it done.
  void run_part(unsigned part);

  std::mutex busy_;  ///< held by the call being served
  std::vector<std::unique_ptr<worker>> workers_;
  std::uint64_t jobs_ = 0;  ///< jobs started (under busy_)
  // The job, written before it is published (claim_ and the tickets, both
  // release) and read only by a thread holding one of its unfinished parts.
  part_fn fn_ = nullptr;
  const void* context_ = nullptr;
  /// The claimable parts: job number (high 32 bits), parts (16), next unclaimed (16).
  std::atomic<std::uint64_t> claim_{0};
  /// Parts 1.. still unfinished; whoever finishes the last wakes the caller.
  std::atomic<unsigned> pending_{0};
  std::mutex done_mutex_;
  std::condition_variable done_;
  std::exception_ptr error_;  ///< under done_mutex_: the first part's exception
};

}  // namespace gbf::detail::cpu
