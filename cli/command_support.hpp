// What the gbf subcommands share beyond their arguments (cli/commands.hpp):
// filter files, output safety (locks, never writing over an input), sizing
// and key chunks. Defined in cli/commands.cpp; cli/counting.cpp uses them too.
#pragma once

#include <cerrno>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/key_reader.hpp"
#include "cli/text.hpp"
#include "gbf/error.hpp"
#include "gbf/files.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"

namespace gbf::cli {

/// A file a command reads, named as the messages name it ("the key file").
struct input_file {
  const char* role;
  const std::string& path;
};

/// The lock of one output file (gbf::file_lock on its target, links
/// followed), held from before the command reads its inputs until after the
/// output is renamed into place, so that two gbf processes never both write it.
class output_lock {
 public:
  output_lock(const std::string& path, bool wait) {
    try {
      lock_.emplace(path, wait);
    } catch (const io_error& e) {
      if (e.os_error() != EWOULDBLOCK) throw;
      throw io_error(std::string(e.what()) + "; pass --wait to wait for it", EWOULDBLOCK);
    }
  }

 private:
  std::optional<file_lock> lock_;
};

/// The library options of a command's --backend and --threads.
options make_options(const run_options& run);

/// usage_error when the output `path` exists and is, after links, the same file
/// (device and inode) as one of `inputs`: writing it would destroy an input.
/// Runs before anything is opened for writing. "-" is standard input.
void refuse_output_over_inputs(const std::string& option, const std::string& path,
                               std::initializer_list<input_file> inputs);

/// Loads the plain filter `file`; Parquet files carry no capacity, fpp or key
/// count (metadata 0 = unknown).
filter load_filter(const filter_file& file, const run_options& run, file_metadata& meta);

/// Throws invalid_argument naming `file` and every condition a Parquet export of `l` fails.
void check_exportable(const layout& l, const filter_file& file);

/// Writes `f` to `file` in its format (atomically).
void save_filter(const filter& f, const filter_file& file, double fpp);

/// The layout --capacity/--fpp/--layout/--parquet-compatible ask for; usage_error when impossible.
layout size_layout(const sizing_options& sizing, std::uint64_t capacity);

/// A text chunk's keys as a string batch.
string_keys<std::int64_t> text_keys(const key_chunk& c);

/// An allocation failed while a chunk read from `path` was processed.
[[noreturn]] void fail_chunk_memory(const std::string& path, std::uint64_t first_key,
                                    std::size_t keys);


}  // namespace gbf::cli
