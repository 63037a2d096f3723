#include "core/connectors.h"

#include <charconv>

#include <fmt/format.h>

#include "core/env/random.h"

namespace onceflow {

uint64_t kafka_key(std::string_view bytes) {
  uint64_t key = 0;
  const auto [end, ec] = std::from_chars(bytes.data(), bytes.data() + bytes.size(), key);
  if (ec == std::errc() && end == bytes.data() + bytes.size() && !bytes.empty()) return key;
  return hash_bytes(bytes);
}

Status check_progress_marker(const std::string& job, const std::optional<uint64_t>& marker,
                             const std::vector<OutboxRow>& rows, const std::string& topic,
                             const std::string& progress_topic) {
  if (marker || rows.empty() || rows.front().seqno <= 1) return Status::ok();
  return Status::invalid_argument(fmt::format(
      "{}: the progress marker in {} is lost while its messages may already be in {}: stopping rather than "
      "writing duplicates",
      job, progress_topic, topic));
}

}  // namespace onceflow
