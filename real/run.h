// onceflow real: a pipeline run for real, in one process, on the real backends.
//
// The same engine code as in simulation, composed by the same code (core/deployment.h), runs
// on a LevelDB store in DATA/store (real/data_dir.h), the wall-clock fiber loop and, where the
// pipeline uses it, Kafka (real/deployment.h). Everything lives in DATA, so a killed run
// resumes from its last commit when started again on the same DATA.
//
// With finite input (queue sources) the run ends (exit 0) once every message is processed and
// delivered; with Kafka sources it goes on until SIGINT/SIGTERM, unless --verify is given,
// which makes it end once it has caught up with what the input topics hold. --verify then
// reads the outputs and the state back and checks them (real/verify.h).
//
// Exit codes: 0 done (and verified), 1 verification found a violation, 2 bad input or a run
// that cannot go on safely (a damaged store, a full disk, a data directory of another format
// or pipeline, Kafka unreachable or not the cluster the data directory was made with); each
// with one line on stderr naming the cause.
#pragma once

#include <string>
#include <vector>

#include "core/computation.h"
#include "core/spec.h"
#include "real/deployment.h"

namespace onceflow::real {

// Runs until the input is processed and delivered, or until SIGINT/SIGTERM. Returns the exit
// code.
// Makes SIGINT, SIGTERM and SIGHUP stop a run_real of this process rather than kill it: a signal
// that comes before run_real starts stops it as soon as its deployment is up. Called first
// thing by `onceflow real`, before its arguments and spec are read.
void catch_stop_signals_early();

int run_real(const std::string& spec_path, const PipelineSpec& spec, const ComputationRegistry& registry,
             const RealOptions& options);

// onceflow kafka-mock: librdkafka's mock cluster in this process, with `topics`
// ("name:partitions") created; prints the bootstrap servers and runs until SIGINT/SIGTERM.
// SIGUSR1 takes every broker down, SIGUSR2 brings them back (for tests of a lost cluster).
int run_kafka_mock(int brokers, const std::vector<std::string>& topics);
// onceflow ctl status: what the store of a deployment of `spec` says of it (real/status.h), as
// text or JSON; exit 2 when the store cannot be opened (a LevelDB directory in use by a run).
// `rates_over_us` > 0 on a PostgreSQL deployment: the status is read twice that far apart,
// with the rates between (add_rates in real/status.h). A LevelDB directory is a run that
// ended: no rates.
int run_ctl_status(const PipelineSpec& spec, const RealOptions& o, bool as_json, Micros rates_over_us);

// onceflow ctl pause|resume|stop|repartition|set: a request stored for the leading controller's
// process of a running deployment (real/operator_requests.h), and waited for. Exit 0 when
// the controller took it (for stop and repartition, with `wait`, once the pipeline is
// stopped, or repartitioned and working again); 1 when no controller took it in time (it is
// withdrawn), or its outcome is not known in time; 2 for bad input, a store that cannot be
// opened (a LevelDB directory: its run has ended, so no controller answers) or a request
// the controller refused.
struct CtlRequest {
  std::string verb;               // pause, resume, stop, repartition, set
  std::vector<std::string> args;  // NAME=COUNT (repartition), SETTING=VALUE (set)
  Micros timeout_us = 60 * kSeconds;
  bool wait = true;
};
int run_ctl_request(const PipelineSpec& spec, const RealOptions& o, const CtlRequest& request);

}  // namespace onceflow::real
