// gbf/files.hpp: the crash-safe save and the writer lock as applications use them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "gbf/error.hpp"
#include "gbf/files.hpp"
#include "tests/io/io_support.hpp"

namespace gbf::test {
namespace {

bytes text(const std::string& s) { return bytes(s.begin(), s.end()); }

/// The message of the invalid_argument `call` throws; another outcome says what it was instead.
std::string misuse_message(const std::function<void()>& call) {
  try {
    call();
  } catch (const invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(not invalid_argument) ") + e.what();
  }
  return "(no error)";
}

TEST(AtomicFile, CommitReplacesTheTargetWithExactlyWhatWasWritten) {
  temp_dir dir;
  const std::string path = dir.file("out.bin");
  write_all(path, text("old contents"));
  {
    atomic_file out(path);
    out.write("new ", 4);
    out.write("contents!", 9);
    EXPECT_EQ(read_all(path), text("old contents"));  // untouched until commit
    out.commit();
  }
  EXPECT_EQ(read_all(path), text("new contents!"));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, DestroyedWithoutCommitLeavesTheTargetAndNoTemporary) {
  temp_dir dir;
  const std::string path = dir.file("keep.bin");
  write_all(path, text("keep me"));
  {
    atomic_file out(path);
    out.write("half", 4);
  }
  EXPECT_EQ(read_all(path), text("keep me"));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"keep.bin"});
}

TEST(AtomicFile, MovedFileCommitsOnce) {
  temp_dir dir;
  const std::string path = dir.file("moved.bin");
  atomic_file first(path);
  first.write("abc", 3);
  atomic_file second = std::move(first);
  second.commit();
  EXPECT_EQ(read_all(path), text("abc"));
  EXPECT_EQ(second.target(), path);
}

TEST(AtomicFile, MisuseIsAnInvalidArgumentNotAnOsError) {
  temp_dir dir;
  const std::string path = dir.file("once.bin");
  atomic_file first(path);
  atomic_file second = std::move(first);
  for (const auto& call : std::vector<std::function<void()>>{[&] { first.write("x", 1); },  // NOLINT(bugprone-use-after-move)
                                                             [&] { first.commit(); },
                                                             [&] { (void)first.target(); }})
    EXPECT_NE(misuse_message(call).find("moved from"), std::string::npos);
  EXPECT_NE(misuse_message([&] { second.write(nullptr, 3); }).find("null"), std::string::npos);
  second.write("abc", 3);
  second.commit();
  EXPECT_NE(misuse_message([&] { second.write("d", 1); }).find("write() after commit() (the file is saved"),
            std::string::npos);
  EXPECT_NE(misuse_message([&] { second.commit(); }).find("commit() after commit()"), std::string::npos);
  EXPECT_EQ(read_all(path), text("abc"));

  // A commit that fails (its directory is gone: the unnamed temporary cannot be
  // linked there) cannot be retried or written on: the caller starts over.
  const std::string sub = dir.file("sub");
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  atomic_file doomed(sub + "/out.bin");
  doomed.write("abc", 3);
  if (::rmdir(sub.c_str()) != 0) GTEST_SKIP() << "named temporaries (GBF_TEMP_FILES=named or no O_TMPFILE) keep the directory";
  EXPECT_THROW(doomed.commit(), io_error);
  EXPECT_NE(misuse_message([&] { doomed.commit(); }).find("commit() after commit() failed"),
            std::string::npos);
  EXPECT_THROW(doomed.write("d", 1), invalid_argument);
}

TEST(AtomicFile, MissingDirectoryIsAnIoErrorNamingThePath) {
  temp_dir dir;
  const std::string path = dir.file("no/such/dir/out.bin");
  try {
    atomic_file out(path);
    FAIL() << "expected io_error";
  } catch (const io_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_EQ(e.os_error(), ENOENT);
  }
}

// A save renames a new file over its target, which would replace a FIFO or a
// device node itself (as root, `-o /dev/null` made /dev/null a plain file).
TEST(AtomicFile, ATargetThatIsNotARegularFileIsRefusedAndLeftAsItWas) {
  temp_dir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string folder = dir.file("folder");
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  for (const auto& [path, says, err] : {std::tuple{fifo, "is not a regular file (a FIFO)", EINVAL},
                                        std::tuple{folder, "is a directory", EISDIR}}) {
    try {
      atomic_file out(path);
      FAIL() << path << " was opened for replacement";
    } catch (const io_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_EQ(e.os_error(), err);
    }
    EXPECT_THROW(file_lock(path, false), io_error);  // refused before a lock file exists
  }
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"fifo", "folder"}));
}

// A rewrite must not widen a file's permissions (a 0600 file became 0644).
TEST(AtomicFile, AReplacedFileKeepsItsPermissions) {
  temp_dir dir;
  const std::string path = dir.file("secret.bin");
  for (const mode_t mode : {mode_t{0600}, mode_t{0640}, mode_t{0444}}) {
    write_all(path, text("old"));
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    atomic_file out(path);
    out.write("new", 3);
    out.commit();
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode);
    EXPECT_EQ(read_all(path), text("new"));
  }
}

TEST(FileLock, SecondWriterWithoutWaitIsRefusedWhileTheFirstHoldsIt) {
  temp_dir dir;
  const std::string path = dir.file("locked.gbf");
  {
    file_lock held(path, false);
    // flock is per open file description, so a second lock in this process conflicts too.
    try {
      file_lock second(path, false);
      FAIL() << "expected io_error";
    } catch (const io_error& e) {
      EXPECT_EQ(e.os_error(), EWOULDBLOCK) << e.what();
      // It names this process as the holder, not "another gbf process".
      EXPECT_NE(std::string(e.what()).find("locked by this process (pid " + std::to_string(::getpid()) + ")"),
                std::string::npos)
          << e.what();
    }
  }
  file_lock again(path, false);  // released with the first holder
  SUCCEED();
}

TEST(FileLock, WaitingWriterGetsTheLockWhenTheHolderReleasesIt) {
  temp_dir dir;
  const std::string path = dir.file("wait.gbf");
  auto held = std::make_unique<file_lock>(path, false);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held.reset();
  });
  file_lock waited(path, true);
  releaser.join();
  EXPECT_EQ(held, nullptr);
  // The waiter waited on the holder's lock file, which the holder removed before
  // unlocking: the waiter must hold the lock of the path as it is now, so that a
  // new writer is still refused (holding the removed file's lock would let it in).
  try {
    file_lock third(path, false);
    ADD_FAILURE() << "a new writer got the lock while the waiter holds it";
  } catch (const io_error& e) {
    EXPECT_EQ(e.os_error(), EWOULDBLOCK) << e.what();
  }
}

TEST(FileLock, ReleasedLockLeavesNoLockFile) {
  temp_dir dir;
  const std::string path = dir.file("clean.gbf");
  { file_lock held(path, false); }
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace gbf::test
