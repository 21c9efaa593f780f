// The CPU thread helpers every filter kind splits its batches with
// (host/cpu/threads.hpp): the team that meets at a barrier between rounds.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

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

}  // namespace
}  // namespace gbf::detail::cpu
