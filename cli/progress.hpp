// Progress of a long key pass on stderr: a one-line bar while stderr is a
// terminal (redrawn at most 10 times a second), then one summary line:
//   gbf: added 1,000,000 keys in 0.12 s (8.3 M keys/s)
// printed when the command has done its work (flush_summaries): an "added"
// line before the save claimed work that a failed save or a signal then lost,
// and a reader of stderr that had gone away ended the command with SIGPIPE on
// that line, before its save.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "cli/text.hpp"

namespace gbf::cli {

class progress {
 public:
  /// `verb` names the work in the summary ("added", "queried"); `total` keys when known.
  progress(std::string verb, std::optional<std::uint64_t> total, bool quiet);

  /// Records `keys` more keys done and redraws the bar when it is due.
  void advance(std::uint64_t keys);
  /// Clears the bar and queues the summary line (unless quiet), `detail` appended.
  void finish(const std::string& detail = "");

  std::uint64_t done() const { return done_; }

 private:
  using clock = std::chrono::steady_clock;
  double seconds() const;
  void draw();

  std::string verb_;
  std::optional<std::uint64_t> total_;
  bool quiet_;
  bool bar_;
  std::uint64_t done_ = 0;
  clock::time_point start_ = clock::now();
  clock::time_point last_draw_ = start_;
};

/// Prints the queued summary lines: once the command has returned (cli/gbf.cpp;
/// a command that throws prints its error instead).
void flush_summaries();

}  // namespace gbf::cli
