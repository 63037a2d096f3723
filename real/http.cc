#include "real/http.h"

#include <algorithm>

#include <httplib.h>

#include <fmt/format.h>

namespace onceflow::real {

Result<HttpUrl> parse_http_url(std::string_view url) {
  const std::string shown = shown_url(url);
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return Status::invalid_argument(fmt::format("'{}' is not a URL (expected http://host:port/path)", shown));
  }
  const std::string_view scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return Status::invalid_argument(fmt::format("'{}': only http:// and https:// URLs are supported", shown));
  }
  const size_t authority_begin = scheme_end + 3;
  const size_t path_begin = url.find_first_of("/?", authority_begin);
  std::string_view authority = url.substr(authority_begin, path_begin - authority_begin);
  HttpUrl out;
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    const size_t colon = userinfo.find(':');
    out.user = std::string(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) out.password = std::string(userinfo.substr(colon + 1));
    authority = authority.substr(at + 1);
    if (out.user.empty()) return Status::invalid_argument(fmt::format("'{}' names no user before its '@'", shown));
  }
  if (authority.empty() || authority.find_first_of(" \t") != std::string_view::npos) {
    return Status::invalid_argument(fmt::format("'{}' names no host (expected http://host:port/path)", shown));
  }
  out.origin = fmt::format("{}://{}", scheme, authority);
  out.target = path_begin == std::string_view::npos ? "/" : std::string(url.substr(path_begin));
  if (out.target.front() == '?') out.target.insert(out.target.begin(), '/');
  out.shown = shown;
  return out;
}

std::string shown_url(std::string_view url) {
  std::string out(url);
  // user:password@ in the authority.
  if (const size_t scheme_end = out.find("://"); scheme_end != std::string::npos) {
    const size_t authority_begin = scheme_end + 3;
    const size_t path_begin = std::min(out.find_first_of("/?", authority_begin), out.size());
    const size_t at = out.rfind('@', path_begin);
    const size_t colon = at == std::string::npos || at < authority_begin ? std::string::npos : out.find(':', authority_begin);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  // A password=... parameter of the query (ClickHouse's).
  for (size_t at = out.find('?'); at != std::string::npos; at = out.find('&', at + 1)) {
    constexpr std::string_view kParam = "password=";
    if (out.compare(at + 1, kParam.size(), kParam) != 0) continue;
    const size_t begin = at + 1 + kParam.size();
    out.replace(begin, std::min(out.find('&', begin), out.size()) - begin, "***");
  }
  return out;
}

bool HttpReply::transient() const {
  if (outcome != Outcome::kAnswered) return true;
  return status == 408 || status == 425 || status == 429 || status >= 500;
}

std::string HttpReply::describe() const {
  if (outcome != Outcome::kAnswered) return error;
  std::string text = body.substr(0, 200);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text.empty() ? fmt::format("answered {}", status) : fmt::format("answered {}: {}", status, text);
}

namespace {

HttpReply reply_of(const httplib::Result& result) {
  HttpReply out;
  if (result) {
    out.outcome = HttpReply::Outcome::kAnswered;
    out.status = result->status;
    out.body = result->body;
    return out;
  }
  const httplib::Error e = result.error();
  // No connection was made: the server cannot have seen the request.
  const bool not_sent = e == httplib::Error::Connection || e == httplib::Error::BindIPAddress ||
                        e == httplib::Error::ConnectionTimeout || e == httplib::Error::SSLConnection ||
                        e == httplib::Error::SSLLoadingCerts || e == httplib::Error::SSLServerVerification;
  out.outcome = not_sent ? HttpReply::Outcome::kNotSent : HttpReply::Outcome::kNoAnswer;
  switch (e) {
    case httplib::Error::Connection: out.error = "could not connect"; break;
    case httplib::Error::ConnectionTimeout: out.error = "connecting timed out"; break;
    case httplib::Error::Read: out.error = "no answer (the connection failed or timed out while reading)"; break;
    case httplib::Error::Write: out.error = "the request could not be sent whole"; break;
    default: out.error = "HTTP error: " + httplib::to_string(e); break;
  }
  return out;
}

httplib::Headers headers_of(const HttpClient::Headers& headers) {
  httplib::Headers out;
  for (const auto& [name, value] : headers) out.emplace(name, value);
  return out;
}

}  // namespace

HttpClient::HttpClient(const HttpUrl& url, Micros timeout) : client_(std::make_unique<httplib::Client>(url.origin)) {
  if (!url.user.empty()) client_->set_basic_auth(url.user, url.password);
  const auto t = std::chrono::microseconds(timeout);
  client_->set_connection_timeout(t);
  client_->set_read_timeout(t);
  client_->set_write_timeout(t);
  client_->set_keep_alive(true);
  // A request's headers and body go in two writes: without this, Nagle's algorithm holds the
  // second back until the server's delayed ACK of the first (40 ms a request).
  client_->set_tcp_nodelay(true);
}

HttpClient::~HttpClient() = default;

HttpReply HttpClient::post(const std::string& target, const Headers& headers, std::string_view body,
                           const std::string& content_type) {
  return reply_of(client_->Post(target, headers_of(headers), body.data(), body.size(), content_type));
}

HttpReply HttpClient::get(const std::string& target, const Headers& headers) {
  return reply_of(client_->Get(target, headers_of(headers)));
}

std::string query_param(const std::string& text) { return httplib::detail::encode_query_param(text); }

}  // namespace onceflow::real
