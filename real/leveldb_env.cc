#include "real/leveldb_env.h"

#include <leveldb/env.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
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

// A table file: LevelDB's own file, its writeback paced by kPaceBytes. Pacing happens at a
// Flush() (LevelDB's after every block, or ours once a chunk is appended), when everything
// appended is in the kernel; `fd` is a second descriptor of the file, for sync_file_range
// (-1: unpaced).
class PacedFile final : public leveldb::WritableFile {
 public:
  PacedFile(std::string name, leveldb::WritableFile* file, int fd) : name_(std::move(name)), file_(file), fd_(fd) {}
  ~PacedFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  leveldb::Status Append(const leveldb::Slice& data) override {
    leveldb::Status s = file_->Append(data);
    appended_ += data.size();
    return s.ok() && fd_ >= 0 && appended_ - started_ >= kPaceBytes ? Flush() : s;
  }
  leveldb::Status Flush() override {
    leveldb::Status s = file_->Flush();
    return s.ok() && fd_ >= 0 && appended_ - started_ >= kPaceBytes ? pace() : s;
  }
  leveldb::Status Sync() override { return file_->Sync(); }
  leveldb::Status Close() override { return file_->Close(); }

 private:
  // Starts the writeback of [started_, appended_) and waits for that of [waited_, started_).
  leveldb::Status pace() {
    if (!range(started_, appended_, SYNC_FILE_RANGE_WRITE) ||
        !range(waited_, started_, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)) {
      // A writeback that failed fails the file (the error is reported once: a later sync
      // would not see it); anything else (no support, a sandbox's refusal) leaves it unpaced.
      if (errno == EIO || errno == ENOSPC || errno == EDQUOT) return io_error(name_);
      ::close(std::exchange(fd_, -1));
      return leveldb::Status::OK();
    }
    waited_ = started_;
    started_ = appended_;
    chunks.fetch_add(1, std::memory_order_relaxed);
    return leveldb::Status::OK();
  }
  bool range(size_t from, size_t to, unsigned flags) const {
    return from == to || ::sync_file_range(fd_, static_cast<off_t>(from), static_cast<off_t>(to - from), flags) == 0;
  }

  std::string name_;
  std::unique_ptr<leveldb::WritableFile> file_;
  int fd_;
  size_t appended_ = 0;  // in the kernel once flushed
  size_t started_ = 0;   // writeback started below this
  size_t waited_ = 0;    // written back below this
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
    leveldb::Status s = EnvWrapper::NewWritableFile(name, out);
    if (!s.ok() || !name.ends_with(".ldb")) return s;  // the log and the manifest are not paced
    *out = new PacedFile(name, *out, ::open(name.c_str(), O_RDONLY | O_CLOEXEC));
    return s;
  }
};

}  // namespace

uint64_t paced_chunks() { return chunks.load(std::memory_order_relaxed); }

leveldb::Env* store_env() {
  static StoreEnv* const env = new StoreEnv;
  return env;
}

}  // namespace onceflow::real
