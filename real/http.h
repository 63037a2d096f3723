// HTTP for the sinks of `onceflow real` that talk to servers (http, clickhouse), over
// cpp-httplib (Debian's libcpp-httplib: HTTP/1.1 with keep-alive, https when the URL says so).
//
// A call blocks: sinks make it through RealLoop::run_blocking, so the loop goes on. What a
// failed call means for a sink is how far the request may have got: kNotSent (no connection
// was made: the server cannot have seen it), kNoAnswer (the request may have reached the
// server and taken effect, and no answer came), or an answer with its status.
//
// Thread-safety: one HttpClient is used by one thread at a time.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env/clock.h"
#include "core/env/status.h"

namespace httplib {
class Client;
}

namespace onceflow::real {

// "http://[user:password@]host:port/path?query" (or https) split where a client needs it: the
// origin ("http://host:port"), the rest ("/path?query", "/" when empty), and the credentials,
// sent as HTTP Basic authentication (taken as written: the user ends at the first ':', the
// host starts after the last '@'). kInvalidArgument for anything else, naming what is wrong
// (never with the password).
struct HttpUrl {
  std::string origin;
  std::string target;
  std::string user;
  std::string password;
  std::string shown;  // the URL with the password as "***": for messages
  std::string path() const { return target.substr(0, target.find('?')); }
  // The query's parameters, without the '?' ("" when none).
  std::string query() const { return target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1); }
};
Result<HttpUrl> parse_http_url(std::string_view url);
// `url` as messages show it: its password, if it has one, as "***".
std::string shown_url(std::string_view url);

struct HttpReply {
  enum class Outcome : uint8_t { kAnswered, kNotSent, kNoAnswer };
  Outcome outcome = Outcome::kNotSent;
  int status = 0;       // kAnswered: the HTTP status
  std::string body;     // kAnswered: the answer's body
  std::string error;    // otherwise: what went wrong ("connection refused", "read timed out")
  bool ok() const { return outcome == Outcome::kAnswered && status >= 200 && status < 300; }
  // A failure that may pass if the request is made again: no answer, 408, 425, 429, 5xx.
  bool transient() const;
  // "answered 503: <the first 200 bytes of the body>", or the error: for messages.
  std::string describe() const;
};

// Whether a sink's server answers: since when it has not (by the loop's clock; -1: it answered
// the last request, or none was made), and the last failure. Kept by the sink on the loop's
// thread; the deployment stops the run once a server has not answered for --sink-timeout.
struct ServerHealth {
  Micros unreachable_since = -1;
  std::string last_error;
  void answered() { unreachable_since = -1; }
  void failed(Micros now, std::string error) {
    if (unreachable_since < 0) unreachable_since = now;
    last_error = std::move(error);
  }
};

// Attempts at a server that failed in a row, and the pause a sink makes before its next one:
// none after a success, 50 ms after the first failure, doubling up to 1 s. A target that is
// down or busy is then tried a few times a second, not at every epoch of every sink job.
class Backoff {
 public:
  void succeeded() { failures_ = 0; }
  void failed() { failures_ = failures_ < 16 ? failures_ + 1 : failures_; }
  Micros pause() const { return failures_ == 0 ? 0 : std::min<Micros>(kSeconds, (50 * kMillis) << (failures_ - 1)); }

 private:
  int failures_ = 0;
};

class HttpClient {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;
  // To `url`'s origin, with its credentials; `timeout` bounds connecting, and each read and write.
  HttpClient(const HttpUrl& url, Micros timeout);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpReply post(const std::string& target, const Headers& headers, std::string_view body,
                 const std::string& content_type);
  HttpReply get(const std::string& target, const Headers& headers = {});

 private:
  std::unique_ptr<httplib::Client> client_;
};

// `text` percent-encoded as the value of a URL's query parameter (SQL in ClickHouse's `query`).
std::string query_param(const std::string& text);

}  // namespace onceflow::real
