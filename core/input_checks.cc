#include "core/input_checks.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>
#include <system_error>

namespace onceflow {

std::string short_value(std::string_view value) {
  constexpr size_t kShown = 40;
  std::string out;
  for (const char c : value.substr(0, kShown)) out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  if (value.size() > kShown) out += "...";
  return out;
}

std::string bounded_message(std::string_view message) {
  std::string out;
  size_t at = 0;
  while (at < message.size()) {
    const size_t open = message.find('\'', at);
    const size_t close = open == std::string_view::npos ? open : message.find('\'', open + 1);
    if (close == std::string_view::npos) {
      out += message.substr(at);
      break;
    }
    out += message.substr(at, open + 1 - at);
    out += short_value(message.substr(open + 1, close - open - 1));
    out += '\'';
    at = close + 1;
  }
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  constexpr size_t kLongest = 400;
  if (out.size() > kLongest) out = out.substr(0, kLongest) + "...";
  return out;
}

Status check_input_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return Status::invalid_argument(short_value(path) + ": " + ec.message());
  }
  if (ec || !std::filesystem::exists(status)) return Status::invalid_argument(short_value(path) + ": no such file");
  if (std::filesystem::is_directory(status)) return Status::invalid_argument(short_value(path) + ": is a directory");
  return Status::ok();
}

std::optional<std::pair<std::string, int>> duplicate_key(const YAML::Node& node) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& entry : node) {
      if (entry.first.IsScalar() && !seen.insert(entry.first.Scalar()).second) {
        return std::make_pair(entry.first.Scalar(), entry.first.Mark().line + 1);
      }
      if (auto inner = duplicate_key(entry.second)) return inner;
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      if (auto inner = duplicate_key(item)) return inner;
    }
  }
  return std::nullopt;
}

}  // namespace onceflow
