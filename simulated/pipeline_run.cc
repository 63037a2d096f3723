#include "simulated/pipeline_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <iterator>

#include "checkers/pipeline_checks.h"
#include "checkers/user_checks.h"
#include "simulated/committed_history.h"
#include "faults/injector.h"
#include "faults/points.h"
#include "faults/swarm.h"
#include "simulated/user_code_sim.h"
#include "core/emitted.h"
#include "core/stream_rows.h"
#include "core/env/clock.h"

namespace onceflow::simulated {

namespace {

// Listens to the engine and keeps what the history needs. It lives outside every node, so
// a crash loses nothing here.
class Recorder final : public EngineObserver {
 public:
  explicit Recorder(const PipelineSpec& spec) : spec_(spec) {}
  void watch(sim::World* world, const sim::StoreData* store) {
    world_ = world;
    store_ = store;
  }

  // Whether readable trace lines are kept: a run that keeps none (explore) formats none.
  bool noting() const { return world_ != nullptr && world_->trace().keeping(); }
  // A readable trace line naming the messages, formatted only when it is kept.
  template <typename... Args>
  void note(const std::string& node, fmt::format_string<Args...> format, Args&&... args) {
    if (!noting()) return;
    world_->detail(world_->has_node(node) ? world_->find(node) : sim::kWorldNode,
                   fmt::format(format, std::forward<Args>(args)...));
  }
  // The node whose fiber runs now, by name.
  const std::string& current() const { return world_->name(world_->scheduler().current_node()); }
  // The store's record of a Lease (read only: no clock of ours), or null.
  const sim::StoreData::LeaseRecord* lease_record(LeaseId lease) const {
    if (store_ == nullptr) return nullptr;
    const auto it = store_->leases().find(lease);
    return it == store_->leases().end() ? nullptr : &it->second;
  }

  bool wants_state_reads() const override { return true; }
  void computation_misuse(const std::string& computation, const std::string& what) override {
    if (misuse.empty()) misuse = fmt::format("computation {}: {}", computation, what);
  }
  std::string misuse;
  void computation_threw(const std::string&, const std::string& what) override {
    if (threw++ == 0) first_throw = what;
  }
  uint64_t threw = 0;       // calls of computations' functions that threw
  std::string first_throw;  // what the first one threw, where
  // Every attempt is kept; the store's outcomes decide later which ones applied.
  void epoch_committing(const Epoch& e) override {
    checkers::EpochRecord r;
    r.job = e.job.str();
    r.computation = e.job.name;
    const ComputationSpec* c = e.job.kind == JobKind::kComputation ? spec_.computation(e.job.name) : nullptr;
    r.swift = c != nullptr && c->type == ComputationType::kSwiftMap;
    r.lease = e.lease;
    r.layout_version = e.layout_version;
    attempts_tx.push_back(e.tx);
    attempts_node.push_back(e.node);
    attempts_at.push_back(world_->now());
    for (const Message& m : e.consumed) r.consumed.push_back(record_of(m));
    for (const Message& m : e.produced) r.produced.push_back(record_of(m));
    r.timers_fired = e.timer_rows_fired;
    r.timers_created = e.timer_rows_created;
    r.epoch = e.epoch;
    r.now = e.now;
    r.clock_bound = world_->node_clock_furthest(world_->find(e.node));
    r.random_seed = e.random_seed;
    for (const auto& f : e.timers_fired) r.fired.push_back(record_of(f));
    for (const auto& read : e.state_reads) {
      r.state_reads.push_back({read.table, read.key, read.value.has_value(), read.value.value_or(std::string())});
    }
    attempts.push_back(std::move(r));
    if (noting() && (!e.consumed.empty() || !e.produced.empty())) {
      note(e.node, "{} lease {} commits tx {}: consumed [{}] produced [{}]", e.job.str(), e.lease, e.tx,
           format_ids(e.consumed, 8), format_ids(e.produced, 8));
    }
  }
  void epoch_committed(const Epoch& e) override {
    ++counters["epochs"];
    counters["processed"] += e.consumed.size();
    if (!e.consumed.empty()) note(e.node, "{} lease {} committed version {}", e.job.str(), e.lease, e.version);
  }
  void job_lease_started(const std::string& job, LeaseId lease, const std::string& worker) override {
    note(current(), "starts lease {} for {} on {}", lease, job, worker);
  }
  void job_lease_aborted(const std::string& job, LeaseId lease, std::string_view why) override {
    note(current(), "lease {} of {} ended: {}", lease, job, why);
  }
  void job_lease_found_ended(const std::string& job, LeaseId lease) override {
    if (!noting()) return;
    // How, as the store recorded it.
    if (const sim::StoreData::LeaseRecord* record = lease_record(lease)) {
      note(current(), "lease {} of {} ended: {} at {} (store time), found at a ping", lease, job,
           lease_state_name(record->state), format_time(record->ended_at));
    } else {
      note(current(), "lease {} of {} ended: found ended at a ping", lease, job);
    }
  }
  void job_fenced(const JobId& job, LeaseId lease) override {
    ++counters["fenced"];
    if (!noting()) return;
    // Which Lease, and why it ended (expired: not pinged in time; aborted: by a controller),
    // as the store recorded it when it refused the commit.
    const sim::StoreData::LeaseRecord* record = lease_record(lease);
    const std::string_view why = store_ == nullptr ? "ended"
                                 : record == nullptr ? "unknown to the store"
                                                     : lease_state_name(record->state);
    note("", "{} fenced: its commit under lease {} was refused (the Lease is {})", job.str(), lease, why);
  }
  void epoch_abandoned(const JobId& job, LeaseId lease, uint64_t epoch, std::string_view why) override {
    if (!noting()) return;
    note(current(), "{} lease {} gives up epoch {}: {}; nothing of it applied, it is retried", job.str(), lease, epoch, why);
  }
  void duplicate_dropped(const JobId& job, const Message& m) override {
    ++counters["duplicates dropped"];
    note("", "{} dropped duplicate {}", job.str(), message_label(m));
  }
  void amo_queued(const std::string& sink, const Message& m) override {
    const sim::NodeIndex node = world_->scheduler().current_node();
    in_queue[sink][m.id] = {world_->name(node), world_->now()};
    amo_seen.insert(m.id);
  }
  void amo_acknowledging(const JobId& job, LeaseId lease, MessageId id, TxId tx) override {
    acks.push_back({job.name, job.str(), lease, id, tx, current(), world_->now()});
  }
  void amo_sent(const std::string& sink, MessageId id) override {
    in_queue[sink].erase(id);
    amo_seen.insert(id);
  }
  void delivery_confirmed(const JobId& job, const std::vector<MessageId>& ids, Version version) override {
    for (MessageId id : ids) confirmations.push_back({job.name, job.str(), id, version, world_->now()});
  }
  void warning(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs) override {
    std::string text = name;
    for (const auto& [k, v] : attrs) text += fmt::format(" {}={}", k, v);
    if (std::find(warnings.begin(), warnings.end(), text) == warnings.end()) warnings.push_back(text);
    note("", "warning: {}", text);
  }
  void controller_committing(const std::string& node, LeaseId lease, TxId tx,
                             const std::optional<std::map<std::string, LeaseId>>& job_leases) override {
    controller_attempts.push_back({node, lease, tx, job_leases});
  }
  void controller_leads(const std::string& node, LeaseId lease) override {
    ++counters["controller takeovers"];
    note(node, "leads under lease {}", lease);
  }
  void controller_steps_down(const std::string& node, LeaseId lease, std::string_view why) override {
    note(node, "steps down from lease {}: {}", lease, why);
  }
  void amo_dropped(const std::string& sink, const Message& m, std::string_view why) override {
    const MessageId id = m.id;
    note(current(), "sink {} dropped {}: {}", sink, message_label(m), why);
    in_queue[sink].erase(id);
    amo_seen.insert(id);
    drops[sink].insert(id);
    ++counters["at-most-once drops"];
  }
  void probe(Probe p) override { ++probes[std::string(probe_name(p))]; }
  void timer_moving(const std::string& from, const std::string& to, TxId tx) override {
    timer_moves.push_back({from, to, tx});
  }
  struct TimerMove {
    std::string from, to;
    TxId tx = 0;
  };
  std::vector<TimerMove> timer_moves;  // every attempt; the store says which applied
  void amo_sending(const std::string& sink, MessageId id) override {
    auto& held = in_queue[sink][id];
    held.node = current();
    held.sending = true;
  }
  void amo_in_doubt(const std::string& sink, const Message& m, std::string_view why) override {
    const MessageId id = m.id;
    note(current(), "sink {}: {} in doubt: {}", sink, message_label(m), why);
    in_queue[sink].erase(id);
    amo_seen.insert(id);
    in_doubt[sink].insert(id);
    ++counters["at-most-once in doubt"];
  }

  std::vector<checkers::EpochRecord> attempts;
  std::vector<TxId> attempts_tx;
  std::vector<std::string> attempts_node;
  std::vector<Micros> attempts_at;  // when each commit was asked for
  std::set<uint64_t> amo_seen;  // at-most-once messages queued or dropped at least once
  std::map<std::string, std::set<uint64_t>> drops;
  std::map<std::string, std::set<uint64_t>> in_doubt;
  struct Held {  // where and since when a queued message was held
    std::string node;
    Micros since = 0;
    bool sending = false;  // its one send had started
  };
  std::map<std::string, std::map<uint64_t, Held>> in_queue;  // queued, neither sent nor dropped yet
  struct Ack {  // an outbox row acknowledged before its one send (at-most-once)
    std::string sink;
    std::string job;
    LeaseId lease = 0;
    uint64_t id = 0;
    TxId tx = 0;
    std::string node;
    Micros at = 0;
  };
  std::vector<Ack> acks;
  std::map<std::string, uint64_t> counters;
  std::map<std::string, uint64_t> probes;  // core/probes.h name -> hits
  std::vector<checkers::ConfirmationRecord> confirmations;
  std::vector<std::string> warnings;  // distinct, in order of first appearance
  struct ControllerAttempt {
    std::string node;
    LeaseId lease = 0;
    TxId tx = 0;
    std::optional<std::map<std::string, LeaseId>> job_leases;
  };
  std::vector<ControllerAttempt> controller_attempts;

 private:
  const PipelineSpec& spec_;
  sim::World* world_ = nullptr;
  const sim::StoreData* store_ = nullptr;  // says why a fenced job's Lease ended
};

// Each named point is enabled for the run with probability 1/2; an enabled point fires at a
// node with `probability` per visit, never after the heal.
class PointPolicy {
 public:
  PointPolicy(uint64_t seed, double probability, Micros heal_at)
      : rng_(Xoshiro256StarStar(seed).fork("fault-points")), probability_(probability), heal_at_(heal_at) {
    for (const auto& point : faults::kFaultPoints) {
      if (rng_.bernoulli(0.5)) enabled_.insert(std::string(point.name));
    }
  }
  void watch(const sim::World* world) { world_ = world; }
  bool operator()(const std::string&, std::string_view point) {
    if (enabled_.count(std::string(point)) == 0 || world_->now() >= heal_at_) return false;
    const bool fire = rng_.bernoulli(probability_);
    if (fire) ++fired_[std::string(point)];
    return fire;
  }
  const std::set<std::string>& enabled() const { return enabled_; }
  const std::map<std::string, uint64_t>& fired() const { return fired_; }

 private:
  Xoshiro256StarStar rng_;
  double probability_;
  Micros heal_at_;
  const sim::World* world_ = nullptr;
  std::set<std::string> enabled_;
  std::map<std::string, uint64_t> fired_;
};

}  // namespace

constexpr Micros kSettleUs = 1 * kSeconds;

namespace {
// How many partitions' worth of keys 0..keys-1 the busiest of `partitions` hash ranges holds
// the share of: keys / (keys in the busiest partition), at least 1.
int keyed_parallelism(int partitions, uint64_t keys) {
  if (keys == 0 || partitions <= 1) return std::max(1, partitions);
  std::vector<uint64_t> held(static_cast<size_t>(partitions));
  for (uint64_t key = 0; key < keys; ++key) ++held[static_cast<size_t>(key_partition(key, partitions))];
  return static_cast<int>(std::max<uint64_t>(1, keys / *std::max_element(held.begin(), held.end())));
}
}  // namespace

Micros calm(const PipelineRunOptions& o, Micros heal_at, Micros last_write) {
  Micros at = std::max(heal_at, last_write);
  for (const auto& request : o.state_requests) at = std::max(at, request.first);
  // Every operation is asked for before the run may count as drained (a respec due after the
  // drain once never came, and the inputs written for the new queue looked lost).
  for (const auto& r : o.repartitions) at = std::max(at, r.at_us);
  for (const auto& r : o.respecs) at = std::max(at, r.at_us);
  for (const auto& r : o.reconfigures) at = std::max(at, r.first);
  for (const auto& r : o.target_reshards) at = std::max(at, r.at_us);
  return at;
}

Micros liveness_bound_rule(const PipelineSpec& spec, const EngineOptions& engine, Micros clock_jump_us,
                           uint64_t messages, uint64_t keys) {
  assert(clock_jump_us >= 0);
  const auto stages = static_cast<Micros>(spec.computations.size() + 2);
  int fewest_partitions = INT32_MAX;
  for (const auto& s : spec.sources) fewest_partitions = std::min(fewest_partitions, s.partitions);
  for (const auto& c : spec.computations) fewest_partitions = std::min(fewest_partitions, keyed_parallelism(c.partitions, keys));
  for (const auto& s : spec.sinks) fewest_partitions = std::min(fewest_partitions, keyed_parallelism(s.partitions, keys));
  const auto partitions = static_cast<uint64_t>(std::max(1, fewest_partitions));
  const auto per_epoch = static_cast<uint64_t>(spec.epoch_batch_limit) * partitions;
  Micros backlog = static_cast<Micros>(2 * messages / per_epoch) * spec.epoch_period_us;
  const bool timers = std::any_of(spec.computations.begin(), spec.computations.end(),
                                  [](const ComputationSpec& c) { return !c.timer_streams.empty(); });
  if (timers) backlog += static_cast<Micros>(2 * messages / (engine.timers_per_epoch * partitions)) * spec.epoch_period_us;
  return 3 * spec.lease_ttl_us + 2 * engine.worker_timeout_us + engine.start_grace_us + 4 * spec.scheduling_period_us +
         stages * (engine.idle_epoch_periods * spec.epoch_period_us + clock_jump_us) + backlog + 2 * kSeconds;
}

std::vector<faults::FaultKind> swarm_kinds_for(const PipelineRunOptions& o) {
  std::vector<faults::FaultKind> kinds = o.swarm_kinds;
  if (kinds.empty()) kinds.assign(std::begin(faults::kAllPipelineSwarmKinds), std::end(faults::kAllPipelineSwarmKinds));
  // An at-most-once sink sends without a producer id, so a transport that duplicates
  // requests duplicates its deliveries: its guarantee holds only where requests are not
  // duplicated (docs/guarantees.md), and the swarm does not draw what it excludes.
  bool at_most_once = false;
  for (const auto& sink : o.spec.sinks) {
    auto g = o.sink_guarantees.find(sink.name);
    auto ch = o.clickhouse_targets.find(sink.name);
    const auto guarantee = g != o.sink_guarantees.end()
                               ? g->second
                               : default_guarantee(o.spec, sink, ch == o.clickhouse_targets.end() ? nullptr : &ch->second);
    at_most_once = at_most_once || guarantee == checkers::Guarantee::kAtMostOnce;
  }
  if (at_most_once) std::erase(kinds, faults::FaultKind::kDuplicate);
  return kinds;
}

Micros largest_clock_fault(const faults::FaultPlan& plan) {
  Micros largest = 0;
  for (const faults::Fault& f : plan.faults) {
    if (f.kind == faults::FaultKind::kClockSkew || f.kind == faults::FaultKind::kClockJump) largest = std::max(largest, std::abs(f.amount_us));
  }
  return largest;
}

checkers::Guarantee default_guarantee(const PipelineSpec& spec, const SinkSpec& sink, const sim::ClickHouseTargetConfig* clickhouse) {
  return checkers::guarantee_of(
      pipeline_delivery(spec, sink, clickhouse == nullptr || clickhouse_engine_deduplicates(clickhouse->engine)));
}

namespace {

checkers::PipelineHistory collect(const PipelineRunOptions& o, const ComputationRegistry& registry,
                                  PipelineWorld& w, Recorder& rec, Micros drained_at, Micros liveness_bound) {
  checkers::PipelineHistory h;
  h.seed = o.seed;
  h.replay_command = o.replay_command;
  h.produced_times_recorded = true;
  sim::StoreData& data = w.store_data();
  std::map<Version, Micros> commit_time;
  for (const auto& c : data.commit_log()) commit_time[c.version] = c.store_time;
  // When each node crashed, for at-most-once accounting below.
  std::map<std::string, std::vector<Micros>> crashes;
  for (const auto& [node, at] : w.world().crashes()) crashes[w.world().name(node)].push_back(at);
  // A crash loses an at-most-once message only while the job incarnation (job, Lease) that
  // holds it has not yet handled it: from the step that put it at risk (asking for the commit
  // that hands it to the in-memory queue, or for the acknowledgement before its one send) to
  // that incarnation's next step, which it takes only once the message is queued, sent or
  // dropped. A step's commit may even apply after the crash, its request still on the way.
  // Whether `node` crashed at some time in [from, until).
  const auto crashed_between = [&](const std::string& node, Micros from, Micros until) {
    const auto c = crashes.find(node);
    return c != crashes.end() &&
           std::any_of(c->second.begin(), c->second.end(), [&](Micros at) { return at >= from && at < until; });
  };
  std::map<std::pair<std::string, LeaseId>, std::vector<Micros>> steps;
  for (size_t i = 0; i < rec.attempts.size(); ++i) {
    steps[{rec.attempts[i].job, rec.attempts[i].lease}].push_back(rec.attempts_at[i]);
  }
  for (const auto& ack : rec.acks) steps[{ack.job, ack.lease}].push_back(ack.at);
  for (auto& [incarnation, times] : steps) std::sort(times.begin(), times.end());
  const auto lost_in_step = [&](const std::string& job, LeaseId lease, const std::string& node, Micros at) {
    const auto& times = steps[{job, lease}];
    const auto next = std::upper_bound(times.begin(), times.end(), at);
    return crashed_between(node, at, next == times.end() ? INT64_MAX : *next);
  };
  std::map<std::string, std::set<uint64_t>> lost_in_crash;  // sink -> ids
  for (size_t i = 0; i < rec.attempts.size(); ++i) {
    const auto version = data.committed_version(rec.attempts_tx[i]);
    if (!version) continue;  // the store says it never applied
    checkers::EpochRecord& e = rec.attempts[i];
    e.version = *version;
    e.node = rec.attempts_node[i];
    // The in-memory queue strategy: the committed messages are queued after the commit.
    // (With the outbox strategy they are in the store, and only an acknowledgement, below,
    // puts one at risk.)
    const SinkSpec* sink = e.job.rfind("sink/", 0) == 0 ? w.spec().sink(e.computation) : nullptr;
    if (sink != nullptr && sink->at_most_once_strategy.enabled &&
        lost_in_step(e.job, e.lease, e.node, rec.attempts_at[i])) {
      for (const auto& m : e.consumed) {
        if (rec.amo_seen.count(m.id) == 0) lost_in_crash[sink->name].insert(m.id);
      }
    }
    h.epochs.push_back(std::move(e));
  }
  for (const auto& ack : rec.acks) {
    if (!data.committed_version(ack.tx) || rec.amo_seen.count(ack.id) != 0) continue;
    if (lost_in_step(ack.job, ack.lease, ack.node, ack.at)) lost_in_crash[ack.sink].insert(ack.id);
  }
  std::stable_sort(h.epochs.begin(), h.epochs.end(), [](const auto& a, const auto& b) { return a.version < b.version; });
  for (auto& e : h.epochs) {
    auto it = commit_time.find(e.version);
    e.commit_time = it == commit_time.end() ? -1 : it->second;
  }
  // What the sinks hold at the end, read before their logs' messages move into the history.
  PipelineResult actual = w.result();
  for (auto& [sink, log] : w.targets()) {
    for (auto& entry : log.appended) {
      const bool aborted =
          entry.txn >= 0 &&
          w.kafka().aborted_by_writer.count({entry.txn_producer, static_cast<uint64_t>(entry.txn)}) != 0;
      h.deliveries.push_back({sink, entry.producer, entry.lease, entry.time, record_of(std::move(entry.message)),
                              entry.written_epoch, entry.committed_epoch, entry.txn, entry.committed_txn, aborted,
                              entry.network_copy});
    }
  }
  for (const SinkSpec& sink : w.spec().sinks) {  // a synchronous sink's rows are its target
    if (sink.type != SinkType::kSyncQueue) continue;
    std::map<uint64_t, std::pair<int64_t, const checkers::EpochRecord*>> written;  // id -> its epoch
    for (const checkers::EpochRecord& e : h.epochs) {
      if (e.computation != sink.name || !e.job.starts_with("sink/")) continue;
      for (const auto& m : e.consumed) written.try_emplace(m.id, e.commit_time, &e);
    }
    for (const Row& row : data.read_range(tables::sync_sink(sink.name), "", "", data.last_version(), SIZE_MAX)) {
      auto m = decode_message(row.value);
      assert(m.has_value());
      const auto it = written.find(m->id);
      const bool known = it != written.end();
      h.deliveries.push_back({sink.name, known ? it->second.second->job : "", known ? it->second.second->lease : 0,
                              known ? it->second.first : -1, record_of(*m)});
    }
  }
  h.sink_outputs = std::move(actual.sinks);
  for (const auto& sink : w.spec().sinks) {
    auto g = o.sink_guarantees.find(sink.name);
    auto ch = o.clickhouse_targets.find(sink.name);
    const auto guarantee = g != o.sink_guarantees.end()
                               ? g->second
                               : default_guarantee(w.spec(), sink, ch == o.clickhouse_targets.end() ? nullptr : &ch->second);
    h.sinks.push_back({sink.name, guarantee, {}, {}, writes_before_commit(sink), w.spec().repeats_late(sink.input_stream)});
    // At-most-once: what a crash took from a sink's memory is lost and counted as such. A
    // message still held at the end without its node having crashed since is not: it was
    // lost without a count, which the delivery check reports.
    // A message whose send had started when the crash came may have reached the target: in
    // doubt, not dropped.
    auto& dropped = h.counted_drops[sink.name];
    auto& doubt = h.in_doubt[sink.name];
    dropped = rec.drops[sink.name];
    doubt = rec.in_doubt[sink.name];
    for (const auto& [id, held] : rec.in_queue[sink.name]) {
      if (!crashed_between(held.node, held.since, INT64_MAX)) continue;
      (held.sending ? doubt : dropped).insert(id);
    }
    dropped.insert(lost_in_crash[sink.name].begin(), lost_in_crash[sink.name].end());
  }
  h.confirmations = std::move(rec.confirmations);
  h.tables = std::move(actual.tables);
  h.source_input_lanes = w.source_lanes();  // beside the source inputs, in their order
  reexecute_history(w.spec(), registry, w.take_source_messages(), h);
  if (drained_at < 0) {  // what a consumer or a sink may still take or deliver: not lost but late
    for (const auto& [table, rows] : data.tables()) {
      const bool stream = table.rfind("stream/", 0) == 0;
      if (!stream && table.rfind("output_messages/", 0) != 0) continue;
      auto& ids = stream ? h.in_streams_at_end : h.in_outboxes_at_end;
      for (const Row& row : data.read_range(table, "", "", data.last_version(), SIZE_MAX)) {
        auto messages = stream_rows::decode(row.value);  // an outbox row is encoded as a stream row is
        if (!messages) continue;
        for (const Message& m : *messages) ids.push_back(m.id);
      }
    }
    // And what an at-most-once sink still holds in memory to send, its node not crashed since.
    for (const auto& [sink, held] : rec.in_queue) {
      for (const auto& [id, where] : held) {
        if (!crashed_between(where.node, where.since, INT64_MAX)) h.in_outboxes_at_end.push_back(id);
      }
    }
    std::sort(h.in_streams_at_end.begin(), h.in_streams_at_end.end());
    std::sort(h.in_outboxes_at_end.begin(), h.in_outboxes_at_end.end());
  }
  for (const auto& [id, lease] : data.leases()) {
    const bool ended = lease.state != LeaseState::kActive;
    h.leases[id] = {lease.started_at, ended ? lease.ended_at : lease.last_ping + lease.ttl_us};
  }
  for (const auto& a : rec.controller_attempts) {
    const auto version = data.committed_version(a.tx);
    if (!version) continue;  // never applied
    auto time = commit_time.find(*version);
    h.controller_commits.push_back({a.node, a.lease, *version, time == commit_time.end() ? -1 : time->second,
                                    a.job_leases.has_value(), a.job_leases.value_or(std::map<std::string, LeaseId>{})});
  }
  std::sort(h.controller_commits.begin(), h.controller_commits.end(),
            [](const auto& a, const auto& b) { return a.version < b.version; });
  for (const auto& m : rec.timer_moves) {
    if (const auto version = data.committed_version(m.tx)) h.timer_moves.push_back({m.from, m.to, *version});
  }
  std::stable_sort(h.timer_moves.begin(), h.timer_moves.end(),
                   [](const auto& a, const auto& b) { return a.version < b.version; });
  for (const auto& change : w.state_changes()) {
    h.state_changes.push_back({change.state, change.version, change.store_time, change.in_flight});
  }
  for (const auto& change : w.layout_changes()) h.layout_changes.push_back({change.layout_version, change.version, change.store_time});
  h.layout_grace = w.spec().lease_ttl_us + 4 * w.spec().scheduling_period_us;
  for (const ComputationSpec& c : w.spec().computations) {
    for (const TimerStreamSpec& s : c.timer_streams) {
      if (s.watermark == Watermark::kEventTime) h.event_time_timer_streams.insert(c.name + "/" + s.name);
    }
  }
  for (const auto& [sink, log] : w.targets()) {
    for (const auto& [time, tablets] : log.reshards) h.target_reshards.push_back({sink, tablets, time});
  }
  for (const SinkSpec& sink : w.current_spec().sinks) {
    if (sink.target_tablets > 0) h.sink_partitions_at_end[sink.name] = sink.partitions;
  }
  for (const auto& [table, rows] : data.tables()) {
    if (table.rfind("timers/", 0) != 0) continue;
    for (const Row& row : data.read_range(table, "", "", data.last_version(), SIZE_MAX)) {
      h.pending_timers.push_back(table + ":" + row.key);
      h.pending_timer_values.emplace(h.pending_timers.back(), describe_timer_value(decode_timer_value(row.value)));
    }
  }
  h.faults_lifted_at = o.heal_at_us;
  h.heal_at = calm(o, o.heal_at_us, w.last_write_ts());
  // As the operator last asked, whoever asked (the scenario's set_state, a pipeline_stop or
  // pipeline_pause fault lifted at the heal, a respec's restart).
  if (const auto& [state, at] = w.last_state_request(); state != "working") {
    h.left_at_rest = state;
    h.left_at_rest_at = at;
  }
  h.liveness_bound = liveness_bound;
  h.drained_at = drained_at;
  const auto& lines = w.world().trace().lines();
  const size_t tail = std::min<size_t>(lines.size(), 30);
  h.trace_tail.assign(lines.end() - static_cast<long>(tail), lines.end());
  return h;
}

// The committed epochs' outputs and the deliveries, by id and payload, in history order.
uint64_t content_hash(const checkers::PipelineHistory& h) {
  uint64_t hash = 0;
  const auto add = [&hash](const checkers::MessageRecord& m) {
    hash = mix64(hash ^ m.id);
    hash = mix64(hash ^ hash_bytes(m.payload));
  };
  for (const auto& e : h.epochs) {
    for (const auto& m : e.produced) add(m);
  }
  for (const auto& d : h.deliveries) add(d.message);
  return hash;
}

// What each fault kind of `plan` did (measure_world_effects), with what only a pipeline has:
// targets, the controller, spare workers, and the engine paths a fault led to.
std::map<std::string, faults::FaultEffect> measure_effects(const faults::FaultPlan& plan, PipelineWorld& w, const Recorder& rec) {
  const auto probe_hits = [&](Probe p) {
    auto it = rec.probes.find(std::string(probe_name(p)));
    return it == rec.probes.end() ? uint64_t{0} : it->second;
  };
  uint64_t errors = 0, rejections = 0, evictions = 0, partial = 0;
  for (const std::string& node : w.target_nodes()) {
    const TargetFaults* t = w.target_faults(node);
    errors += t->errors;
    partial += t->partial;
    rejections += t->rejections;
    evictions += t->evictions;
  }
  uint64_t spare_starts = 0;
  for (const std::string& spare : w.spare_worker_names()) spare_starts += w.world().incarnation(w.world().find(spare));
  std::map<std::string, faults::FaultEffect> out = faults::measure_world_effects(plan, w.world(), w.store_data());
  for (auto& [name, e] : out) {
    switch (*faults::parse_fault_kind(name)) {
      case faults::FaultKind::kLostReplies:
        e.details = {{"ambiguous epoch commits resolved applied", probe_hits(Probe::kEpochAmbiguousCommitted)},
                     {"ambiguous epoch commits resolved not applied", probe_hits(Probe::kEpochAmbiguousNotCommitted)}};
        break;
      case faults::FaultKind::kLeasePingLoss:
      case faults::FaultKind::kLeaseExpiry: e.details = {{"epochs fenced", probe_hits(Probe::kEpochFenced)}}; break;
      case faults::FaultKind::kSinkErrors:
        e = {"deliveries refused (transient)", errors + partial, {{"batches taken in part", partial}}};
        break;
      case faults::FaultKind::kSinkRejects: e = {"deliveries refused (permanent)", rejections}; break;
      case faults::FaultKind::kDedupEviction: e = {"target dedup states forgotten", evictions}; break;
      case faults::FaultKind::kPipelinePause: e = {"pauses applied", probe_hits(Probe::kControllerPaused)}; break;
      case faults::FaultKind::kPipelineStop: e = {"stops applied (drains begun)", probe_hits(Probe::kControllerStopping)}; break;
      case faults::FaultKind::kRebalance:
        e = {"spare worker starts", spare_starts, {{"jobs moved", probe_hits(Probe::kControllerRebalance)}}};
        break;
      default: break;
    }
  }
  return out;
}

}  // namespace

PipelineRun run_pipeline(const PipelineRunOptions& o, const ComputationRegistry& registry) {
  Recorder recorder(o.spec);
  PipelineWorldOptions wo;
  wo.seed = o.seed;
  wo.workers = o.workers;
  wo.controllers = o.controllers;
  wo.spare_workers = o.spare_workers;
  wo.workload = o.workload;
  wo.bugs = o.bugs;
  wo.observer = &recorder;
  wo.trace_keep_lines = o.trace_keep_lines;
  wo.http_honours_idempotency_key = o.http_honours_idempotency_key;
  wo.kafka_epoch_per_transaction = o.kafka_epoch_per_transaction;
  wo.clickhouse_targets = o.clickhouse_targets;
  wo.respecs = o.respecs;
  PointPolicy points(o.seed, o.fault_point_probability, o.heal_at_us);
  const bool random_points = (o.swarm || o.fault_points_when_scripted) && o.fault_point_probability > 0;
  // Scripted point crashes: each fires once, at the first visit of its point by its node
  // from its time on (unless the kind is made inert).
  struct Armed {
    const faults::Fault* fault;
    bool fired = false;
  };
  std::vector<Armed> armed;
  if (!o.swarm && o.inert_faults.count(faults::FaultKind::kPointCrash) == 0) {
    for (const faults::Fault& f : o.scripted.faults) {
      if (f.kind == faults::FaultKind::kPointCrash) armed.push_back({&f});
    }
  }
  const sim::World* clock_of = nullptr;  // set once the world exists
  if (random_points || !armed.empty()) {
    wo.fault_point_policy = [&, random_points](const std::string& node, std::string_view point) -> std::optional<PointCrash> {
      for (Armed& a : armed) {
        if (!a.fired && a.fault->node == node && a.fault->point == point && clock_of->now() >= a.fault->at_us) {
          a.fired = true;
          return PointCrash{a.fault->duration_us > 0 ? a.fault->duration_us : wo.fault_point_restart_us};
        }
      }
      if (random_points && points(node, point)) return PointCrash{wo.fault_point_restart_us};
      return std::nullopt;
    };
  }
  // Knobs: drawn from the seed when random, explicit ones as given.
  PipelineSpec spec = o.spec;
  KnobValues knobs = o.random_knobs ? draw_knobs(o.seed, o.spec, wo.engine) : KnobValues{};
  for (const auto& [name, value] : o.knobs) knobs[name] = value;
  const Status applied = apply_knobs(knobs, spec, wo.engine);
  assert(applied.is_ok());  // explicit knobs are checked when the scenario is loaded
  (void)applied;
  SimUserCode user_code({o.seed, o.swarm || o.fault_points_when_scripted || o.buggify_when_scripted, o.buggify_sites,
                         o.heal_at_us, o.user_bugs});
  const onceflow::user_code::HooksScope user_code_scope(interception_linked() ? &user_code : nullptr);
  PipelineWorld world(spec, registry, wo);
  user_code.watch(&world.world());
  points.watch(&world.world());
  clock_of = &world.world();
  recorder.watch(&world.world(), &world.store_data());
  world.start();

  PipelineRun run;
  RunOutcome& out = run.outcome;
  out.seed = o.seed;
  std::vector<std::string> nodes = world.worker_names();
  for (const std::string& node : world.controller_names()) nodes.push_back(node);
  for (const std::string& node : world.target_nodes()) nodes.push_back(node);
  faults::SwarmOptions& swarm = out.fault_space;
  swarm.start_us = o.faults_start_us;
  swarm.heal_at_us = o.heal_at_us;
  swarm.nodes = nodes;
  swarm.store_node = "store";
  swarm.kinds = swarm_kinds_for(o);
  swarm.sink_targets = world.target_nodes();
  swarm.spare_workers = world.spare_worker_names();
  if (o.swarm) {
    Xoshiro256StarStar rng = Xoshiro256StarStar(o.seed).fork("faults");
    faults::SwarmMix mix;
    out.plan = faults::generate_swarm(rng, swarm, &mix);
    out.fault_mix = mix.describe();
    std::string enabled;
    for (const auto& p : points.enabled()) enabled += (enabled.empty() ? "" : ",") + p;
    if (!enabled.empty() && o.fault_point_probability > 0) out.fault_mix += " points:" + enabled;
  } else {
    out.plan = o.scripted;
    if (out.plan.heal_at_us == 0) out.plan.heal_at_us = o.heal_at_us;
    out.fault_mix = out.plan.faults.empty() ? "none" : "scripted";
  }
  faults::PipelineHooks hooks{[&world](const std::string& state) { world.set_pipeline_state(state); },
                      [&world](const std::string& node) { return world.target_faults(node); }};
  faults::FaultInjector injector(world.world(), &world.store_data(), &hooks);
  for (const auto& r : o.repartitions) {
    world.world().scheduler().at(r.at_us, sim::kWorldNode, [&world, r] { world.repartition(r.partitions); });
  }
  for (const auto& r : o.reconfigures) {
    world.world().scheduler().at(r.first, sim::kWorldNode, [&world, r] { world.reconfigure(r.second); });
  }
  for (const auto& r : o.state_requests) {
    world.world().scheduler().at(r.first, sim::kWorldNode, [&world, r] { world.set_pipeline_state(r.second); });
  }
  for (const auto& r : o.target_reshards) {
    world.world().scheduler().at(r.at_us, sim::kWorldNode, [&world, r] { world.reshard_target(r.sink, r.tablets); });
  }
  for (const faults::FaultKind kind : o.inert_faults) injector.make_inert(kind);
  injector.schedule(out.plan);

  // Past the heal, so that paused nodes come back; then until drained or out of bound.
  const Micros calm_from = calm(o, out.plan.heal_at_us, world.last_write_ts());
  out.liveness_bound_us = o.liveness_bound_us > 0
                              ? o.liveness_bound_us
                              : liveness_bound_rule(spec, wo.engine, largest_clock_fault(out.plan),
                                                    static_cast<uint64_t>(o.workload.messages),
                                                    static_cast<uint64_t>(o.workload.keys));
  out.knobs = knobs;
  world.run_sampling(calm_from + 200 * kMillis);
  Micros drained_at = -1;
  Micros deadline = calm_from + out.liveness_bound_us;
  if (world.run_until_drained(deadline)) drained_at = world.world().now();
  // A system-time timer the function set further ahead than the bound (a session gap of
  // minutes) cannot fire before its trigger: nothing is stuck, so the run waits for the latest
  // such timer and gives the bound again after it, as `onceflow real` waits for its timers. A
  // few times over, for timers set as others fire; one that keeps setting timers further ahead
  // is busy, and liveness says so.
  Micros timers_due_at = -1;
  constexpr int kTimerWaits = 8;
  constexpr Micros kLongestTimerWait = 10 * 60 * kSeconds;  // simulated time after the calm
  for (int wait = 0; drained_at < 0 && wait < kTimerWaits; ++wait) {
    const Micros last_trigger = world.last_system_timer_trigger();
    if (last_trigger <= deadline - out.liveness_bound_us || last_trigger > calm_from + kLongestTimerWait) break;
    timers_due_at = last_trigger;
    deadline = last_trigger + out.liveness_bound_us;
    if (world.run_until_drained(deadline)) drained_at = world.world().now();
  }
  if (drained_at >= 0) out.drain_us = drained_at - calm_from;
  std::string undrained = drained_at < 0 ? world.undrained() : "";
  if (const Micros last_trigger = world.last_system_timer_trigger(); drained_at < 0 && last_trigger > deadline) {
    undrained += fmt::format(" (a system-time timer is set for {}, later than the run waits: give the scenario a "
                             "liveness_bound past it)",
                             format_time(last_trigger));
  }

  // The store is drained; let replies in flight land and at-most-once queues empty.
  world.world().run_until(world.world().now() + kSettleUs);

  for (size_t i = 0; i < recorder.attempts.size(); ++i) {
    run.lease_owners.try_emplace(recorder.attempts[i].lease, recorder.attempts_node[i], recorder.attempts[i].job);
  }
  if (o.trace_keep_lines > 0) {  // before collect() moves the committed attempts into the history
    for (size_t i = 0; i < recorder.attempts.size(); ++i) {
      for (const auto* list : {&recorder.attempts[i].consumed, &recorder.attempts[i].produced}) {
        for (const auto& m : *list) out.txs_by_id[m.id].insert(recorder.attempts_tx[i]);
      }
    }
  }
  run.history = collect(o, registry, world, recorder, drained_at, out.liveness_bound_us);
  run.history.undrained = undrained;
  run.history.timers_due_at = timers_due_at;
  user_code.fill(run.history);
  out.verdicts = checkers::run_pipeline_checks(run.history);
  for (checkers::Verdict& v : checkers::run_user_checks(registry, run.history)) out.verdicts.push_back(std::move(v));
  if (!run.history.nondeterministic_calls.empty()) {
    std::string calls;
    for (const std::string& c : run.history.nondeterministic_calls) calls += (calls.empty() ? "" : "; ") + c;
    out.verdicts.push_back(checkers::Verdict::fail(
        checkers::DeterminismCheck::kName,
        fmt::format("user code read the machine's clock or randomness, which differs on every attempt (answered from "
                    "the simulation; use the RuntimeContext's current_timestamp() and random()): {}{}",
                    calls, o.replay_command.empty() ? "" : " — replay: " + o.replay_command)));
  }
  if (recorder.threw > 0) {
    // The cause of whatever else failed (the job retried the epoch, and the input threw again):
    // named first.
    out.verdicts.insert(out.verdicts.begin(),
                        checkers::Verdict::fail(checkers::kExceptionsCheck, fmt::format("{} call{} of a computation's function threw "
                                                                          "(each gives its epoch up; the job retries it), "
                                                                          "the first: {}{}",
                                                                          recorder.threw, recorder.threw == 1 ? "" : "s",
                                                                          recorder.first_throw,
                                                                          o.replay_command.empty() ? "" : " — replay: " + o.replay_command)));
  }
  out.passed = checkers::all_passed(out.verdicts);
  out.trace_hash = world.world().trace_hash();
  out.content_hash = content_hash(run.history);
  out.usage_error = recorder.misuse;
  out.events = world.world().scheduler().events_run();
  out.sim_time_us = world.world().now();
  out.observed = recorder.counters;
  out.observed["leases"] = world.store_data().leases().size();
  const PipelineWorld::DedupSize dedup = world.dedup_size();
  out.observed["dedup rows at end"] = dedup.rows;
  out.observed["dedup entries at end"] = dedup.entries;
  out.observed["dedup entries max"] = std::max(world.dedup_entries_max(), dedup.entries);
  out.observed["rejected commits"] = world.store_data().rejections().size();
  out.warnings = recorder.warnings;
  out.effects = measure_effects(out.plan, world, recorder);
  for (const Armed& a : armed) out.effects["point_crash"].count += a.fired ? 1 : 0;
  out.point_hits = world.point_hits();
  user_code.fill(out);
  if (random_points) {
    uint64_t fired = 0;
    for (const auto& [point, n] : points.fired()) fired += n;
    faults::FaultEffect e{"crashes at enabled fault points", fired, {}};
    for (const auto& [point, n] : points.fired()) e.details.emplace_back(point, n);
    out.effects["fault_points"] = std::move(e);
  }
  out.probes = recorder.probes;
  out.trace = world.world().trace().lines();
  if (!out.trace.empty()) {
    const auto index = [&out](const checkers::MessageRecord& m) { out.ids_by_key[m.key].insert(m.id); };
    for (const checkers::EpochRecord& e : run.history.epochs) {
      for (const auto& m : e.consumed) index(m);
      for (const auto& m : e.produced) index(m);
    }
    for (const checkers::DeliveryRecord& d : run.history.deliveries) index(d.message);
  }
  for (sim::NodeIndex n = 0; n < world.world().node_count(); ++n) run.nodes.push_back(world.world().name(n));
  for (const auto& [node, at] : world.world().crashes()) run.node_events.push_back({world.world().name(node), at, "crash", ""});
  std::map<TxId, std::string> tx_node;
  for (size_t i = 0; i < recorder.attempts_tx.size(); ++i) tx_node[recorder.attempts_tx[i]] = recorder.attempts_node[i];
  for (const auto& r : world.store_data().rejections()) {
    auto it = tx_node.find(r.tx);
    run.node_events.push_back({it == tx_node.end() ? "store" : it->second, r.store_time, "rejected commit",
                               fmt::format("tx {} refused: Lease {} had ended", r.tx, r.lease)});
  }
  std::stable_sort(run.node_events.begin(), run.node_events.end(),
                   [](const NodeEvent& a, const NodeEvent& b) { return a.at_us < b.at_us; });
  return run;
}

}  // namespace onceflow::simulated
