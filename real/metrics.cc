#include "real/metrics.h"

#include <httplib.h>
#include <sys/socket.h>

#include <array>
#include <cmath>

#include <fmt/format.h>

namespace onceflow::real {

namespace {

// Seconds: from 1 ms to 10 s, as a commit of the store or a delivery takes.
constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                            0.1,   0.25,   0.5,   1,    2.5,   10};

// A label value escaped as the format wants: backslash, double quote and newline.
std::string escaped(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string label_set(const Metrics::Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ',';
    out += fmt::format("{}=\"{}\"", name, escaped(value));
  }
  return out + "}";
}

// `set` ("{a=\"b\"}" or "") with one more label.
std::string with_label(const std::string& set, const std::string& label) {
  if (set.empty()) return "{" + label + "}";
  return set.substr(0, set.size() - 1) + "," + label + "}";
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

}  // namespace

void Metrics::describe(const std::string& name, Type type, const std::string& help) {
  const std::lock_guard lock(mu_);
  Family& f = families_[name];
  f.type = type;
  f.help = help;
}

Metrics::Family& Metrics::family(const std::string& name) { return families_[name]; }

void Metrics::add(const std::string& name, const Labels& labels, double value) {
  const std::lock_guard lock(mu_);
  family(name).values[label_set(labels)] += value;
}

void Metrics::set(const std::string& name, const Labels& labels, double value) {
  const std::lock_guard lock(mu_);
  family(name).values[label_set(labels)] = value;
}

void Metrics::clear(const std::string& name) {
  const std::lock_guard lock(mu_);
  family(name).values.clear();
}

void Metrics::observe(const std::string& name, const Labels& labels, double seconds) {
  const std::lock_guard lock(mu_);
  Histogram& h = family(name).histograms[label_set(labels)];
  if (h.buckets.empty()) h.buckets.assign(kBounds.size(), 0);
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++h.buckets[i];
      break;
    }
  }
  h.sum += seconds;
  ++h.count;
}

std::string Metrics::render() const {
  const std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    static constexpr std::array<const char*, 3> kTypes = {"counter", "gauge", "histogram"};
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, kTypes[static_cast<size_t>(f.type)]);
    for (const auto& [labels, value] : f.values) out += fmt::format("{}{} {}\n", name, labels, number(value));
    for (const auto& [labels, h] : f.histograms) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kBounds.size(); ++i) {
        cumulative += h.buckets[i];
        out += fmt::format("{}_bucket{} {}\n", name, with_label(labels, fmt::format("le=\"{}\"", kBounds[i])), cumulative);
      }
      out += fmt::format("{}_bucket{} {}\n", name, with_label(labels, "le=\"+Inf\""), h.count);
      out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, labels, number(h.sum), name, labels, h.count);
    }
  }
  return out;
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const Metrics& metrics, const std::string& address, int port) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->server_ = std::make_unique<httplib::Server>();
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a second process
  // listens on a port already taken and scrapes alternate between two pipelines' figures.
  s->server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s->server_->Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s->server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("onceflow real: metrics at /metrics\n", "text/plain");
  });
  if (port == 0) {
    s->port_ = s->server_->bind_to_any_port(address);
  } else {
    s->port_ = s->server_->bind_to_port(address, port) ? port : -1;
  }
  if (s->port_ <= 0) {
    return Status::unavailable(fmt::format("--metrics-port: cannot listen on {}:{} (taken?)", address, port));
  }
  httplib::Server* server = s->server_.get();
  s->thread_ = std::thread([server] { server->listen_after_bind(); });
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace onceflow::real
