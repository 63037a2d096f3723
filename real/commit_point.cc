#include "real/commit_point.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace onceflow::real {
namespace {

constexpr char kHeading[] = "onceflow commit point";

Status unavailable(const std::string& file, const std::string& what) {
  return Status::unavailable(fmt::format("cannot record the commit point in {}: {}: {}", file, what, std::strerror(errno)));
}

// Writes all of `text` to `fd`.
bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Result<std::optional<CommitPoint>> read_commit_point(const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::optional<CommitPoint>();
  std::ifstream in(file);
  if (!in) return Status::corruption(fmt::format("cannot read the commit point in {}", file));
  std::string heading, version_word, generation_word;
  CommitPoint point;
  std::string rest;
  std::getline(in, heading);
  in >> version_word >> point.version >> generation_word >> point.generation;
  const bool parsed = !in.fail() && heading == kHeading && version_word == "version" && generation_word == "generation";
  in >> std::ws;
  if (!parsed || !in.eof()) {
    return Status::corruption(fmt::format(
        "{} does not hold a commit point: it was damaged; restore it, or remove it to open the store without the check",
        file));
  }
  return std::optional<CommitPoint>(point);
}

Status write_commit_point(const std::string& file, const CommitPoint& point) {
  const std::string temp = file + ".new";
  const std::string text = fmt::format("{}\nversion {}\ngeneration {}\n", kHeading, point.version, point.generation);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return unavailable(file, "open " + temp);
  const bool written = write_all(fd, text) && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (!written) return unavailable(file, "write " + temp);
  if (::rename(temp.c_str(), file.c_str()) != 0) return unavailable(file, "rename");
  const std::string dir = std::filesystem::path(file).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return unavailable(file, "open its directory");
  const bool synced = ::fsync(dir_fd) == 0;
  const int sync_error = errno;
  ::close(dir_fd);
  errno = sync_error;
  if (!synced) return unavailable(file, "sync its directory");
  return Status::ok();
}

Status check_commit_point(const std::string& store_dir, const std::string& file, const CommitPoint& held,
                          const CommitPoint& recorded) {
  if (held.version >= recorded.version && held.generation >= recorded.generation) return Status::ok();
  if (held == CommitPoint{}) {
    return Status::corruption(fmt::format(
        "the store in {} is new, but {} records version {} of life {}: the store was deleted or reset; refusing to "
        "start afresh (restore the store's files, or remove {} to start a new store)",
        store_dir, file, recorded.version, recorded.generation, file));
  }
  return Status::corruption(fmt::format(
      "the store in {} is behind its commit point (version {} of life {}, but {} records version {} of life {}): "
      "files of the store were lost or rolled back and acknowledged commits with them; restore the store's files, "
      "or remove {} to accept the loss",
      store_dir, held.version, held.generation, file, recorded.version, recorded.generation, file));
}

}  // namespace onceflow::real
