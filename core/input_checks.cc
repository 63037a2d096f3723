#include "core/input_checks.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <tuple>
#include <vector>

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

namespace {

// A node's place in the text: one per node, and the same for an alias as for its anchor.
using Place = std::tuple<int, int, int>;
Place place_of(const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return {m.pos, m.line, m.column};
}

struct YamlWalk {
  std::set<Place> walked;     // collections walked already
  std::vector<Place> inside;  // the collections the walk is in now
  size_t nodes = 0;

  std::optional<YamlProblem> walk(const YAML::Node& node) {
    const int line = node.Mark().line + 1;
    if (++nodes > kYamlNodesMax) return YamlProblem{fmt::format("more than {} nodes", kYamlNodesMax), line};
    if (!node.IsMap() && !node.IsSequence()) return std::nullopt;
    const Place here = place_of(node);
    if (std::find(inside.begin(), inside.end(), here) != inside.end()) {
      return YamlProblem{"an alias refers to a node that contains it", line};
    }
    if (!walked.insert(here).second) return std::nullopt;  // an alias to a node walked already
    if (inside.size() >= static_cast<size_t>(kYamlDepthMax)) {
      return YamlProblem{fmt::format("nested deeper than {} levels", kYamlDepthMax), line};
    }
    inside.push_back(here);
    std::optional<YamlProblem> problem;
    if (node.IsMap()) {
      std::set<std::string> seen;
      for (const auto& entry : node) {
        if (entry.first.IsScalar() && !seen.insert(entry.first.Scalar()).second) {
          problem = YamlProblem{fmt::format("key '{}' appears twice in one mapping", short_value(entry.first.Scalar())),
                                entry.first.Mark().line + 1};
        }
        if (!problem) problem = walk(entry.second);
        if (problem) break;
      }
    } else {
      for (const auto& item : node) {
        problem = walk(item);
        if (problem) break;
      }
    }
    inside.pop_back();
    return problem;
  }
};

}  // namespace

std::optional<YamlProblem> yaml_problem(const YAML::Node& node) { return YamlWalk{}.walk(node); }

}  // namespace onceflow
