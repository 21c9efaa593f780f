// Byte sources and the word payload (host/io/byte_io.hpp).
#include "host/io/byte_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "gbf/filter.hpp"
#include "host/filter_access.hpp"
#include "host/number_text.hpp"

namespace gbf::detail {

file_source::file_source(const std::string& path) : byte_source("'" + path + "'") {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before the
  // regular-file check could refuse it. Reads of a regular file never block.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) fail_os("cannot open");
  struct stat st;
  if (::fstat(fd_, &st) != 0) fail_os("cannot stat");
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw io_error(name() + ": not a regular file" + (S_ISFIFO(st.st_mode) ? " (a FIFO)" : ""),
                   S_ISDIR(st.st_mode) ? EISDIR : EINVAL);
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

file_source::~file_source() { ::close(fd_); }

std::size_t file_source::read(std::uint8_t* dst, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    if (buffer_pos_ == buffer_len_) {
      if (n - done >= buffer_.size()) {  // large request: straight into dst
        const std::size_t got = read_some(dst + done, n - done);
        if (got == 0) break;
        done += got;
        continue;
      }
      buffer_len_ = read_some(buffer_.data(), buffer_.size());
      buffer_pos_ = 0;
      if (buffer_len_ == 0) break;
    }
    const std::size_t take = std::min(buffer_len_ - buffer_pos_, n - done);
    std::memcpy(dst + done, buffer_.data() + buffer_pos_, take);
    buffer_pos_ += take;
    done += take;
  }
  consumed_ += done;
  return done;
}

// One read(2), retried on EINTR; 0 at end of file.
std::size_t file_source::read_some(std::uint8_t* dst, std::size_t n) {
  for (;;) {
    const ssize_t got = ::read(fd_, dst, n);
    if (got >= 0) return static_cast<std::size_t>(got);
    if (errno != EINTR) fail_os("cannot read");
  }
}

void file_source::fail_os(const char* what) {
  const int err = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  throw io_error(std::string(what) + " " + name() + ": " + std::strerror(err), err);
}

void write_words(const filter& f, byte_sink& out, xxh64_stream* hash) {
  write_words_from(
      f.layout().num_words(),
      [&f](std::uint64_t first, std::size_t count, std::uint32_t* words) { f.copy_words(first, count, words); },
      out, hash);
}

void read_words_into(filter& f, byte_source& in, xxh64_stream* hash) {
  read_words_to(f.layout().num_words(), in, hash,
                [&f](std::uint64_t first, std::uint64_t count, const std::uint32_t* words) {
                  filter_access::write_words(f, first, count, words);
                });
}

bool recordable_fpp(double fpp) { return fpp == 0 || (fpp > 0 && fpp < 1); }

void check_recordable_fpp(const char* what, double fpp) {
  if (!recordable_fpp(fpp))
    throw invalid_argument(std::string(what) + ": fpp must be 0 (unknown) or in (0, 1), got " + number_text(fpp));
}

void check_buffer(const char* what, const std::uint8_t* data, std::size_t size) {
  if (data == nullptr && size > 0)
    throw invalid_argument(std::string(what) + ": data is null but size = " + std::to_string(size));
}

}  // namespace gbf::detail
