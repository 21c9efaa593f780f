// Proves a downstream build links gbf and gets a working filter (CPU or GPU).
#include <gbf/filter.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  gbf::filter f = gbf::filter::create(1000, 0.01);
  std::vector<std::uint64_t> keys(1000);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = i * 2654435761u;
  f.add(keys.data(), keys.size());
  const std::uint64_t found = f.count(keys.data(), keys.size());
  std::printf("consumer: %s, %llu of %zu keys found\n", f.description().c_str(),
              static_cast<unsigned long long>(found), keys.size());
  return found == keys.size() ? 0 : 1;
}
