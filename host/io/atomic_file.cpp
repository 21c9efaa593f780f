// atomic_file_sink (host/io/atomic_file.hpp): unnamed or named temp file, fsync,
// link, rename, directory fsync; stale temporaries of dead processes removed;
// write_lock; the list of files a fatal signal must remove.
#include "host/io/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gbf/error.hpp"

namespace gbf::detail {

void span_sink::write(const std::uint8_t* data, std::size_t n) {
  if (n > size_ - written_)
    throw invalid_argument("serialize_into: the buffer of " + std::to_string(size_) +
                           " bytes is too small (a bug: the size was checked)");
  std::memcpy(out_ + written_, data, n);
  written_ += n;
}
namespace {

// ---------------------------------------------------------------------------
// Names beside the target
// ---------------------------------------------------------------------------

constexpr std::size_t name_max = 255;  // NAME_MAX of Linux file systems
// Longest suffix gbf appends: ".tmp." + 10-digit pid + "." + 10-digit counter.
constexpr std::size_t longest_suffix = 26;
constexpr int max_links = 40;  // Linux's own limit on links followed in one lookup

/// The directory part of `path` including its final '/', or "" for a bare name.
std::string directory_prefix(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string file_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// FNV-1a, 64-bit: a short, stable tag for names too long to repeat.
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// The part of every temporary and lock name that identifies the target: its
/// file name, or when a suffix could push that past NAME_MAX, its first bytes,
/// '~' and a hash of the whole name (so a 254-byte name still gets a temporary).
std::string name_stem(const std::string& name) {
  if (name.size() + longest_suffix <= name_max) return name;
  char tag[18];
  std::snprintf(tag, sizeof tag, "~%016llx", static_cast<unsigned long long>(fnv1a(name)));
  return name.substr(0, name_max - longest_suffix - (sizeof tag - 1)) + tag;
}

std::string os_text(int err) { return std::strerror(err); }

/// Blocks, for its lifetime, the signals the gbf command handles by removing
/// this process's files (cli/gbf.cpp), so that creating or removing a lock
/// file and registering or unregistering it happen as one step for them.
class fatal_signals_blocked {
 public:
  fatal_signals_blocked() {
    sigset_t fatal;
    sigemptyset(&fatal);
    for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&fatal, sig);
    ::pthread_sigmask(SIG_BLOCK, &fatal, &previous_);
  }
  ~fatal_signals_blocked() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  fatal_signals_blocked(const fatal_signals_blocked&) = delete;
  fatal_signals_blocked& operator=(const fatal_signals_blocked&) = delete;

  /// The mask before the block: the one to wait under.
  const sigset_t& previous() const { return previous_; }

 private:
  sigset_t previous_;
};

/// Set, with the fatal signals blocked, in the same step as a save's rename:
/// from then on a handler knows the process's output is in place.
std::atomic<bool> save_committed{false};

// ---------------------------------------------------------------------------
// Files a fatal signal must remove: fixed slots, so that the handler reads
// them without allocating or locking. state: 0 free, 1 being filled, 2 armed.
// ---------------------------------------------------------------------------

constexpr int cleanup_slots = 16;

struct cleanup_slot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};

cleanup_slot cleanup[cleanup_slots];

/// Arms a slot for `path`; -1 when every slot is taken or the path is too long
/// (the file is then left to the next save's stale-temporary sweep).
int register_for_cleanup(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < cleanup_slots; ++i) {
    int expected = 0;
    if (!cleanup[i].state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) continue;
    std::memcpy(cleanup[i].path, path.c_str(), path.size() + 1);
    cleanup[i].state.store(2, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_cleanup(int& slot) {
  if (slot >= 0) cleanup[slot].state.store(0, std::memory_order_release);
  slot = -1;
}

// ---------------------------------------------------------------------------
// Stale temporaries
// ---------------------------------------------------------------------------

/// The pid in "<stem>.tmp.<pid>.<n>", or 0 when `entry` is not such a name.
pid_t temp_owner(const std::string& entry, const std::string& prefix) {
  if (entry.compare(0, prefix.size(), prefix) != 0) return 0;
  const char* p = entry.c_str() + prefix.size();
  unsigned long long pid = 0;
  const char* digits = p;
  while (*p >= '0' && *p <= '9' && pid <= INT_MAX) pid = pid * 10 + static_cast<unsigned>(*p++ - '0');
  if (p == digits || *p != '.' || pid == 0 || pid > INT_MAX) return 0;
  const char* counter = ++p;
  while (*p >= '0' && *p <= '9') ++p;
  return p != counter && *p == '\0' ? static_cast<pid_t>(pid) : 0;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

/// Removes "<stem>.tmp.<pid>.<n>" files in `dir` left by dead processes. A
/// temporary is stale when its pid names no live process and no process holds
/// the flock its writer keeps until commit (that second test protects writers
/// in another pid namespace sharing the directory; the first covers the instant
/// between a writer's open and its flock). Best effort: errors are ignored,
/// since the save itself does not depend on them.
void remove_stale_temps(const std::string& dir, const std::string& stem) {
  DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (d == nullptr) return;
  const std::string prefix = stem + ".tmp.";
  while (const dirent* e = ::readdir(d)) {
    const pid_t pid = temp_owner(e->d_name, prefix);
    if (pid == 0 || pid == ::getpid() || process_alive(pid)) continue;
    const std::string path = dir + e->d_name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat held {}, named {};
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
        ::lstat(path.c_str(), &named) == 0 && named.st_ino == held.st_ino && named.st_dev == held.st_dev)
      ::unlink(path.c_str());
    ::close(fd);
  }
  ::closedir(d);
}

/// "/proc/self/fd/<fd>": names an open O_TMPFILE inode for linkat.
std::string proc_fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

std::atomic<unsigned> temp_counter{0};

}  // namespace

std::string resolve_links(const std::string& path) {
  std::string p = path;
  for (int links = 0;; ++links) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      // ENOENT: a file to create. Anything else (a name past NAME_MAX, a
      // component that is not a directory, no search permission) would fail
      // the save at its end: say so before any work.
      const int err = errno;
      if (err == ENOENT) return p;
      throw io_error("'" + p + "': " + os_text(err), err);
    }
    if (!S_ISLNK(st.st_mode)) return p;
    if (links == max_links)
      throw io_error("'" + path + "': more than " + std::to_string(max_links) + " symbolic links", ELOOP);
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlink(p.c_str(), target.data(), target.size());
    if (n < 0) {
      const int err = errno;
      throw io_error("'" + path + "': cannot read symbolic link '" + p + "': " + os_text(err), err);
    }
    target.resize(static_cast<std::size_t>(n));
    p = !target.empty() && target[0] == '/' ? target : directory_prefix(p) + target;
  }
}

// ---------------------------------------------------------------------------
// atomic_file_sink
// ---------------------------------------------------------------------------

namespace {

/// resolve_links with the "save '<path>': " prefix of the sink's other errors.
std::string resolve_for_save(const std::string& path) {
  try {
    return resolve_links(path);
  } catch (const io_error& e) {
    throw io_error(std::string("save ") + e.what(), e.os_error());
  }
}

}  // namespace

// A save replaces its target by rename, which would replace a device, FIFO or
// socket node itself (as root, `-o /dev/null` turned /dev/null into a plain
// file); a directory cannot be replaced at all. Refused before anything is created.
bool existing_regular_file(const char* verb, const std::string& shown, const std::string& target,
                           struct stat* existing) {
  struct stat st {};
  // The target (links followed by resolve_links), or else the path as given:
  // /dev/stdout on a pipe resolves to "/proc/self/fd/pipe:[N]", which names
  // nothing, while stat() of the given path finds the pipe.
  if (::stat(target.c_str(), &st) != 0 && ::stat(shown.c_str(), &st) != 0) return false;  // absent: created
  if (S_ISREG(st.st_mode)) {
    if (existing != nullptr) *existing = st;
    return true;
  }
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a file";
  const std::string where = std::string(verb) + " '" + shown + "': '" + target + "' ";
  if (S_ISDIR(st.st_mode)) throw io_error(where + "is a directory; name a file to write", EISDIR);
  throw io_error(where + "is not a regular file (" + kind +
                     "): gbf writes a new file and renames it over the old one, which would replace that node "
                     "itself; name a regular file",
                 EINVAL);
}

atomic_file_sink::atomic_file_sink(const std::string& path) : path_(path), target_(resolve_for_save(path)) {
  // The new file takes the old one's permissions (and owner, where this process
  // may give it): a rewrite must not turn a 0600 file into a 0644 one.
  struct stat old {};
  if (existing_regular_file("save", path_, target_, &old)) {
    replaces_existing_ = true;
    old_mode_ = old.st_mode & 07777;
    old_uid_ = old.st_uid;
    old_gid_ = old.st_gid;
  }
  const std::string dir = directory_prefix(target_);
  remove_stale_temps(dir, name_stem(file_name(target_)));
  const char* mode = std::getenv("GBF_TEMP_FILES");
  if (mode == nullptr || std::strcmp(mode, "named") != 0) {
    fd_ = ::open(dir.empty() ? "." : dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    // linkat can name the inode only through /proc (AT_EMPTY_PATH needs
    // CAP_DAC_READ_SEARCH): without /proc, write to a named file instead.
    struct stat st {};
    if (fd_ >= 0 && ::stat(proc_fd_path(fd_).c_str(), &st) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  unnamed_ = fd_ >= 0;
  if (!unnamed_) open_named();
  // Held until the descriptor closes: tells the stale sweep of other processes
  // that this temporary is alive once it has a name.
  ::flock(fd_, LOCK_EX | LOCK_NB);
}

// The name is registered for removal on a fatal signal before it exists, so no
// instant has the file on disk but unregistered (the pid in it makes it ours).
void atomic_file_sink::open_named() {
  const std::string base = directory_prefix(target_) + name_stem(file_name(target_)) + ".tmp." +
                           std::to_string(::getpid()) + ".";
  for (int attempt = 0;; ++attempt) {
    temp_path_ = base + std::to_string(temp_counter++);
    cleanup_slot_ = register_for_cleanup(temp_path_);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    const int err = errno;
    unregister_cleanup(cleanup_slot_);
    const std::string failed = temp_path_;
    temp_path_.clear();
    // EEXIST: a stale temporary of an earlier process that had our pid.
    errno = err;
    if (err != EEXIST || attempt == 100) fail("cannot create temporary file '" + failed + "'");
  }
}

void atomic_file_sink::link_unnamed() {
  const std::string base = directory_prefix(target_) + name_stem(file_name(target_)) + ".tmp." +
                           std::to_string(::getpid()) + ".";
  const std::string proc = proc_fd_path(fd_);
  for (int attempt = 0;; ++attempt) {
    temp_path_ = base + std::to_string(temp_counter++);
    cleanup_slot_ = register_for_cleanup(temp_path_);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp_path_.c_str(), AT_SYMLINK_FOLLOW) == 0) return;
    const int err = errno;
    unregister_cleanup(cleanup_slot_);
    const std::string failed = temp_path_;
    temp_path_.clear();
    errno = err;
    if (err != EEXIST || attempt == 100) fail("cannot link the temporary file as '" + failed + "'");
  }
}

atomic_file_sink::~atomic_file_sink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  unregister_cleanup(cleanup_slot_);
}

void atomic_file_sink::check_open(const char* call) const {
  if (commit_called_)
    throw invalid_argument("save '" + path_ + "': " + call + " after commit() " +
                           (committed_ ? "(the file is saved already)"
                                       : "failed (the target is as it was; write the file again with a new atomic_file)"));
}

void atomic_file_sink::write(const std::uint8_t* data, std::size_t n) {
  check_open("write()");
  while (n > 0) {
    const ssize_t written = ::write(fd_, data, n);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail(unnamed_ ? "cannot write the temporary file" : "cannot write '" + temp_path_ + "'");
    }
    data += written;
    n -= static_cast<std::size_t>(written);
  }
}

void atomic_file_sink::commit() {
  check_open("commit()");
  commit_called_ = true;
  if (replaces_existing_) {
    // Owner first: chown clears the set-id bits that chmod then restores. A
    // process that may not give the file away (EPERM) leaves it its own, as
    // any rename-based rewrite must.
    if (::fchown(fd_, old_uid_, old_gid_) != 0 && errno != EPERM) fail("cannot set the owner of the new file");
    if (::fchmod(fd_, old_mode_) != 0) fail("cannot set the permissions of the new file");
  }
  if (::fsync(fd_) != 0) fail(unnamed_ ? "cannot fsync the temporary file" : "cannot fsync '" + temp_path_ + "'");
  if (unnamed_) link_unnamed();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close '" + temp_path_ + "'");
  {
    // One step for a signal handler: the file is in place exactly when
    // any_save_committed() says so, and the temporary's name, renamed away,
    // is no longer registered (another process may reuse it).
    const fatal_signals_blocked blocked;
    if (std::rename(temp_path_.c_str(), target_.c_str()) != 0)
      fail("cannot rename '" + temp_path_ + "' to '" + target_ + "'");
    committed_ = true;
    save_committed.store(true, std::memory_order_relaxed);
    unregister_cleanup(cleanup_slot_);
  }
  sync_directory();
}

void atomic_file_sink::fail(const std::string& what) const {
  const int err = errno;
  throw io_error("save '" + path_ + "': " + what + ": " + os_text(err), err);
}

// The rename itself is durable only once the directory entry is on disk.
// Some file systems cannot fsync a directory (EINVAL); the data is then as
// durable as that file system makes renames.
void atomic_file_sink::sync_directory() const {
  const std::string prefix = directory_prefix(target_);
  const std::string dir = prefix.empty() ? "." : prefix.size() == 1 ? "/" : prefix.substr(0, prefix.size() - 1);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory '" + dir + "' to fsync it");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  errno = err;
  if (rc != 0 && err != EINVAL) fail("cannot fsync directory '" + dir + "'");
}

// ---------------------------------------------------------------------------
// write_lock
// ---------------------------------------------------------------------------

// Unlike a temporary's name, the lock file's is shared with other processes,
// so it cannot be registered before it is ours; and a signal between its
// creation and its registration would leave it behind (3% of SIGINTs sent
// the instant the file appeared, on a loaded 2-core machine). So the fatal
// signals stay blocked from the open to the registration, and a wait for
// another process's lock polls flock in 10 ms sleeps (ppoll) that restore the
// caller's mask meanwhile: a blocking flock would have to run with them
// blocked, and Ctrl-C would no longer end a waiting process.
write_lock::write_lock(const std::string& target, bool wait)
    : lock_path_(directory_prefix(target) + "." + name_stem(file_name(target)) + ".gbf-lock") {
  const fatal_signals_blocked blocked;
  const auto fail = [&](const std::string& what) {
    const int err = errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw io_error("lock '" + target + "': " + what + ": " + os_text(err), err);
  };
  for (;;) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd_ < 0) fail("cannot open lock file '" + lock_path_ + "'");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) fail("cannot lock '" + lock_path_ + "'");
      if (!wait) {
        char text[24] = {};
        const ssize_t n = ::pread(fd_, text, sizeof text - 1, 0);
        const long holder = n > 0 ? std::strtol(text, nullptr, 10) : 0;
        ::close(fd_);
        fd_ = -1;
        // flock locks belong to open files: another file_lock of this process
        // (another thread's write, or one still held here) refuses it as well.
        if (holder == static_cast<long>(::getpid()))
          throw io_error("'" + target + "' is locked by this process (pid " + std::to_string(holder) +
                             "): another write to it is in progress here",
                         EWOULDBLOCK);
        throw io_error("'" + target + "' is locked by another gbf process" +
                           (holder > 0 ? " (pid " + std::to_string(holder) + ")" : std::string()) +
                           " writing it",
                       EWOULDBLOCK);
      }
      while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) fail("cannot lock '" + lock_path_ + "'");
        const timespec pause{0, 10'000'000};
        ::ppoll(nullptr, 0, &pause, &blocked.previous());
      }
    }
    // The previous holder may have removed the file we locked: the lock is
    // ours only if the path still names this inode.
    struct stat held {}, named {};
    if (::fstat(fd_, &held) != 0) fail("cannot stat lock file '" + lock_path_ + "'");
    if (::lstat(lock_path_.c_str(), &named) == 0 && named.st_ino == held.st_ino &&
        named.st_dev == held.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  cleanup_slot_ = register_for_cleanup(lock_path_);
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid only improves the message another process prints.
  }
}

write_lock::~write_lock() {
  // Blocked: a handler running between the unlink and the unregistration
  // would unlink the path again, by then maybe another process's lock file.
  const fatal_signals_blocked blocked;
  ::unlink(lock_path_.c_str());
  unregister_cleanup(cleanup_slot_);
  ::close(fd_);
}

bool any_save_committed() noexcept { return save_committed.load(std::memory_order_relaxed); }

void remove_unfinished_files() noexcept {
  for (cleanup_slot& slot : cleanup)
    if (slot.state.load(std::memory_order_acquire) == 2) ::unlink(slot.path);
}

}  // namespace gbf::detail
