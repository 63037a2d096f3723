// Layout: the partition counts a pipeline runs with now, which may differ from its spec's.
//
// A computation or a queue sink can be repartitioned while the pipeline exists
// (docs/operating.md). The controller stores the counts in force (`layout` in the controller
// table, with a version that grows by one per change) and a change under way (`layout_pending`).
// A change is made with every job Lease ended and nothing in flight (after a drain): the
// controller moves the partition-keyed rows of the changed computations and sinks (timers,
// input dedup rows, and any stream row) to the partitions their keys have under the new
// count, then stores the new layout; jobs started after that read it with their assignments.
// State rows are keyed by key alone and stay where they are. A partition id that disappears
// keeps its meta row, so a sink partition that comes back later goes on with its seqNos.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env/status.h"
#include "core/env/store.h"
#include "core/spec.h"

namespace onceflow {

struct Layout {
  uint64_t version = 0;
  std::map<std::string, int> partitions;  // computation or sink name -> count (the spec's when absent)
  // A spec given while the pipeline was stopped (its YAML; empty: the deployment's own), and
  // how many times each source name's input was swapped (names of removed sources stay, so
  // a name that comes back never reuses an earlier input's offsets or message ids).
  std::string spec_yaml;
  std::map<std::string, uint32_t> source_generations;
  // Settings changed on a running pipeline (0: the spec's): jobs started with this layout use them.
  Micros epoch_period_us = 0;
  int epoch_batch_limit = 0;
  int max_batch_messages = 0;  // of exactly-once ClickHouse sinks (their batches)
  // Sinks with a sharded target: the tablet count the controller last saw (the spec's when
  // absent), and how many times it recreated the sink's partitions for a reshard.
  std::map<std::string, int> target_tablets;
  std::map<std::string, uint32_t> producer_generations;

  friend bool operator==(const Layout&, const Layout&) = default;
};

inline constexpr const char* kLayoutKey = "layout";
inline constexpr const char* kLayoutPendingKey = "layout_pending";
inline constexpr int kMaxPartitions = 1024;

std::string encode_layout(const Layout& layout);
std::optional<Layout> decode_layout(std::string_view bytes);

// The change under way (`layout_pending`): the layout to be made, and whether the pipeline
// works again once it is made (else it stays stopped).
struct PendingLayout {
  Layout layout;
  bool resume = false;
};
std::string encode_pending_layout(const PendingLayout& pending);
std::optional<PendingLayout> decode_pending_layout(std::string_view bytes);
// The layout a change request names the version of, from the two rows as read (absent:
// nullopt): the change under way if there is one, else the stored layout; nullopt when there
// is neither.
std::optional<Layout> layout_to_change(const std::optional<std::string>& layout_row,
                                       const std::optional<std::string>& pending_row);

// The spec in force: the layout's stored spec (else `spec`) with its partition counts and
// source generations.
PipelineSpec with_layout(const PipelineSpec& spec, const Layout& layout);

// Parses "epoch_period=DURATION epoch_batch_limit=N max_batch_messages=N ..." (at least one):
// the layout with those settings, else why not.
Result<Layout> reconfigured_layout(const Layout& layout, std::string_view text);

// A new spec given while the pipeline is stopped (its YAML), checked against the one in force
// (`current`, with `layout`'s counts): the next layout, or why it is refused. Computations
// and sinks kept keep their partition counts (a repartition changes those); a source whose
// identity changed (source_identity) gets the next generation, as does a name that comes
// back; a source kept with the same input keeps its partitions.
Result<Layout> respecified_layout(const PipelineSpec& current, const Layout& layout, std::string yaml);

// Parses "Name=count ..." against `spec`: every name a computation or a queue sink (async or
// sync) whose target is not sharded, every count in [1, kMaxPartitions]. Returns the changes.
Result<std::map<std::string, int>> parse_repartition(const PipelineSpec& spec, std::string_view text);

// The rows of `owner`'s partition-keyed tables (its input streams, timers and input dedup
// tables) that belong elsewhere under `partitions`: one page of moves, as puts and erases
// into `tx`, starting at each table's beginning. Returns how many rows it moved; 0 when
// everything is in place. `spec` is the pipeline's (for the tables), `partitions` the new count.
// `moved_timers`, when given, gets each timer row moved ("<table>:<key>" from, to).
Result<size_t> move_partition_rows(Store& store, Transaction& tx, const PipelineSpec& spec, const std::string& owner,
                                   int partitions, size_t page,
                                   std::vector<std::pair<std::string, std::string>>* moved_timers = nullptr);

}  // namespace onceflow
