// Status and Result<T>: errors as values.
//
// A Status is either OK or one error code with a human-readable message. Operating errors
// (timeouts, conflicts, lost Leases, crashes of a peer) travel as Status values; programmer
// errors are assertions. Result<T> holds a T or a non-OK Status and is shaped like C++23
// std::expected (has_value(), value(), error()), so moving to std::expected is a rename.
//
// Thread-safety: values; no shared state.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace onceflow {

enum class StatusCode : uint8_t {
  kOk = 0,
  kTimeout,             // the peer did not answer in time; the request may or may not have run
  kUnreachable,         // the peer refused the connection; the request did not run
  kConflict,            // a write-write conflict with a transaction committed after our snapshot
  kPrerequisiteFailed,  // a prerequisite Lease is aborted, expired or unknown
  kUnavailable,         // the service cannot serve now; the request did not apply
  kAmbiguous,           // the commit may or may not have applied (its acknowledgement was lost)
  kNotFound,
  kInvalidArgument,
  kAborted,             // the operation was cancelled (e.g. the transaction was fenced)
  kCorruption,          // stored bytes failed to decode
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status ok() { return Status(); }
  static Status timeout(std::string_view msg) { return Status(StatusCode::kTimeout, msg); }
  static Status unreachable(std::string_view msg) {
    return Status(StatusCode::kUnreachable, msg);
  }
  static Status conflict(std::string_view msg) { return Status(StatusCode::kConflict, msg); }
  static Status prerequisite_failed(std::string_view msg) {
    return Status(StatusCode::kPrerequisiteFailed, msg);
  }
  static Status unavailable(std::string_view msg) {
    return Status(StatusCode::kUnavailable, msg);
  }
  static Status ambiguous(std::string_view msg) { return Status(StatusCode::kAmbiguous, msg); }
  static Status not_found(std::string_view msg) { return Status(StatusCode::kNotFound, msg); }
  static Status invalid_argument(std::string_view msg) {
    return Status(StatusCode::kInvalidArgument, msg);
  }
  static Status aborted(std::string_view msg) { return Status(StatusCode::kAborted, msg); }
  static Status corruption(std::string_view msg) { return Status(StatusCode::kCorruption, msg); }

  Status(StatusCode code, std::string_view msg) : code_(code), message_(msg) {}

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  bool is_timeout() const { return code_ == StatusCode::kTimeout; }
  bool is_unreachable() const { return code_ == StatusCode::kUnreachable; }
  bool is_conflict() const { return code_ == StatusCode::kConflict; }
  bool is_prerequisite_failed() const { return code_ == StatusCode::kPrerequisiteFailed; }
  bool is_unavailable() const { return code_ == StatusCode::kUnavailable; }
  bool is_ambiguous() const { return code_ == StatusCode::kAmbiguous; }
  bool is_not_found() const { return code_ == StatusCode::kNotFound; }
  bool is_invalid_argument() const { return code_ == StatusCode::kInvalidArgument; }
  bool is_aborted() const { return code_ == StatusCode::kAborted; }
  bool is_corruption() const { return code_ == StatusCode::kCorruption; }

  // "Conflict: key t/k written after snapshot 7" style; "OK" for success.
  std::string to_string() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T>: a T, or a non-OK Status. REQUIRES: the Status given is not OK.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit like std::expected
  Result(Status error) : v_(std::move(error)) {  // NOLINT
    assert(!std::get<Status>(v_).is_ok());
  }

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    assert(has_value());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Status& error() const {
    assert(!has_value());
    return std::get<Status>(v_);
  }
  // The Status of this result: OK when it holds a value.
  Status status() const { return has_value() ? Status::ok() : error(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace onceflow
