// Crash-safe output files: the atomic save and the writer lock behind
// gbf::save and the gbf command, for an application's own outputs
// (docs/file-format.md, "Atomic saves"). POSIX only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace gbf {
namespace detail {
class atomic_file_sink;
class write_lock;
}  // namespace detail

/// A file written beside `path` and renamed over it by commit(): until then
/// `path` is untouched, and readers see the old file or the new one, never a mix.
class atomic_file {
 public:
  /// Opens the temporary in `path`'s directory (links of `path` followed); io_error naming the step.
  explicit atomic_file(const std::string& path);
  /// Without commit(): removes the temporary and leaves `path` as it was.
  ~atomic_file();
  /// Moves; calls on the moved-from object throw invalid_argument until it is assigned to.
  atomic_file(atomic_file&&) noexcept;
  atomic_file& operator=(atomic_file&&) noexcept;

  /// Appends `bytes` bytes; io_error on a write failure (disk full, ...); invalid_argument
  /// for null data or once commit() has been called.
  void write(const void* data, std::size_t bytes);
  /// fsyncs the data, renames it over the target, fsyncs the directory; io_error on
  /// failure (the target as it was). Once: invalid_argument when called again.
  void commit();
  /// The file commit() replaces: `path` with its links followed.
  const std::string& target() const;

 private:
  std::unique_ptr<detail::atomic_file_sink> sink_;
};

/// Exclusive lock of the processes that write `path` (links followed): a flock
/// on ".NAME.gbf-lock" beside it, held until destruction.
class file_lock {
 public:
  /// wait = false: io_error (os_error() == EWOULDBLOCK) naming the holder's pid
  /// when another process holds it; wait = true: blocks until it is free.
  file_lock(const std::string& path, bool wait);
  /// Removes the lock file, then unlocks.
  ~file_lock();
  file_lock(file_lock&&) noexcept;
  file_lock& operator=(file_lock&&) noexcept;

 private:
  std::unique_ptr<detail::write_lock> lock_;
};

/// Removes this process's temporaries of unfinished atomic_file saves and its
/// lock files. Async-signal-safe (unlink only): for a SIGINT/SIGTERM handler,
/// which then lets the signal end the process. gbf installs no handlers itself.
void remove_unfinished_files() noexcept;

/// True once an atomic_file commit() of this process has renamed its file into
/// place (set in one step with the rename, as far as signals go).
/// Async-signal-safe: a handler that finds it true can let the process finish
/// instead of ending it, so that a command whose output is written does not
/// report failure (and a retry does not add its keys twice).
bool any_save_committed() noexcept;

}  // namespace gbf
