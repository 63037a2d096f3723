// How reports write a timer: the engine keys a timer's row "<trigger>/<key>/<stream>[/<unique>]"
// (core/emitted.h: the trigger with its sign bit flipped and the key, 16 hex digits each, so
// rows sort by trigger); reports write "(trigger 1.250000s, key 7, stream retry)" instead, in
// the forms of docs/cli.md. Header-only: the checkers use it without linking the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/env/clock.h"

namespace onceflow {

// A timer row read back: its trigger, key, stream and, when equal triggers are not merged,
// what made it unique.
struct TimerRowParts {
  Micros trigger_ts = 0;
  uint64_t key = 0;
  std::string_view stream;
  std::optional<std::string_view> unique;
};
// `row` as "<trigger>/<key>/<stream>[/<unique>]"; nullopt when it is not one.
inline std::optional<TimerRowParts> parse_timer_row(std::string_view row) {
  const auto hex16 = [](std::string_view s, uint64_t* v) {
    *v = 0;
    for (const char c : s) {
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      *v = *v << 4 | static_cast<uint64_t>(d);
    }
    return true;
  };
  uint64_t trigger = 0, key = 0;
  if (row.size() <= 34 || row[16] != '/' || row[33] != '/' || !hex16(row.substr(0, 16), &trigger) ||
      !hex16(row.substr(17, 16), &key)) {
    return std::nullopt;
  }
  TimerRowParts out;
  out.trigger_ts = static_cast<Micros>(trigger ^ (uint64_t{1} << 63));
  out.key = key;
  out.stream = row.substr(34);
  if (const size_t slash = out.stream.find('/'); slash != std::string_view::npos) {
    out.unique = out.stream.substr(slash + 1);
    out.stream = out.stream.substr(0, slash);
  }
  return out;
}

// `text` with the timer row at its end (after an optional prefix such as a table name and
// '/') written readably; `text` itself when it does not end in one.
inline std::string readable_timer(std::string_view text) {
  // The row starts at the last "<16 hex>/<16 hex>/" of the text.
  for (size_t at = text.size() >= 34 ? text.size() - 34 : std::string_view::npos; at != std::string_view::npos; --at) {
    if (at == 0 || text[at - 1] == '/') {
      if (const auto t = parse_timer_row(text.substr(at))) {
        return std::string(text.substr(0, at)) + "(trigger " + format_time(t->trigger_ts) + ", key " +
               std::to_string(t->key) + ", stream " + std::string(t->stream) +
               (t->unique ? ", #" + std::string(*t->unique) : "") + ")";
      }
    }
    if (at == 0) break;
  }
  return std::string(text);
}

}  // namespace onceflow
