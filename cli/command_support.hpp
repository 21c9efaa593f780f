// What the gbf subcommands share beyond their arguments (cli/commands.hpp):
// filter files, output safety (locks, never writing over an input), sizing
// and key chunks. Defined in cli/commands.cpp; cli/counting.cpp uses them too.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/key_reader.hpp"
#include "cli/progress.hpp"
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

/// Writes query answers to --out as bytes, an LSB-first bitmap, or "0"/"1"
/// lines, atomically like a filter (gbf::atomic_file): until close()
/// the results file is untouched, and a failure leaves it as it was.
class result_writer {
 public:
  result_writer(const std::string& path, result_format format) : file_(path), format_(format) {
    buffer_.reserve(buffer_bytes + 2);
  }

  void write(const bool* found, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      switch (format_) {
        case result_format::bytes: buffer_.push_back(found[i] ? 1 : 0); break;
        case result_format::text:
          buffer_.push_back(found[i] ? '1' : '0');
          buffer_.push_back('\n');
          break;
        case result_format::bitmap:
          pending_ |= static_cast<unsigned>(found[i]) << pending_bits_;
          if (++pending_bits_ == 8) flush_byte();
          break;
      }
      if (buffer_.size() >= buffer_bytes) flush();
    }
  }

  /// Writes the last partial bitmap byte, then replaces the results file.
  void close() {
    if (pending_bits_ > 0) flush_byte();
    flush();
    file_.commit();
  }

 private:
  void flush_byte() {
    buffer_.push_back(static_cast<std::uint8_t>(pending_));
    pending_ = 0;
    pending_bits_ = 0;
  }
  void flush() {
    file_.write(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  static constexpr std::size_t buffer_bytes = std::size_t{1} << 20;
  atomic_file file_;
  result_format format_;
  std::vector<std::uint8_t> buffer_;
  unsigned pending_ = 0;
  unsigned pending_bits_ = 0;
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

/// Runs `combine` (A merged with B, or intersected, ...) and puts both file names in
/// front of the layout_mismatch or filter_full it throws, which name only layouts.
template <class Combine>
void naming_inputs(const combine_args& args, Combine&& combine) {
  const std::string inputs = "'" + args.a.path + "' and '" + args.b.path + "': ";
  try {
    combine();
  } catch (const layout_mismatch& e) {
    throw layout_mismatch(inputs + e.what());
  } catch (const filter_full& e) {
    throw filter_full(inputs + e.what(), e.not_inserted(), e.fits());
  }
}

/// Writes `f` to `file` in its format (atomically).
void save_filter(const filter& f, const filter_file& file, double fpp);

/// The layout --capacity/--fpp/--layout/--parquet-compatible ask for; usage_error when impossible.
layout size_layout(const sizing_options& sizing, std::uint64_t capacity);

/// A text chunk's keys as a string batch.
string_keys<std::int64_t> text_keys(const key_chunk& c);

/// An allocation failed while a chunk read from `path` was processed.
[[noreturn]] void fail_chunk_memory(const std::string& path, std::uint64_t first_key,
                                    std::size_t keys);


/// Runs `op(keys, n)` or `op(string_keys)` on a chunk's keys, whatever their type.
template <class Op>
auto on_keys(const key_chunk& c, const Op& op) {
  switch (c.type) {
    case key_type::u32: return op(c.u32.data(), c.u32.size());
    case key_type::u64: return op(c.u64.data(), c.u64.size());
    case key_type::text: break;
  }
  return op(text_keys(c));
}

/// The answers of one call, grown as chunks need.
template <class T>
T* room_for(std::unique_ptr<T[]>& buffer, std::size_t& capacity, std::size_t n) {
  if (n > capacity) {
    buffer.reset(new T[n]);
    capacity = n;
  }
  return buffer.get();
}

/// `gbf query --counts` on a counting or cuckoo filter: each key's approximate_count
/// (the smallest of its counters; the copies of its tag, RedisBloom's CF.COUNT), one
/// decimal a line on stdout, in key order.
template <class CountingKind>
int print_counts(const CountingKind& f, const query_args& args) {
  const auto reader = key_reader::open(args.keys.path, args.keys.format);
  progress bar("counted", reader->known_count(), args.run.quiet);
  key_chunk chunk;
  std::unique_ptr<std::uint8_t[]> counts;
  std::size_t counts_room = 0;
  std::string lines;
  while (reader->next(chunk, args.keys.chunk_keys)) {
    std::uint8_t* count = room_for(counts, counts_room, chunk.size());
    on_keys(chunk, [&](const auto&... keys) { f.approximate_count(keys..., count); });
    lines.clear();
    for (std::size_t i = 0, n = chunk.size(); i < n; ++i) (lines += std::to_string(count[i])) += '\n';
    std::fwrite(lines.data(), 1, lines.size(), stdout);
    bar.advance(chunk.size());
  }
  bar.finish(std::string(" on ") + to_string(f.where()));
  check_stdout();
  return 0;
}

}  // namespace gbf::cli
