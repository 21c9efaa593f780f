#include "cli/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace gbf::cli {
namespace {
std::vector<std::string> queued_summaries;
}  // namespace

progress::progress(std::string verb, std::optional<std::uint64_t> total, bool quiet)
    : verb_(std::move(verb)), total_(total), quiet_(quiet), bar_(!quiet && isatty(2) == 1) {}

double progress::seconds() const {
  return std::chrono::duration<double>(clock::now() - start_).count();
}

void progress::advance(std::uint64_t keys) {
  done_ += keys;
  if (!bar_ || clock::now() - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = clock::now();
  draw();
}

void progress::draw() {
  const double s = seconds();
  std::string line = "\r" + verb_ + " " + with_commas(done_);
  if (total_ && *total_ > 0) {
    constexpr int width = 30;
    const double fraction = std::min(1.0, static_cast<double>(done_) / static_cast<double>(*total_));
    const int filled = static_cast<int>(width * fraction);
    line += " / " + with_commas(*total_) + " keys [" + std::string(filled, '#') +
            std::string(width - filled, ' ') + "]";
  } else {
    line += " keys";
  }
  line += "  " + human(s > 0 ? static_cast<double>(done_) / s : 0) + " keys/s";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void progress::finish(const std::string& detail) {
  if (bar_) std::fputs("\r\033[K", stderr);
  if (quiet_) return;
  const double s = seconds();
  char rate[96];
  std::snprintf(rate, sizeof rate, " keys in %.2f s (", s);
  queued_summaries.push_back("gbf: " + verb_ + " " + with_commas(done_) + rate +
                             human(s > 0 ? static_cast<double>(done_) / s : 0) + " keys/s)" + detail + "\n");
}

void flush_summaries() {
  for (const std::string& line : queued_summaries) std::fputs(line.c_str(), stderr);
  queued_summaries.clear();
}

}  // namespace gbf::cli
