#include "cli/synthetic_keys.hpp"

#include <algorithm>
#include <thread>
#include <vector>

#include "gbf/detail/splitmix64.hpp"

namespace gbf::cli {

void make_distinct_keys(std::uint64_t* out, std::uint64_t first, std::size_t n, unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads && t * per < n; ++t) {
    pool.emplace_back([=] {
      const std::size_t end = std::min(n, (t + 1) * per);
      for (std::size_t i = t * per; i < end; ++i) out[i] = detail::splitmix64(first + i);
    });
  }
  for (std::thread& worker : pool) worker.join();
}

}  // namespace gbf::cli
