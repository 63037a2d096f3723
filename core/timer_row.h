// How reports write a timer: the engine keys a timer's row "<trigger>/<key>/<stream>[/<unique>]"
// (core/emitted.h: the trigger with its sign bit flipped and the key, 16 hex digits each, so
// rows sort by trigger); reports write "(trigger 1.250000s, key 7, stream retry)" instead, in
// the forms of docs/cli.md. Header-only: the checkers use it without linking the engine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/env/clock.h"

namespace onceflow {

// `text` with the timer row at its end (after an optional prefix such as a table name and
// '/') written readably; `text` itself when it does not end in one.
inline std::string readable_timer(std::string_view text) {
  const auto hex16 = [](std::string_view s, uint64_t* v) {
    if (s.size() != 16) return false;
    *v = 0;
    for (const char c : s) {
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      *v = *v << 4 | static_cast<uint64_t>(d);
    }
    return true;
  };
  // The row starts at the last "<16 hex>/<16 hex>/" of the text.
  for (size_t at = text.size() >= 34 ? text.size() - 34 : std::string_view::npos; at != std::string_view::npos; --at) {
    uint64_t trigger = 0, key = 0;
    if ((at == 0 || text[at - 1] == '/') && text.size() > at + 34 && text[at + 16] == '/' && text[at + 33] == '/' &&
        hex16(text.substr(at, 16), &trigger) && hex16(text.substr(at + 17, 16), &key)) {
      std::string_view stream = text.substr(at + 34);
      std::string unique;
      if (const size_t slash = stream.find('/'); slash != std::string_view::npos) {
        unique = ", #" + std::string(stream.substr(slash + 1));
        stream = stream.substr(0, slash);
      }
      return std::string(text.substr(0, at)) + "(trigger " + format_time(static_cast<Micros>(trigger ^ (1ULL << 63))) +
             ", key " + std::to_string(key) + ", stream " + std::string(stream) + unique + ")";
    }
    if (at == 0) break;
  }
  return std::string(text);
}

}  // namespace onceflow
