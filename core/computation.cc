#include "core/computation.h"

#include <fmt/format.h>

#include "core/engine.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>

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
  tables_.push_back(client.table_);
}

void InitContext::init_external_state_client(ExternalStateClient& client,
                                             const std::string& path) const {
  client.backend_ = &backend_;
  client.table_ = external_table(path);
  tables_.push_back(client.table_);
}

void CollectingOutput::add_message(uint64_t key, std::string payload, std::string_view stream) {
  if (spec_.output_streams.empty()) {
    if (misuse.empty()) misuse = "emits a message, but its spec declares no output_streams";
    return;
  }
  const std::string out = stream.empty() ? spec_.output_streams.front() : std::string(stream);
  if (std::find(spec_.output_streams.begin(), spec_.output_streams.end(), out) == spec_.output_streams.end()) {
    if (misuse.empty()) misuse = fmt::format("emits to stream '{}', which its spec's output_streams do not name", out);
    return;
  }
  messages.push_back({key, out, std::move(payload)});
}

void CollectingOutput::add_timer(Micros trigger_ts, Micros event_ts, std::string_view timer_stream) {
  if (spec_.timer_streams.empty()) {
    if (misuse.empty()) misuse = "sets a timer, but its spec declares no timer_streams";
    return;
  }
  const std::string stream = timer_stream.empty() ? spec_.timer_streams.front().name : std::string(timer_stream);
  const bool declared = std::any_of(spec_.timer_streams.begin(), spec_.timer_streams.end(),
                                    [&](const TimerStreamSpec& s) { return s.name == stream; });
  if (!declared) {
    if (misuse.empty()) misuse = fmt::format("sets a timer on stream '{}', which its spec's timer_streams do not name", stream);
    return;
  }
  timers.push_back(Timer{key_, trigger_ts, event_ts < 0 ? event_ts_ : event_ts, stream});
}

void ComputationRegistry::add(const std::string& name, ProcessFunctionFactory factory, FunctionContract contract) {
  if (name.empty() || !factory) throw std::invalid_argument("add: a computation needs a name and a factory");
  if (factories_.count(name) != 0) {
    throw std::invalid_argument(fmt::format(
        "add: a function named '{}' is registered already (one of onceflow's built-ins, or one added before): give "
        "yours another name",
        name));
  }
  factories_.emplace(name, std::move(factory));
  contracts_.emplace(name, std::move(contract));
}

const FunctionContract& ComputationRegistry::contract(std::string_view name) const {
  auto it = contracts_.find(name);
  assert(it != contracts_.end());
  return it->second;
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

const std::vector<std::string>& builtin_check_names() {
  static const std::vector<std::string> names = {"delivery", "state",  "consumption", "re-execution", "fencing",
                                                 "controller", "delivery-callback", "timers", "ordering",
                                                 "swift-determinism", "lifecycle", "layout", "liveness",
                                                 "assertions", "determinism", "exceptions"};
  return names;
}

void ComputationRegistry::add_check(const std::string& name, UserCheck check) {
  if (name.empty() || !check) throw std::invalid_argument("add_check: a check needs a name and a function");
  const auto& builtin = builtin_check_names();
  if (std::find(builtin.begin(), builtin.end(), name) != builtin.end()) {
    throw std::invalid_argument(fmt::format("add_check: '{}' is a built-in check's name", name));
  }
  for (const auto& [known, c] : checks_) {
    if (known == name) throw std::invalid_argument(fmt::format("add_check: '{}' is registered already", name));
  }
  checks_.emplace_back(name, std::move(check));
}

void ComputationRegistry::add_bug(const std::string& name, std::string description) {
  add_switch(name, std::move(description), false);
}

void ComputationRegistry::add_harmless_switch(const std::string& name, std::string description) {
  add_switch(name, std::move(description), true);
}

void ComputationRegistry::add_switch(const std::string& name, std::string description, bool harmless) {
  const char* what = harmless ? "add_harmless_switch" : "add_bug";
  const bool well_formed = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
  });
  if (!well_formed) throw std::invalid_argument(fmt::format("{}: '{}' is not 1 to 64 of a-z, 0-9 and -", what, name));
  if (bug(name) != nullptr) throw std::invalid_argument(fmt::format("{}: '{}' is registered already", what, name));
  BugSwitches engine;
  if (engine.enable(name)) throw std::invalid_argument(fmt::format("{}: '{}' is an engine bug switch's name", what, name));
  bugs_.push_back({name, std::move(description), harmless});
}

const UserBug* ComputationRegistry::bug(std::string_view name) const {
  for (const UserBug& b : bugs_) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

std::vector<std::string> bound_tables(const ComputationRegistry& registry, const ComputationSpec& computation) {
  // A backend nobody calls: init only binds clients.
  class Unused final : public StateBackend {
   public:
    std::optional<std::string> get(const std::string&, uint64_t) override { return std::nullopt; }
    void put(const std::string&, uint64_t, std::string) override {}
    void erase(const std::string&, uint64_t) override {}
  } unused;
  auto function = registry.create(computation.processing_function);
  const InitContext init(unused, computation.name);
  function->init(init);
  return init.tables();
}

}  // namespace onceflow
