// onceflow ctl status: what a deployment's store says of it, for an operator on any host that
// reaches the store (a PostgreSQL deployment while it runs; a LevelDB data directory, which
// one process opens at a time, once its run has ended).
//
// Read in one snapshot: the pipeline's state and layout (and a change under way), the leading
// controller, each worker with its Lease and whether it is alive, each job with the worker and
// Lease it is assigned under, each queue source partition's lag (written by the producer and
// not yet read in a committed epoch), and each sink partition's outbox (written, acknowledged
// by the target, not yet delivered).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/job.h"
#include "core/spec.h"
#include "real/kafka.h"
#include "real/real_store.h"

namespace onceflow::real {

// A sink partition's outbox as its meta row says: written by committed epochs, and of those
// not yet acknowledged by the target.
struct OutboxCounts {
  uint64_t written = 0;
  uint64_t undelivered = 0;
};
OutboxCounts outbox_counts(const SinkProgress& progress);

// A source partition's lag: what was written to it less what committed epochs read (never
// below 0: a topic's end as last told may trail the offset read since).
inline uint64_t source_lag(uint64_t written, uint64_t read) { return written > read ? written - read : 0; }

Result<nlohmann::json> read_status(const PipelineSpec& spec, RealStore& store);
// Adds to a status the Kafka sources' topic ends ("written") and lag, asked of the cluster
// `kafka` (the store knows only what was read); without a cluster, or when it does not
// answer, each such partition says why its lag is unknown ("lag_unknown").
void add_kafka_lag(nlohmann::json& status, const PipelineSpec& spec, const KafkaConfig* kafka);
// Adds to `now` the rates between two statuses read `seconds` apart: messages read per
// second by each source, acknowledged by each sink's target, epochs committed by each
// computation, source and sink, and how fast each source's lag grows (+) or shrinks (-): the
// answer to "is it keeping up".
void add_rates(nlohmann::json& now, const nlohmann::json& before, double seconds);
// The same as an operator reads it: a few lines, then a table of jobs.
std::string format_status(const nlohmann::json& status);

}  // namespace onceflow::real
