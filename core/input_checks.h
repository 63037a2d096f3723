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

// The first key some mapping in `node` (at any depth) holds twice, and its 1-based line.
std::optional<std::pair<std::string, int>> duplicate_key(const YAML::Node& node);

// `value` as an error message may quote it: at most 40 characters, one line.
std::string short_value(std::string_view value);

// An error message fit for one line: each '...'-quoted value cut to a short prefix, line
// breaks made spaces, and at most 400 characters in all.
std::string bounded_message(std::string_view message);

}  // namespace onceflow
