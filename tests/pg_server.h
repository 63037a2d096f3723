// A PostgreSQL server of a test's own: initdb into a temporary directory, listening on a
// Unix socket there only, stopped and removed with the object. Run as the `postgres` user
// when the test runs as root (initdb refuses root). tools/dev.sh installs Debian's server.
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "tests/temp_dir.h"

namespace onceflow::testing {

class PgServer {
 public:
  // The server, or nullptr with `why` set (no server binaries, initdb or start failed).
  static std::unique_ptr<PgServer> start(std::string* why) {
    const std::string bin = server_bin();
    if (bin.empty()) {
      *why = "no PostgreSQL server under /usr/lib/postgresql (tools/dev.sh deps installs it)";
      return nullptr;
    }
    auto server = std::unique_ptr<PgServer>(new PgServer(bin));
    std::filesystem::create_directories(server->dir_.str());
    if (::getuid() == 0) {
      const passwd* pg = ::getpwnam("postgres");
      if (pg == nullptr) {
        *why = "running as root and there is no postgres user";
        return nullptr;
      }
      server->as_ = "runuser -u postgres -- ";
      if (::chown(server->dir_.str().c_str(), pg->pw_uid, pg->pw_gid) != 0) {
        *why = "cannot hand " + server->dir_.str() + " to the postgres user";
        return nullptr;
      }
    }
    const std::string d = server->dir_.str();
    if (!server->sh(bin + "/initdb -D " + d + "/data -A trust -U postgres --no-sync -E UTF8 >" + d + "/initdb.log 2>&1")) {
      *why = "initdb failed (" + d + "/initdb.log)";
      return nullptr;
    }
    if (!server->sh(bin + "/pg_ctl -D " + d + "/data -w -t 60 -l " + d + "/server.log -o \"-k " + d +
                    " -c listen_addresses=''\" start >/dev/null 2>&1")) {
      *why = "the server did not start (" + d + "/server.log)";
      return nullptr;
    }
    server->running_ = true;
    return server;
  }
  ~PgServer() {
    if (running_) sh(bin_ + "/pg_ctl -D " + dir_.str() + "/data -m immediate -w stop >/dev/null 2>&1");
  }
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  std::string conninfo() const { return "host=" + dir_.str() + " dbname=postgres user=postgres"; }

 private:
  explicit PgServer(std::string bin) : bin_(std::move(bin)), dir_("pg") {}
  bool sh(const std::string& command) const { return std::system((as_ + command).c_str()) == 0; }
  // The newest installed server's bin directory.
  static std::string server_bin() {
    std::string best;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      const std::string bin = entry.path().string() + "/bin";
      if (std::filesystem::exists(bin + "/initdb") && bin > best) best = bin;
    }
    return best;
  }

  std::string bin_;
  TempDir dir_;
  std::string as_;  // the command prefix that runs as the postgres user, when root
  bool running_ = false;
};

}  // namespace onceflow::testing
