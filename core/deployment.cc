#include "core/deployment.h"

#include <fmt/format.h>

#include <cassert>

namespace onceflow {

DeploymentLayout deployment_layout(const EngineOptions& options, int workers, int controllers) {
  assert(workers >= 1);
  assert(controllers >= 1);
  DeploymentLayout layout;
  layout.controllers.push_back(options.controller_node);
  for (int i = 2; i <= controllers; ++i) layout.controllers.push_back(fmt::format("{}-{}", options.controller_node, i));
  for (int i = 1; i <= workers; ++i) layout.workers.push_back(fmt::format("worker-{}", i));
  return layout;
}

Xoshiro256StarStar EngineProcess::process_random(uint64_t seed, const std::string& name) {
  return Xoshiro256StarStar(seed).fork("process:" + name);
}

EngineProcess::EngineProcess(const DeploymentConfig& config, const std::string& name, Role role,
                             const ProcessBackends& backends)
    : random_(process_random(config.seed, name)),
      env_{backends.runtime, backends.network, backends.store, random_,  config.spec, config.registry,
           config.options,   config.bugs,      config.observer, backends.fault_points, &connectors_.connectors,
           config.seed,      backends.wakeups != nullptr ? backends.wakeups : &own_wakeups_} {
  assert(!name.empty());
  if (config.connectors != nullptr) config.connectors->connect(name, backends.runtime, backends.network, connectors_);
  if (role == Role::kController) {
    controller_ = std::make_unique<Controller>(env_, name);
  } else {
    worker_ = std::make_unique<Worker>(env_, name);
  }
}

EngineProcess::~EngineProcess() = default;

}  // namespace onceflow
