// Checks shared by the readers of user files (scenario files, pipeline specs): a path that
// cannot even be looked at, a YAML mapping with a key twice, and values too long to echo.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/env/status.h"

namespace YAML {
class Node;
}

namespace onceflow {

// Ok when `path` names an existing file; else one line naming the path (shortened) and why
// (no such file, name too long, permission denied...). Never throws.
Status check_input_file(const std::string& path);

// What makes a parsed YAML document unfit to read, with its 1-based line: a key some mapping
// holds twice; an alias inside the node it refers to (a cycle, which any reader would follow
// forever); nesting deeper than kYamlDepthMax; more than kYamlNodesMax nodes. The walk
// resolves each alias once (a node reached again through another alias is not walked again),
// so an alias bomb costs its size, not its expansion. nullopt when none.
inline constexpr int kYamlDepthMax = 64;
inline constexpr size_t kYamlNodesMax = 200'000;
struct YamlProblem {
  std::string what;
  int line = 0;
};
std::optional<YamlProblem> yaml_problem(const YAML::Node& node);

// `value` as an error message may quote it: at most 40 characters, one line.
std::string short_value(std::string_view value);

// An error message fit for one line: each '...'-quoted value cut to a short prefix, line
// breaks made spaces, and at most 400 characters in all.
std::string bounded_message(std::string_view message);

}  // namespace onceflow
