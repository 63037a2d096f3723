// Deployment: the one composition of a pipeline's engine processes, shared by the simulator
// (simulated/pipeline_world.h) and the real backends (real/deployment.h).
//
// A deployment is one or more controller processes (one leads, the others stand by) and N
// worker processes, named by DeploymentLayout. Each EngineProcess is assembled here from the pipeline spec and what the
// backends hand it (a runtime, a network endpoint, a store client, connectors); nothing else
// differs between the two worlds. In particular a process's random generator is seeded from
// the deployment's seed and the process's name alone, so a restarted process draws the same
// sequence as its previous life did, in simulation exactly as for real. Whatever must be
// unique across lives is made so by the engine from the store (Lease ids), never by luck.
//
// Thread-safety: as the runtime the process runs on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/computation.h"
#include "core/connectors.h"
#include "core/controller.h"
#include "core/engine.h"
#include "core/env/random.h"
#include "core/input_wakeups.h"
#include "core/spec.h"
#include "core/worker.h"

namespace onceflow {

// The names of a deployment's engine processes.
struct DeploymentLayout {
  std::vector<std::string> controllers;  // "controller", "controller-2" .. "controller-M"
  std::vector<std::string> workers;      // "worker-1" .. "worker-N"
};
// REQUIRES: workers >= 1, controllers >= 1.
DeploymentLayout deployment_layout(const EngineOptions& options, int workers, int controllers = 1);

// The connectors one process uses: pointers for the engine, and what the process owns.
struct ProcessConnectors {
  Connectors connectors;
  std::vector<std::unique_ptr<ExternalSource>> owned_sources;
  std::vector<std::unique_ptr<ExternalSink>> owned_sinks;
};

// Makes the connectors of a process's external sources and sinks (Kafka, HTTP, ...). The
// simulator makes fresh ones per process life; the real deployment shares its own.
class ConnectorFactory {
 public:
  virtual ~ConnectorFactory() = default;
  virtual void connect(const std::string& process, Runtime& runtime, Network& network, ProcessConnectors& out) = 0;
};

// What every process of a deployment shares. References outlive every process.
struct DeploymentConfig {
  const PipelineSpec& spec;
  const ComputationRegistry& registry;
  const EngineOptions& options;
  const BugSwitches& bugs;
  uint64_t seed = 1;                       // the deployment's configured seed
  EngineObserver* observer = nullptr;      // may be null
  ConnectorFactory* connectors = nullptr;  // may be null: queue sources and sinks only
};

// What the backends give one process (one life of it).
struct ProcessBackends {
  Runtime& runtime;
  Network& network;
  Store& store;
  FaultPointHook* fault_points = nullptr;  // the simulator's; null for real
  // Shared by the engine processes of one OS process (`onceflow real --role all`); null: the
  // engine process has its own (a simulated node is a process of its own).
  InputWakeups* wakeups = nullptr;
};

// One life of a controller or worker process. Destroying it ends that life (its fibers must
// have been unwound by the runtime first).
class EngineProcess {
 public:
  enum class Role : uint8_t { kController, kWorker };
  EngineProcess(const DeploymentConfig& config, const std::string& name, Role role, const ProcessBackends& backends);
  ~EngineProcess();
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  // The generator a process of this name starts with, in every life.
  static Xoshiro256StarStar process_random(uint64_t seed, const std::string& name);

 private:
  Xoshiro256StarStar random_;
  ProcessConnectors connectors_;
  InputWakeups own_wakeups_;  // when the backends bring none
  EngineEnv env_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace onceflow
