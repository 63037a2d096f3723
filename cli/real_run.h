// onceflow real: a pipeline run for real, in one process, on the real backends.
//
// The same engine code as in simulation runs on real/: a LevelDB store in DATA/store, the
// wall-clock fiber loop with an in-process network, a controller and N workers. Queue
// sources are fed by a producer that writes a deterministic workload (--messages, --keys,
// --seed) into the store, recording what it wrote in the same transactions; async sinks
// deliver to a LevelDB-backed queue table with (producer_id, seqNo) dedup; sync sinks
// write their table in the store. Everything lives in DATA, so a killed run resumes from its
// last commit when started again on the same DATA.
//
// With finite input (queue sources) the run ends (exit 0) once every message is processed and
// delivered; with Kafka sources it goes on until SIGINT/SIGTERM, unless --verify is given,
// which makes it end once it has caught up with what the input topics hold. --verify then
// reads the outputs and the state back, runs the checkers against the reference run of the
// recorded input (and the input topics) and prints a JSON verdict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/computation.h"
#include "core/spec.h"

namespace onceflow::cli {

struct RealOptions {
  std::string data_dir;
  int workers = 2;
  uint64_t messages = 10'000;  // input messages the producer writes in all (across restarts)
  int keys = 16;
  uint64_t seed = 1;  // of the workload
  bool verify = false;
  bool progress = true;  // a progress line on stderr
  bool stats = false;    // a JSON line of figures on stdout at the end (for bench/run.sh)
  // Kafka brokers for kafka sources and sinks: "host:port,...", or "mock" for an in-process
  // mock cluster (gone with the process; `onceflow kafka-mock` keeps one in its own).
  std::string kafka;
};

// onceflow kafka-mock: librdkafka's mock cluster in this process, with `topics`
// ("name:partitions") created; prints the bootstrap servers and runs until SIGINT/SIGTERM.
int run_kafka_mock(int brokers, const std::vector<std::string>& topics);

// Runs until the input is processed and delivered, or until SIGINT/SIGTERM. Returns the exit
// code: 0 done (and verified, with --verify), 1 verification found a violation, 2 bad input.
int run_real(const std::string& spec_path, const PipelineSpec& spec, const ComputationRegistry& registry,
             const RealOptions& options);

}  // namespace onceflow::cli
