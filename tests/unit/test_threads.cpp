// The CPU thread helpers every filter kind splits its batches with
// (host/cpu/threads.hpp): the team that meets at a barrier between rounds,
// the ranges, and the pool of workers both run on (host/cpu/thread_pool.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__unix__)
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "host/cpu/threads.hpp"

namespace gbf::detail::cpu {
namespace {

// A threaded add's rounds rely on it: what any thread wrote before a barrier,
// every thread reads after it, round after round with the same barrier.
TEST(CpuThreads, ATeamSeesEveryWriteMadeBeforeEachBarrier) {
  for (const unsigned parts : {1u, 2u, 3u, 8u}) {
    SCOPED_TRACE("parts=" + std::to_string(parts));
    constexpr std::uint64_t rounds = 300;
    std::vector<std::uint64_t> written(parts, 0);  // plain, not atomic: the barrier orders them
    std::vector<std::uint64_t> stale(parts, 0);
    std::vector<unsigned> ran(parts, 0);
    const bool started = run_team(parts, [&](unsigned part, team_barrier& barrier) {
      ++ran[part];
      for (std::uint64_t round = 1; round <= rounds; ++round) {
        written[part] = round;
        barrier.arrive_and_wait();
        for (unsigned other = 0; other < parts; ++other)
          if (written[other] != round) ++stale[part];
        barrier.arrive_and_wait();  // nobody writes round + 1 before all have read round
      }
    });
    ASSERT_TRUE(started);
    for (unsigned part = 0; part < parts; ++part) {
      EXPECT_EQ(ran[part], 1u) << "part " << part;
      EXPECT_EQ(stale[part], 0u) << "part " << part << " read a value from before the barrier";
    }
  }
}

// Run together, every part runs exactly once, part 0 on the calling thread
// and each other part on a thread of its own, all at once (the parts meet at a
// barrier, which would never open otherwise), call after call on the same
// workers.
TEST(CpuThreadPool, RunTogetherRunsEveryPartOnceEachOnAThreadOfItsOwnAllAtOnce) {
  thread_pool pool;
  for (int call = 0; call < 50; ++call) {
    for (const unsigned parts : {2u, 3u, 5u, 8u}) {
      SCOPED_TRACE("call " + std::to_string(call) + ", parts=" + std::to_string(parts));
      team_barrier barrier(parts);
      std::vector<std::thread::id> thread_of(parts);
      std::vector<unsigned> ran(parts, 0);
      ASSERT_TRUE(pool.run_together(parts, [&](unsigned part) {
        ++ran[part];
        thread_of[part] = std::this_thread::get_id();
        barrier.arrive_and_wait();
      }));
      EXPECT_EQ(thread_of[0], std::this_thread::get_id());
      EXPECT_EQ(std::set<std::thread::id>(thread_of.begin(), thread_of.end()).size(), parts);
      for (unsigned part = 0; part < parts; ++part) EXPECT_EQ(ran[part], 1u) << "part " << part;
    }
  }
}

#if defined(__unix__)
// A signal sent to the process must find the application's threads, not a
// worker: the gbf command blocks SIGINT/SIGTERM on its thread around a save's
// rename, and a worker left able to take them ran the handler meanwhile.
// Starting the workers leaves the caller's own mask as it was.
TEST(CpuThreadPool, WorkersBlockTheSignalsSentToTheProcessAndLeaveTheCallersMask) {
  sigset_t before;
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &before), 0);
  thread_pool pool;
  constexpr unsigned parts = 4;
  std::vector<sigset_t> mask_of(parts);
  team_barrier barrier(parts);
  ASSERT_TRUE(pool.run_together(parts, [&](unsigned part) {
    ::pthread_sigmask(SIG_SETMASK, nullptr, &mask_of[part]);
    barrier.arrive_and_wait();
  }));
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGUSR1, SIGALRM, SIGCHLD}) {
    EXPECT_EQ(sigismember(&mask_of[0], sig), sigismember(&before, sig)) << "the caller's mask changed: " << sig;
    for (unsigned part = 1; part < parts; ++part)
      EXPECT_EQ(sigismember(&mask_of[part], sig), 1) << "worker of part " << part << " takes signal " << sig;
  }
  for (unsigned part = 1; part < parts; ++part)
    EXPECT_EQ(sigismember(&mask_of[part], SIGSEGV), 0) << "a worker's own faults must still reach it";
  sigset_t after;
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &after), 0);
  for (const int sig : {SIGINT, SIGTERM, SIGUSR1}) EXPECT_EQ(sigismember(&after, sig), sigismember(&before, sig));
}

// While the process's pool is busy (here: called from one of its own parts), a
// threaded call starts threads of its own: they block the process's signals as
// the pool's workers do (they took them, found by a ThreadSanitizer audit's
// reading), and the caller's mask is left as it was.
TEST(CpuThreadPool, ThreadsOfACallTheBusyPoolCannotTakeBlockTheProcessSignalsToo) {
  sigset_t before;
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &before), 0);
  constexpr unsigned parts = 3;
  std::vector<sigset_t> team_mask(parts), range_mask(parts);
  bool team_ran = false;
  ASSERT_TRUE(thread_pool::instance().run_together(2, [&](unsigned outer) {
    if (outer != 0) return;
    team_ran = run_team(parts, [&](unsigned part, team_barrier& barrier) {
      ::pthread_sigmask(SIG_SETMASK, nullptr, &team_mask[part]);
      barrier.arrive_and_wait();  // every part on a thread of its own at once
    });
    run_in_ranges(std::vector<std::uint64_t>{0, 1, 2, 3}, [&](unsigned part, std::uint64_t, std::uint64_t) {
      ::pthread_sigmask(SIG_SETMASK, nullptr, &range_mask[part]);
    });
  }));
  ASSERT_TRUE(team_ran);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) {
    EXPECT_EQ(sigismember(&team_mask[0], sig), sigismember(&before, sig)) << "the caller's mask changed: " << sig;
    EXPECT_EQ(sigismember(&range_mask[0], sig), sigismember(&before, sig)) << "the caller's mask changed: " << sig;
    for (unsigned part = 1; part < parts; ++part) {
      EXPECT_EQ(sigismember(&team_mask[part], sig), 1) << "team thread " << part << " takes signal " << sig;
      EXPECT_EQ(sigismember(&range_mask[part], sig), 1) << "range thread " << part << " takes signal " << sig;
    }
  }
}
#endif

// Run, every part runs exactly once, part 0 on the caller first; the others
// on workers or, where a worker has not started when the caller is free, on
// the caller. Part 0 here takes no time, so both happen over many calls.
TEST(CpuThreadPool, RunRunsEveryPartExactlyOnceWhoeverRunsIt) {
  thread_pool pool;
  const std::thread::id caller = std::this_thread::get_id();
  for (int call = 0; call < 300; ++call) {
    const unsigned parts = 2 + static_cast<unsigned>(call) % 7;
    std::vector<std::atomic<unsigned>> ran(parts);
    std::vector<std::thread::id> thread_of(parts);
    ASSERT_TRUE(pool.run(parts, [&](unsigned part) {
      ran[part].fetch_add(1);
      thread_of[part] = std::this_thread::get_id();
      if (part != 0 && call % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }));
    EXPECT_EQ(thread_of[0], caller) << "call " << call;
    for (unsigned part = 0; part < parts; ++part)
      ASSERT_EQ(ran[part].load(), 1u) << "call " << call << ", part " << part;
  }
}

// An exception in any part reaches the caller after every part has returned,
// and the pool serves the next call.
TEST(CpuThreadPool, RethrowsAPartsExceptionAfterAllPartsReturned) {
  thread_pool pool;
  for (const unsigned thrower : {0u, 1u, 3u}) {
    SCOPED_TRACE("part " + std::to_string(thrower) + " throws");
    std::atomic<unsigned> returned{0};
    EXPECT_THROW(pool.run(4, [&](unsigned part) {
      if (part == thrower) throw std::runtime_error("part failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      returned.fetch_add(1);
    }),
                 std::runtime_error);
    EXPECT_EQ(returned.load(), 3u);
    std::atomic<unsigned> ran{0};
    EXPECT_TRUE(pool.run(4, [&](unsigned) { ran.fetch_add(1); }));
    EXPECT_EQ(ran.load(), 4u);
  }
}

// The pool serves one call at a time and declines what it cannot serve, having
// run nothing: a call from one of its own parts, a call with more parts than it
// keeps workers for, fewer than 2 parts.
TEST(CpuThreadPool, DeclinesNestedOversizedAndSinglePartCallsWithoutRunningThem) {
  thread_pool pool;
  std::atomic<unsigned> ran_inside{0};
  std::vector<int> nested(2, -1);
  ASSERT_TRUE(pool.run(2, [&](unsigned part) {
    nested[part] = pool.run(2, [&](unsigned) { ran_inside.fetch_add(1); }) ? 1 : 0;
  }));
  EXPECT_EQ(nested[0], 0) << "the caller's part called the busy pool";
  EXPECT_EQ(nested[1], 0) << "a worker's part called its own pool";
  EXPECT_EQ(ran_inside.load(), 0u);
  bool ran = false;
  EXPECT_FALSE(pool.run(thread_pool::max_workers + 2, [&](unsigned) { ran = true; }));
  EXPECT_FALSE(pool.run(1, [&](unsigned) { ran = true; }));
  EXPECT_FALSE(ran);
}

// Many threads splitting work at once, with nesting: the process's pool serves
// some calls, the others start threads of their own, and every range of every
// call runs exactly once either way.
TEST(CpuThreadPool, RangesRunExactlyOnceUnderConcurrentAndNestedCalls) {
  constexpr unsigned callers = 4;
  constexpr int calls = 200;
  std::vector<std::uint64_t> wrong(callers, 0);
  std::vector<std::thread> threads;
  for (unsigned caller = 0; caller < callers; ++caller) {
    threads.emplace_back([&, caller] {
      for (int call = 0; call < calls; ++call) {
        const unsigned parts = 2 + (caller + static_cast<unsigned>(call)) % 3;
        std::vector<std::uint64_t> hits(1000, 0);
        run_in_parts(parts, hits.size(), [&](unsigned, std::uint64_t begin, std::uint64_t end) {
          // Every other call nests a split of its own range.
          if (call % 2 == 0) {
            run_in_parts(2, end - begin, [&](unsigned, std::uint64_t b, std::uint64_t e) {
              for (std::uint64_t i = begin + b; i < begin + e; ++i) ++hits[i];
            });
          } else {
            for (std::uint64_t i = begin; i < end; ++i) ++hits[i];
          }
        });
        for (const std::uint64_t h : hits) wrong[caller] += h != 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (unsigned caller = 0; caller < callers; ++caller)
    EXPECT_EQ(wrong[caller], 0u) << "caller " << caller << ": elements not hit exactly once";
}

#if defined(__unix__)
// A child of fork() has none of its parent's workers: its first threaded call
// gets a pool of its own and runs every part (a pool inherited as it was would
// wait forever for workers that do not exist).
TEST(CpuThreadPool, AForkedChildRunsThreadedCallsOnAPoolOfItsOwn) {
  std::atomic<unsigned> ran{0};
  run_in_parts(3, 3, [&](unsigned, std::uint64_t, std::uint64_t) { ran.fetch_add(1); });
  ASSERT_EQ(ran.load(), 3u) << "the parent's pool";
  const pid_t child = ::fork();
  ASSERT_NE(child, -1) << "fork failed";
  if (child == 0) {
    ::alarm(20);  // a child stuck waiting for its parent's workers dies rather than hangs
    std::atomic<unsigned> child_ran{0};
    run_in_parts(3, 3, [&](unsigned, std::uint64_t, std::uint64_t) { child_ran.fetch_add(1); });
    ::_exit(child_ran.load() == 3 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit (status " << status << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's threaded call did not run every part";
}

// A fork while another thread is getting the pool: the child once inherited the
// pool's lock held by a thread it does not have, and its first threaded call
// waited forever. Another thread gets the pool in a tight loop (it holds the
// lock most of the time) while the main thread forks.
TEST(CpuThreadPool, AForkWhileAnotherThreadGetsThePoolLeavesTheChildAPool) {
  std::atomic<bool> stop{false};
  std::thread getter([&] {
    while (!stop.load(std::memory_order_relaxed)) (void)thread_pool::instance();
  });
  int hung = 0, failed = 0;
  for (int i = 0; i < 50 && hung == 0; ++i) {
    const pid_t child = ::fork();
    ASSERT_NE(child, -1) << "fork failed";
    if (child == 0) {
      ::alarm(60);  // the parent gives up first; this only bounds an orphan
      std::atomic<unsigned> child_ran{0};
      run_in_parts(2, 2, [&](unsigned, std::uint64_t, std::uint64_t) { child_ran.fetch_add(1); });
      ::_exit(child_ran.load() == 2 ? 0 : 1);
    }
    // A stuck child never finishes; a slow one (a loaded CI machine) does within
    // 30 s. The first stuck one ends the loop, so a regression costs 30 s, not 50 x 30.
    int status = 0;
    pid_t done = 0;
    for (int waited_ms = 0; (done = ::waitpid(child, &status, WNOHANG)) == 0 && waited_ms < 30'000; waited_ms += 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (done == 0) {
      ++hung;
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  stop = true;
  getter.join();
  EXPECT_EQ(hung, 0) << "children stuck on the pool's lock";
  EXPECT_EQ(failed, 0);
}
#endif

}  // namespace
}  // namespace gbf::detail::cpu
