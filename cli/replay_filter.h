// ReplayFilter: which lines of a run's trace `onceflow replay` prints.
//
// A trace line is "TIME NODE TEXT" (sim/trace.h: the time in simulated microseconds, right
// aligned; the node, left aligned). Every filter given must hold for a line to be printed:
// the node named exactly, a job's id or a MessageId anywhere in the text (as the engine
// writes them: "source/events/0", "62b90687f78934f9"), a key (the line says "(key K," or
// names one of the key's MessageIds), the time within [from, to], and the regular expression
// (ECMAScript) found anywhere in the line.
//
// Thread-safety: none needed (immutable once made).
#pragma once

#include <deque>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>

#include "core/env/clock.h"

namespace onceflow::cli {

// A trace line's fields: its time as written, its node and the rest (leading spaces removed).
struct TraceLine {
  std::string_view time, node, text;
};
TraceLine split_trace_line(std::string_view line);
// A trace line's time (its first field), or nullopt when it has none.
std::optional<Micros> trace_line_time(std::string_view line);
// Whether `text` is a commit attempt's line ("... commits tx T: ...") of one of `txs`, or the
// store's answer to one ("commit tx T version V ...", "commit tx T rejected: ..."): an attempt's
// line lists only an epoch's first ids, and the answer none, so a message is found there by its
// transactions.
bool names_commit_tx(std::string_view text, const std::set<uint64_t>& txs);

struct ReplayFilter {
  std::string node;
  std::string job;
  std::string id;
  std::optional<uint64_t> key;  // --key: lines naming the key, or any MessageId of it (key_ids)
  std::set<uint64_t> key_ids;
  // The commit attempts of the --id's message and of the --key's messages (names_commit_tx).
  std::set<uint64_t> id_txs, key_txs;
  Micros from_us = -1;  // -1: from the start
  Micros to_us = -1;    // -1: to the end
  std::optional<std::regex> grep;
  std::string grep_text;  // the expression as given

  bool any() const {
    return !node.empty() || !job.empty() || !id.empty() || key || from_us >= 0 || to_us >= 0 || grep;
  }
  bool matches(std::string_view line) const;
  bool names_key(std::string_view text) const;
  // What --node or --job names that no line of `trace` has (a typo, or a node the run does not
  // have), as a one-line error listing the nodes there are; "" when both are there.
  std::string unknown_in(const std::deque<std::string>& trace) const;
  // "--node worker-1 --from 1s": the filters given, as on the command line.
  std::string describe() const;
};

}  // namespace onceflow::cli
