#include "core/computation.h"

#include <cassert>

namespace onceflow {

std::string InitContext::state_table(std::string_view computation, std::string_view name) {
  return "state/" + std::string(computation) + "/" + std::string(name);
}

std::string InitContext::external_table(std::string_view path) {
  return "external" + std::string(path.empty() || path[0] != '/' ? "/" : "") + std::string(path);
}

void InitContext::init_state_client(StateClient& client, const std::string& name) const {
  client.backend_ = &backend_;
  client.table_ = state_table(computation_, name);
}

void InitContext::init_external_state_client(ExternalStateClient& client,
                                             const std::string& path) const {
  client.backend_ = &backend_;
  client.table_ = external_table(path);
}

void ComputationRegistry::add(const std::string& name, ProcessFunctionFactory factory) {
  assert(factory);
  const bool inserted = factories_.emplace(name, std::move(factory)).second;
  assert(inserted);
  (void)inserted;
}

std::unique_ptr<ProcessFunction> ComputationRegistry::create(std::string_view name) const {
  auto it = factories_.find(name);
  assert(it != factories_.end());
  return it->second();
}

std::vector<std::string> ComputationRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, factory] : factories_) out.push_back(name);
  return out;
}

}  // namespace onceflow
