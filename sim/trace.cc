#include "sim/trace.h"

#include <fmt/format.h>

#include "core/env/clock.h"
#include "core/env/random.h"

namespace onceflow::sim {

void Trace::record(Micros time, std::string_view node, std::string_view text) {
  ++recorded_;
  hash_ = mix64(hash_ ^ static_cast<uint64_t>(time));
  hash_ = mix64(hash_ ^ hash_bytes(node));
  hash_ = mix64(hash_ ^ hash_bytes(text));
  keep_only(time, node, text);
}

void Trace::keep_only(Micros time, std::string_view node, std::string_view text) {
  if (keep_lines_ == 0) return;
  lines_.push_back(fmt::format("{:>12} {:<12} {}", format_time(time), node, text));
  while (lines_.size() > keep_lines_) lines_.pop_front();
}

}  // namespace onceflow::sim
