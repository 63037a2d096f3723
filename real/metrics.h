// Metrics of an `onceflow real` process in Prometheus' text exposition format (version 0.0.4),
// served over HTTP by --metrics-port (GET /metrics, through cpp-httplib). Debian packages no
// Prometheus client library for C++, so the few lines of the format are written here.
//
// Counters end in _total, durations are in seconds (a histogram, _bucket/_sum/_count), and
// labels name what is counted (source, sink, partition, job). The engine's observer
// (real/deployment.cc) and the deployment's monitor update them; a scrape renders them.
//
// Thread-safety: every member may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/env/status.h"

namespace httplib {
class Server;
}

namespace onceflow::real {

class Metrics {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  enum class Type : uint8_t { kCounter, kGauge, kHistogram };
  // Every metric is described once, before it is used: its type and its HELP line.
  void describe(const std::string& name, Type type, const std::string& help);
  void add(const std::string& name, const Labels& labels, double value = 1);       // a counter
  void set(const std::string& name, const Labels& labels, double value);           // a gauge
  void observe(const std::string& name, const Labels& labels, double seconds);     // a histogram
  // Drops every series of gauge `name` (before setting the current ones: a partition that
  // went away is no longer reported).
  void clear(const std::string& name);
  std::string render() const;

 private:
  struct Histogram {
    std::vector<uint64_t> buckets;  // counts at or below each bound (not cumulative here)
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::map<std::string, double> values;  // by rendered label set ("{a=\"b\"}")
    std::map<std::string, Histogram> histograms;
  };
  Family& family(const std::string& name);
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// Serves `metrics` at http://ADDRESS:PORT/metrics on a thread of its own.
class MetricsServer {
 public:
  // Port 0: a free one. kUnavailable when it cannot listen (the port is taken).
  static Result<std::unique_ptr<MetricsServer>> start(const Metrics& metrics, const std::string& address, int port);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace onceflow::real
