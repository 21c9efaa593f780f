// The public face of the atomic save and the writer lock (gbf/files.hpp).
#include "gbf/files.hpp"

#include "gbf/error.hpp"
#include "host/io/atomic_file.hpp"

namespace gbf {
namespace {

detail::atomic_file_sink& open_sink(const std::unique_ptr<detail::atomic_file_sink>& sink) {
  if (!sink)
    throw invalid_argument("gbf::atomic_file: this object was moved from; assign an atomic_file to it "
                           "before using it");
  return *sink;
}

}  // namespace

atomic_file::atomic_file(const std::string& path)
    : sink_(std::make_unique<detail::atomic_file_sink>(path)) {}
atomic_file::~atomic_file() = default;
atomic_file::atomic_file(atomic_file&&) noexcept = default;
atomic_file& atomic_file::operator=(atomic_file&&) noexcept = default;

void atomic_file::write(const void* data, std::size_t bytes) {
  if (data == nullptr && bytes > 0)
    throw invalid_argument("gbf::atomic_file::write: data is null for " + std::to_string(bytes) + " bytes");
  open_sink(sink_).write(static_cast<const std::uint8_t*>(data), bytes);
}
void atomic_file::commit() { open_sink(sink_).commit(); }
const std::string& atomic_file::target() const { return open_sink(sink_).target(); }

file_lock::file_lock(const std::string& path, bool wait) {
  const std::string target = detail::resolve_links(path);
  detail::existing_regular_file("lock", path, target);
  lock_ = std::make_unique<detail::write_lock>(target, wait);
}
file_lock::~file_lock() = default;
file_lock::file_lock(file_lock&&) noexcept = default;
file_lock& file_lock::operator=(file_lock&&) noexcept = default;

void remove_unfinished_files() noexcept { detail::remove_unfinished_files(); }
bool any_save_committed() noexcept { return detail::any_save_committed(); }

}  // namespace gbf
