// atomic_file_sink (host/io/atomic_file.hpp): temp file, fsync, rename, directory fsync.
#include "host/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gbf/error.hpp"

namespace gbf::detail {

atomic_file_sink::atomic_file_sink(const std::string& path) : path_(path) {
  static std::atomic<unsigned> counter{0};
  temp_path_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) fail("cannot create temporary file '" + temp_path_ + "'");
}

atomic_file_sink::~atomic_file_sink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void atomic_file_sink::write(const std::uint8_t* data, std::size_t n) {
  while (n > 0) {
    const ssize_t written = ::write(fd_, data, n);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("cannot write '" + temp_path_ + "'");
    }
    data += written;
    n -= static_cast<std::size_t>(written);
  }
}

void atomic_file_sink::commit() {
  if (::fsync(fd_) != 0) fail("cannot fsync '" + temp_path_ + "'");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close '" + temp_path_ + "'");
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0)
    fail("cannot rename '" + temp_path_ + "' to '" + path_ + "'");
  committed_ = true;
  sync_directory();
}

void atomic_file_sink::fail(const std::string& what) const {
  const int err = errno;
  throw io_error("save '" + path_ + "': " + what + ": " + std::strerror(err), err);
}

// The rename itself is durable only once the directory entry is on disk.
// Some file systems cannot fsync a directory (EINVAL); the data is then as
// durable as that file system makes renames.
void atomic_file_sink::sync_directory() const {
  const std::size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory '" + dir + "' to fsync it");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  errno = err;
  if (rc != 0 && err != EINVAL) fail("cannot fsync directory '" + dir + "'");
}

}  // namespace gbf::detail
