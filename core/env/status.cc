#include "core/env/status.h"

namespace onceflow {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kTimeout: return "Timeout";
    case StatusCode::kUnreachable: return "Unreachable";
    case StatusCode::kConflict: return "Conflict";
    case StatusCode::kPrerequisiteFailed: return "PrerequisiteFailed";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kAmbiguous: return "Ambiguous";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kCorruption: return "Corruption";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  std::string out(status_code_name(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

}  // namespace onceflow
