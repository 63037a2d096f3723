// The computation API, mirroring Flow's: a ProcessFunction gets Init, ProcessMessage and
// ProcessTimer; it emits through an OutputCollector (AddMessage, AddTimer), keeps per-key
// state through a StateClient and external state through an ExternalStateClient, and reads
// the system time from its RuntimeContext.
//
// The same interface serves every computation type: a transform or swift map implements
// process_message only; a process function may also use timers. Functions are registered by
// name in a ComputationRegistry, and specs refer to them by that name.
//
// Determinism: a swift map must give the same outputs for the same input on every attempt (its
// outputs are recomputed after a restart, not stored). The engine applies exactly one attempt
// of a regular computation's epoch, atomically, so its guarantees hold for a function that is
// not deterministic; but onceflow's checks predict each committed epoch by running the function
// again on what it took (the `re-execution` check, docs/guarantees.md "The oracle"), so a
// function that depends on more than its input, state, timers, current_timestamp() and
// random() fails re-execution there, and delivery and state report what differs from the
// prediction. Effects outside the engine (a file, a network call) happen once per attempt and
// again in every re-execution.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env/clock.h"
#include "core/env/random.h"
#include "core/message.h"
#include "core/spec.h"

namespace onceflow {

namespace checkers {
struct PipelineHistory;
struct Verdict;
}  // namespace checkers

struct Timer {
  uint64_t key = 0;
  Micros trigger_ts = 0;
  Micros event_ts = 0;
  std::string timer_stream;
};

class OutputCollector {
 public:
  virtual ~OutputCollector() = default;
  // Emits a message with `key` on `stream` (empty: the computation's first output stream).
  virtual void add_message(uint64_t key, std::string payload, std::string_view stream = {}) = 0;
  // Adds a durable timer bound to the current key; it fires once the timer stream's
  // watermark passes `trigger_ts`. `event_ts` < 0 means the current message's event time.
  virtual void add_timer(Micros trigger_ts, Micros event_ts = -1,
                         std::string_view timer_stream = {}) = 0;
};

// Where a state client reads and writes: the job's epoch transaction.
class StateBackend {
 public:
  virtual ~StateBackend() = default;
  virtual std::optional<std::string> get(const std::string& table, uint64_t key) = 0;
  virtual void put(const std::string& table, uint64_t key, std::string value) = 0;
  virtual void erase(const std::string& table, uint64_t key) = 0;
};

// Per-key state kept in the pipeline's own tables (Flow's TMutableStateKeyClient).
class StateClient {
 public:
  std::optional<std::string> get(uint64_t key) const { return backend_->get(table_, key); }
  void set(uint64_t key, std::string value) { backend_->put(table_, key, std::move(value)); }
  void clear(uint64_t key) { backend_->erase(table_, key); }
  bool bound() const { return backend_ != nullptr; }

 private:
  friend class InitContext;
  StateBackend* backend_ = nullptr;
  std::string table_;
};

// State in a user table outside the pipeline's tables (Flow's external state). Updates made
// through it commit in the epoch transaction like any other state.
using ExternalStateClient = StateClient;

class InitContext {
 public:
  InitContext(StateBackend& backend, std::string computation)
      : backend_(backend), computation_(std::move(computation)) {}
  // Binds `client` to the computation's state named `name`.
  void init_state_client(StateClient& client, const std::string& name) const;
  // Binds `client` to the external table at `path` (shared by every computation using it).
  void init_external_state_client(ExternalStateClient& client, const std::string& path) const;

  static std::string state_table(std::string_view computation, std::string_view name);
  static std::string external_table(std::string_view path);
  // The tables of the clients bound so far, so that the engine can read a batch's keys of
  // each in one go.
  const std::vector<std::string>& tables() const { return tables_; }

 private:
  StateBackend& backend_;
  std::string computation_;
  mutable std::vector<std::string> tables_;
};

class RuntimeContext {
 public:
  virtual ~RuntimeContext() = default;
  // The system time of the current epoch on this job's clock.
  virtual Micros current_timestamp() const = 0;
  // A generator for computations that want randomness, seeded per job and epoch; each
  // committed epoch's seed is recorded, so the re-execution that checks it draws the same
  // numbers (docs/extending.md).
  virtual Random& random() = 0;
};

// A computation's function. An exception out of process_message or process_timer gives the
// epoch up (the job retries it); a simulated run fails `exceptions` naming it. Do not swallow
// exceptions you do not know (`catch (...)`) around state reads: the simulator unwinds a
// crashed node's calls with one (docs/extending.md).
class ProcessFunction {
 public:
  virtual ~ProcessFunction() = default;
  virtual void init(const InitContext&) {}
  virtual void process_message(const Message& message, OutputCollector& output,
                               RuntimeContext& context) = 0;
  virtual void process_timer(const Timer& /*timer*/, OutputCollector& /*output*/,
                             RuntimeContext& /*context*/) {}
};

// Gathers what one process_message or process_timer call emits, checking the streams
// against the computation's spec. Used by the engine and by the reference run alike.
class CollectingOutput final : public OutputCollector {
 public:
  // `key` and `event_ts`: those of the message or timer being processed (timers bind to
  // the key; an event time left out is the input's).
  CollectingOutput(const ComputationSpec& spec, uint64_t key, Micros event_ts)
      : spec_(spec), key_(key), event_ts_(event_ts) {}

  void add_message(uint64_t key, std::string payload, std::string_view stream) override;
  void add_timer(Micros trigger_ts, Micros event_ts, std::string_view timer_stream) override;

  struct Out {
    uint64_t key;
    std::string stream;
    std::string payload;
  };
  std::vector<Out> messages;
  std::vector<Timer> timers;
  // The first call the computation's spec does not allow (a stream it does not declare, a
  // timer without timer_streams), which was dropped; empty when none. The engine commits no
  // epoch with such a call: the user's function and its spec disagree.
  std::string misuse;

 private:
  const ComputationSpec& spec_;
  uint64_t key_;
  Micros event_ts_;
};

using ProcessFunctionFactory = std::function<std::unique_ptr<ProcessFunction>()>;

// The names of the built-in checks (checkers/pipeline_checks.h and `determinism`), which a
// check of a program's own may not take.
const std::vector<std::string>& builtin_check_names();

class ComputationRegistry;
// The state and external tables `computation`'s function binds at init (what it may write).
// REQUIRES: its function is registered.
std::vector<std::string> bound_tables(const ComputationRegistry& registry, const ComputationSpec& computation);

// What a function needs of the spec that runs it, checked when the spec is read (a spec that
// breaks it is refused, exit 2), so that nothing a spec says reaches an assertion.
struct FunctionContract {
  // The input streams whose payloads the function parses; empty: it takes any stream.
  std::vector<std::string> reads;
};

// An invariant of your own over a run's history (checkers/history.h: the committed epochs with
// what each took and produced, the deliveries, the tables at the end): it returns
// Verdict::pass, Verdict::fail(name, detail) naming what broke, or Verdict::not_applicable
// when the run gave it nothing to look at. It is listed under its registered name with the
// built-in checks (run, explore, the testing helpers, JSON), and in `real --verify`, whose
// history holds the deliveries, the inputs, the expected outputs, the tables and the committed
// computation epochs as recorded and re-executed (what each took, in order, and produced; a
// source's inputs as one epoch), without commit versions, nodes, Leases, faults or times of a
// simulation (drained_at stays -1; never_drained() tells a simulated run that stalled).
// A check that throws fails, naming what it threw.
using UserCheck = std::function<checkers::Verdict(const checkers::PipelineHistory&)>;

// A bug switch of your own (ONCEFLOW_BUG in core/user_code.h): `--bug NAME` turns it on for a
// run, `mutants` runs every one of them to see that your checks catch it.
struct UserBug {
  std::string name;
  std::string description;
  // A switch that must change nothing a check can see (a refactor, another data structure, a
  // cache that is correct): `mutants` wants every seed to pass with it on.
  bool harmless = false;
};

class ComputationRegistry {
 public:
  // std::invalid_argument when the name is empty or taken (a built-in's, core/builtin.h, or
  // one added before).
  void add(const std::string& name, ProcessFunctionFactory factory, FunctionContract contract = {});
  bool has(std::string_view name) const { return factories_.find(name) != factories_.end(); }
  // REQUIRES: has(name).
  const FunctionContract& contract(std::string_view name) const;
  // REQUIRES: has(name).
  std::unique_ptr<ProcessFunction> create(std::string_view name) const;
  std::vector<std::string> names() const;

  // std::invalid_argument when the name is empty, taken, or a built-in check's.
  void add_check(const std::string& name, UserCheck check);
  const std::vector<std::pair<std::string, UserCheck>>& checks() const { return checks_; }
  // std::invalid_argument unless the name is new, 1 to 64 of [a-z0-9-], and not an engine bug
  // switch's.
  void add_bug(const std::string& name, std::string description);
  // As add_bug, for a switch that must stay green (UserBug::harmless): a variant of your code
  // that computes the same, whose failure would be a false alarm of a check or a bug in it.
  void add_harmless_switch(const std::string& name, std::string description);
  const std::vector<UserBug>& bugs() const { return bugs_; }
  const UserBug* bug(std::string_view name) const;
  // This program's own scenario folder: `list` and `mutants` read it in place of the
  // library's (`list --library` adds the library's; empty: none, the library is the program's
  // scenarios). `run`, `explore` and the others take a scenario's path as given.
  void set_scenario_dir(std::string dir) { scenario_dir_ = std::move(dir); }
  const std::string& scenario_dir() const { return scenario_dir_; }

 private:
  void add_switch(const std::string& name, std::string description, bool harmless);
  std::vector<std::pair<std::string, UserCheck>> checks_;
  std::vector<UserBug> bugs_;
  std::string scenario_dir_;
  std::map<std::string, ProcessFunctionFactory, std::less<>> factories_;
  std::map<std::string, FunctionContract, std::less<>> contracts_;
};

}  // namespace onceflow
