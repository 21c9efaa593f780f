// Byte sinks for everything gbf writes: a growing vector, or a file written
// as an unnamed (or, where the file system cannot, a named) temporary file and
// atomically renamed over its target (the native filter format, Parquet export,
// the cost model cache, the CLI's results files); and the lock by which the
// gbf command's writers of one file exclude each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

struct stat;

namespace gbf::detail {

class byte_sink {
 public:
  virtual ~byte_sink() = default;
  virtual void write(const std::uint8_t* data, std::size_t n) = 0;
};

class vector_sink final : public byte_sink {
 public:
  explicit vector_sink(std::size_t expected_size) { bytes_.reserve(expected_size); }
  void write(const std::uint8_t* data, std::size_t n) override {
    bytes_.insert(bytes_.end(), data, data + n);
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

/// Writes into a caller's buffer of `size` bytes (serialize_into): the bytes go
/// straight where they are wanted (a Python bytes object) instead of into a
/// vector that is then copied. invalid_argument past the end (a wrong size).
class span_sink final : public byte_sink {
 public:
  span_sink(std::uint8_t* out, std::size_t size) : out_(out), size_(size) {}
  void write(const std::uint8_t* data, std::size_t n) override;

 private:
  std::uint8_t* out_;
  std::size_t size_;
  std::size_t written_ = 0;
};

/// Whether `target` (or, where that names nothing, `shown`, the path as given)
/// exists; when it does and `existing` is not null, its stat goes there. Throws
/// io_error("<verb> '<shown>': '<target>' is not a regular file (...)" or "... is a
/// directory") when it exists and is not a regular file: a save renames over its
/// target, which would replace a FIFO or device node itself.
bool existing_regular_file(const char* verb, const std::string& shown, const std::string& target,
                           struct stat* existing = nullptr);

/// `path` with the symbolic links of its last component followed, as open()
/// would (a relative link target is taken from the link's directory), so that
/// a save through a link replaces the file it points to, not the link. A
/// dangling link gives the path it names. io_error (ELOOP) after 40 links.
std::string resolve_links(const std::string& path);

// A file written beside `path` (after resolve_links) and renamed over it by
// commit() once complete and fsync'ed; until then the target is untouched.
//
// The data goes to an unnamed O_TMPFILE inode in the target's directory where
// the file system has them (and /proc/self/fd can name it for linkat): a crash
// or kill then leaves nothing behind. commit() links it as
// NAME.tmp.<pid>.<n> and renames that over the target (linkat cannot replace
// a file), so a name exists only for that instant. Elsewhere, or with the
// environment variable GBF_TEMP_FILES=named, the data goes to that name from
// the start, created with O_EXCL. NAME is the target's file name, or, when the
// temporary name would exceed NAME_MAX (255 bytes), its first bytes, '~' and a
// 16-digit hash of it. A sink destroyed without commit() removes its named
// temporary file; the constructor removes the temporary files of earlier saves
// of the same target whose process is dead and which no process holds open
// under flock (the writer holds one on its temporary until commit).
// A target that exists but is not a regular file (a device, FIFO, socket or
// directory) is refused up front; an existing file's permissions and owner
// (where this process may give it away) carry over to its replacement.
// Failures throw io_error("save '<path>': <what>: <strerror>").
class atomic_file_sink final : public byte_sink {
 public:
  explicit atomic_file_sink(const std::string& path);
  atomic_file_sink(const atomic_file_sink&) = delete;
  atomic_file_sink& operator=(const atomic_file_sink&) = delete;
  ~atomic_file_sink() override;

  /// invalid_argument once commit() has been called (whether or not it succeeded).
  void write(const std::uint8_t* data, std::size_t n) override;
  /// Makes the data durable, then atomically replaces the target with it. Once
  /// only: a second call throws invalid_argument, as does one after a failed
  /// commit (which leaves the target as it was; write the file again).
  void commit();
  /// The file commit() replaces: `path` with its links followed.
  const std::string& target() const { return target_; }
  /// True when the data goes to an unnamed O_TMPFILE inode until commit().
  bool unnamed() const { return unnamed_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;
  /// invalid_argument for `call` once commit() has been called.
  void check_open(const char* call) const;
  void open_named();
  void link_unnamed();
  void sync_directory() const;

  std::string path_;       ///< As given, for messages.
  std::string target_;     ///< path_ with links followed.
  std::string temp_path_;  ///< The named temporary (named mode: from the start; unnamed: at commit).
  int fd_ = -1;
  int cleanup_slot_ = -1;  ///< Registration with remove_unfinished_files(), -1 when none.
  bool unnamed_ = false;
  bool committed_ = false;
  bool commit_called_ = false;
  bool replaces_existing_ = false;  ///< The target exists: its mode and owner carry over.
  unsigned old_mode_ = 0;
  unsigned old_uid_ = 0;
  unsigned old_gid_ = 0;
};

// Mutual exclusion of the processes that write one file (the gbf command takes
// it from before reading a filter until after its rename). An exclusive flock
// on a lock file beside the target, "." + NAME + ".gbf-lock" (NAME as for the
// temporary files): not on the target itself, because the target is replaced
// by rename and a lock on the old inode would no longer guard the path; not on
// the directory, which would serialise writers of unrelated files. The holder
// removes the lock file before unlocking; a process that then obtains the lock
// on the removed inode sees that the path names another inode and starts over,
// so at most one process holds the lock of a path. The lock file holds the
// holder's pid (for the message). A killed holder's lock is released by the
// kernel and its empty lock file is reused and removed by the next writer.
class write_lock {
 public:
  /// Locks `target` (links already followed, checked by existing_regular_file). wait = false: throws io_error
  /// (EWOULDBLOCK) "'<target>' is locked by another gbf process (pid N) ..."
  /// when it is held; wait = true: blocks until it is free.
  write_lock(const std::string& target, bool wait);
  write_lock(const write_lock&) = delete;
  write_lock& operator=(const write_lock&) = delete;
  /// Removes the lock file, then unlocks.
  ~write_lock();

  const std::string& lock_path() const { return lock_path_; }

 private:
  std::string lock_path_;
  int fd_ = -1;
  int cleanup_slot_ = -1;
};

/// Removes this process's named temporary files of unfinished saves and its
/// lock files. Async-signal-safe (unlink only): meant for a SIGINT/SIGTERM
/// handler, which then lets the signal end the process.
void remove_unfinished_files() noexcept;

/// True once a commit() of this process has renamed its file into place. Async-signal-safe.
bool any_save_committed() noexcept;

}  // namespace gbf::detail
