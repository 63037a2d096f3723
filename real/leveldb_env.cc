#include "real/leveldb_env.h"

#include <leveldb/env.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace onceflow::real {
namespace {

leveldb::Status io_error(const std::string& name) { return leveldb::Status::IOError(name, std::strerror(errno)); }

std::atomic<uint64_t> chunks{0};  // paced_chunks()

class PreadFile final : public leveldb::RandomAccessFile {
 public:
  PreadFile(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
  ~PreadFile() override { ::close(fd_); }
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result, char* scratch) const override {
    const ssize_t got = ::pread(fd_, scratch, n, static_cast<off_t>(offset));
    *result = leveldb::Slice(scratch, got < 0 ? 0 : static_cast<size_t>(got));
    return got < 0 ? io_error(name_) : leveldb::Status::OK();
  }

 private:
  std::string name_;
  int fd_;
};

// A table file written through to the kernel at each Flush() (LevelDB flushes after every
// block), its writeback paced by kPaceBytes.
class PacedFile final : public leveldb::WritableFile {
 public:
  PacedFile(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
  ~PacedFile() override {
    if (fd_ >= 0) (void)Close();  // as LevelDB's own file: what is buffered is written
  }
  leveldb::Status Append(const leveldb::Slice& data) override {
    buffer_.append(data.data(), data.size());
    return buffer_.size() >= kPaceBytes ? Flush() : leveldb::Status::OK();
  }
  leveldb::Status Flush() override {
    for (size_t done = 0; done < buffer_.size();) {
      const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        leveldb::Status failed = io_error(name_);
        buffer_.erase(0, done);  // what was written is not written again
        return failed;
      }
      done += static_cast<size_t>(n);
      written_ += static_cast<size_t>(n);
    }
    buffer_.clear();
    return !unpaced_ && written_ - started_ >= kPaceBytes ? pace() : leveldb::Status::OK();
  }
  leveldb::Status Sync() override {
    leveldb::Status s = Flush();
    if (s.ok() && ::fdatasync(fd_) != 0) s = io_error(name_);
    return s;
  }
  leveldb::Status Close() override {
    leveldb::Status s = Flush();
    if (::close(fd_) != 0 && s.ok()) s = io_error(name_);
    fd_ = -1;
    return s;
  }

 private:
  // Starts the writeback of [started_, written_) and waits for that of [waited_, started_).
  leveldb::Status pace() {
    if (!range(started_, written_, SYNC_FILE_RANGE_WRITE) ||
        !range(waited_, started_, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)) {
      // A writeback that failed fails the file (the error is reported once: a later sync
      // would not see it); anything else (no support, a sandbox's refusal) leaves it unpaced.
      if (errno == EIO || errno == ENOSPC || errno == EDQUOT) return io_error(name_);
      unpaced_ = true;
      return leveldb::Status::OK();
    }
    waited_ = started_;
    started_ = written_;
    chunks.fetch_add(1, std::memory_order_relaxed);
    return leveldb::Status::OK();
  }
  bool range(size_t from, size_t to, unsigned flags) const {
    return from == to || ::sync_file_range(fd_, static_cast<off_t>(from), static_cast<off_t>(to - from), flags) == 0;
  }

  std::string name_;
  int fd_;
  std::string buffer_;
  size_t written_ = 0;  // handed to the kernel
  size_t started_ = 0;  // writeback started below this
  size_t waited_ = 0;   // written back below this
  bool unpaced_ = false;
};

class StoreEnv final : public leveldb::EnvWrapper {
 public:
  StoreEnv() : EnvWrapper(leveldb::Env::Default()) {}
  leveldb::Status NewRandomAccessFile(const std::string& name, leveldb::RandomAccessFile** out) override {
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *out = nullptr;
      return errno == ENOENT ? leveldb::Status::NotFound(name, std::strerror(errno)) : io_error(name);
    }
    *out = new PreadFile(name, fd);
    return leveldb::Status::OK();
  }
  leveldb::Status NewWritableFile(const std::string& name, leveldb::WritableFile** out) override {
    if (!name.ends_with(".ldb")) return EnvWrapper::NewWritableFile(name, out);  // the log, the manifest
    const int fd = ::open(name.c_str(), O_TRUNC | O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      *out = nullptr;
      return io_error(name);
    }
    *out = new PacedFile(name, fd);
    return leveldb::Status::OK();
  }
};

}  // namespace

uint64_t paced_chunks() { return chunks.load(std::memory_order_relaxed); }

leveldb::Env* store_env() {
  static StoreEnv* const env = new StoreEnv;
  return env;
}

}  // namespace onceflow::real
