#include "cli/replay_filter.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

#include "core/engine.h"
#include "core/spec.h"

namespace onceflow::cli {
namespace {

std::string_view next_field(std::string_view& rest) {
  const size_t start = rest.find_first_not_of(' ');
  if (start == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(start);
  const size_t end = std::min(rest.find(' '), rest.size());
  std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end);
  return field;
}

}  // namespace

TraceLine split_trace_line(std::string_view line) {
  TraceLine out;
  out.time = next_field(line);
  out.node = next_field(line);
  const size_t start = line.find_first_not_of(' ');
  out.text = start == std::string_view::npos ? std::string_view() : line.substr(start);
  return out;
}

std::optional<Micros> trace_line_time(std::string_view line) {
  return parse_duration(split_trace_line(line).time);  // as format_time writes it
}

bool names_commit_tx(std::string_view text, const std::set<uint64_t>& txs) {
  if (txs.empty()) return false;
  // The job's attempt ("... lease L commits tx T: ...") and the store's answer to it ("commit tx
  // T version V writes N", "commit tx T rejected: ..."), which names no message.
  for (const std::string_view pattern : {std::string_view("commits tx "), std::string_view("commit tx ")}) {
    for (size_t at = text.find(pattern); at != std::string_view::npos; at = text.find(pattern, at + 1)) {
      if (at > 0 && text[at - 1] != ' ') continue;
      uint64_t tx = 0;
      const char* begin = text.data() + at + pattern.size();
      const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), tx);
      if (ec == std::errc() && end != begin && (end == text.data() + text.size() || *end == ' ' || *end == ':') &&
          txs.count(tx) > 0) {
        return true;
      }
    }
  }
  return false;
}

bool ReplayFilter::names_key(std::string_view text) const {
  if (text.find(fmt::format("(key {},", *key)) != std::string_view::npos) return true;
  // Every run of 16 hex digits standing alone is a MessageId (tx and version numbers are decimal).
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  for (size_t i = 0; i + 16 <= text.size();) {
    if (!hex(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && hex(text[end])) ++end;
    if (end - i == 16 && key_ids.count(tables::parse_hex16(text.substr(i, 16))) > 0) return true;
    i = end;
  }
  return false;
}

bool ReplayFilter::matches(std::string_view line) const {
  const TraceLine fields = split_trace_line(line);
  const std::string_view rest = fields.text;
  if (!node.empty() && fields.node != node) return false;
  if (from_us >= 0 || to_us >= 0) {
    const std::optional<Micros> time = parse_duration(fields.time);
    if (!time) return false;
    if (from_us >= 0 && *time < from_us) return false;
    if (to_us >= 0 && *time > to_us) return false;
  }
  if (!job.empty() && rest.find(job) == std::string_view::npos) return false;
  if (!id.empty() && rest.find(id) == std::string_view::npos && !names_commit_tx(rest, id_txs)) return false;
  if (key && !names_key(rest) && !names_commit_tx(rest, key_txs)) return false;
  if (grep && !std::regex_search(line.begin(), line.end(), *grep)) return false;
  return true;
}

std::string ReplayFilter::unknown_in(const std::deque<std::string>& trace) const {
  std::set<std::string, std::less<>> nodes;
  bool job_seen = job.empty();
  for (const std::string& line : trace) {
    const TraceLine fields = split_trace_line(line);
    if (!fields.node.empty() && nodes.find(fields.node) == nodes.end()) nodes.emplace(fields.node);
    job_seen = job_seen || fields.text.find(job) != std::string_view::npos;
  }
  if (!node.empty() && nodes.count(node) == 0) {
    std::string names;
    for (const std::string& n : nodes) names += (names.empty() ? "" : ", ") + n;
    return fmt::format("--node {}: no such node in this run (nodes: {})", node.substr(0, 64), names);
  }
  if (!job_seen) {
    return fmt::format("--job {}: no line of this run names it (jobs are written like source/events/0, "
                       "computation/Name/1, sink/out/0)", job.substr(0, 64));
  }
  return "";
}

std::string ReplayFilter::describe() const {
  std::string out;
  const auto add = [&](std::string_view option, const std::string& value) {
    out += fmt::format("{}{} {}", out.empty() ? "" : " ", option, value);
  };
  if (!node.empty()) add("--node", node);
  if (!job.empty()) add("--job", job);
  if (!id.empty()) add("--id", id);
  if (key) add("--key", std::to_string(*key));
  if (from_us >= 0) add("--from", format_time(from_us));
  if (to_us >= 0) add("--to", format_time(to_us));
  if (grep) add("--grep", grep_text);
  return out;
}

}  // namespace onceflow::cli
