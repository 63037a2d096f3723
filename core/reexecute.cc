#include "core/reexecute.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "core/emitted.h"
#include "core/env/codec.h"
#include "core/env/random.h"
#include "core/timer_row.h"
#include "core/user_code.h"
#include "core/env/clock.h"

namespace onceflow {

namespace {

using Tables = std::map<std::string, std::map<std::string, std::string>>;

class TablesBackend final : public StateBackend {
 public:
  explicit TablesBackend(Tables& tables) : tables_(tables) {}
  std::optional<std::string> get(const std::string& table, uint64_t key) override {
    const auto t = tables_.find(table);
    if (t == tables_.end()) return std::nullopt;
    const auto row = t->second.find(tables::hex16(key));
    return row == t->second.end() ? std::nullopt : std::optional<std::string>(row->second);
  }
  void put(const std::string& table, uint64_t key, std::string value) override {
    tables_[table][tables::hex16(key)] = std::move(value);
  }
  void erase(const std::string& table, uint64_t key) override {
    const auto t = tables_.find(table);
    if (t != tables_.end()) t->second.erase(tables::hex16(key));
  }

 private:
  Tables& tables_;
};

class FixedContext final : public RuntimeContext {
 public:
  FixedContext(Micros now, uint64_t seed) : now_(now), random_(seed) {}
  Micros current_timestamp() const override { return now_; }
  Random& random() override { return random_; }

 private:
  Micros now_;
  Xoshiro256StarStar random_;
};

}  // namespace

struct Reexecution::Impl {
  const PipelineSpec& spec;
  const ComputationRegistry& registry;
  Tables tables;
  TablesBackend backend{tables};
  std::map<std::string, std::unique_ptr<ProcessFunction>> functions;  // by job
  // Each computation's timers by row (a repartition moves rows between partitions, never
  // changes them).
  std::map<std::string, std::map<std::string, TimerValue>> timers;

  // The epoch being re-executed, while next() runs: what user code is told of its calls.
  const CommittedEpoch* epoch = nullptr;
  std::map<uint32_t, uint32_t>* buggify_calls = nullptr;
  UserCall call_for(uint64_t message, uint64_t key, bool timer) const {
    return UserCall{epoch->computation, epoch->job, 0, message, key, timer, epoch->now, epoch->random_seed, buggify_calls, true};
  }

  Impl(const PipelineSpec& s, const ComputationRegistry& r) : spec(s), registry(r) {}

  ProcessFunction& function_of(const CommittedEpoch& e, const ComputationSpec& c) {
    auto& f = functions[e.job];
    if (f == nullptr) {
      assert(registry.has(c.processing_function));
      f = registry.create(c.processing_function);
      try {
        f->init(InitContext(backend, c.name));
      } catch (...) {
        // The run's init() did not throw, or nothing of it committed: what the function gives
        // half-initialised, re-execution compares with what was committed.
      }
    }
    return *f;
  }

  void add_timer(const ComputationSpec& c, const Timer& t, uint64_t unique, ReexecutedEpoch& out) {
    bool merges = true;
    for (const auto& s : c.timer_streams) {
      if (s.name == t.timer_stream) merges = s.deduplicate_equal_timestamps;
    }
    const std::string row = timer_row(t, merges, unique);
    auto& held = timers[c.name];
    const auto it = held.find(row);
    std::optional<TimerValue> existing;
    if (it != held.end()) {
      existing = it->second;
    } else {
      out.timer_rows_created.push_back(row);
    }
    if (const auto value = timer_after_add(existing, t.event_ts, unique)) held[row] = *value;
  }

  // The function threw re-executing `what` of a committed epoch (from a catch block), which
  // in the run it had not: its outputs and timers are dropped (state it wrote before throwing
  // stays, and may show in `state` too).
  static void threw(const ComputationSpec& c, const std::string& what, ReexecutedEpoch& out) {
    out.problems.push_back(fmt::format("computation {} threw {} re-executing {}, which the committed epoch took without "
                                       "throwing",
                                       c.name, user_code::describe_current_exception(), what));
  }

  void message(const ComputationSpec& c, ProcessFunction& f, FixedContext& context, const Message& m,
               OutputBatches* batches, ReexecutedEpoch& out) {
    CollectingOutput emitted(c, m.key, m.event_ts);
    {
      const UserCall call = call_for(m.id, m.key, false);
      const user_code::CallScope scope(call);
      try {
        f.process_message(m, emitted, context);
      } catch (...) {
        return threw(c, fmt::format("message {} (key {})", format_id(m.id), m.key), out);
      }
    }
    for (uint32_t i = 0; i < emitted.messages.size(); ++i) {
      if (batches != nullptr) {
        batches->add(m, std::move(emitted.messages[i]));
      } else {
        out.produced.push_back(message_output(m, std::move(emitted.messages[i]), i));
      }
    }
    for (uint32_t i = 0; i < emitted.timers.size(); ++i) add_timer(c, emitted.timers[i], message_timer_unique(m, i), out);
  }

  void timer(const ComputationSpec& c, ProcessFunction& f, FixedContext& context,
             const EngineObserver::Epoch::FiredTimer& fired, ReexecutedEpoch& out) {
    auto& held = timers[c.name];
    const auto it = held.find(fired.row);
    if (it == held.end()) {
      out.problems.push_back(fmt::format("fired timer {}, which its re-execution does not hold: never set, or fired "
                                         "already", readable_timer(fired.row)));
      return;
    }
    const TimerValue value = it->second;
    held.erase(it);
    if (value.creation != fired.creation || value.event_ts != fired.timer.event_ts) {
      out.problems.push_back(fmt::format("fired timer {} as set by {} with event time {}; its re-execution holds it "
                                         "as set by {} with event time {}",
                                         readable_timer(fired.row), tables::hex16(fired.creation), format_time(fired.timer.event_ts),
                                         tables::hex16(value.creation), format_time(value.event_ts)));
    }
    const Timer t = decode_timer(fired.row, value);
    const std::string firing = timer_firing(fired.row, value.creation);
    CollectingOutput emitted(c, t.key, t.event_ts);
    {
      const UserCall call = call_for(0, t.key, true);
      const user_code::CallScope scope(call);
      try {
        f.process_timer(t, emitted, context);
      } catch (...) {
        return threw(c, fmt::format("timer {}", readable_timer(fired.row)), out);
      }
    }
    for (uint32_t i = 0; i < emitted.messages.size(); ++i) {
      out.produced.push_back(timer_output(c.name, firing, t, std::move(emitted.messages[i]), i));
    }
    for (uint32_t i = 0; i < emitted.timers.size(); ++i) {
      add_timer(c, emitted.timers[i], timer_timer_unique(c.name, firing, i), out);
    }
  }
};

Reexecution::Reexecution(const PipelineSpec& spec, const ComputationRegistry& registry)
    : impl_(std::make_unique<Impl>(spec, registry)) {}
Reexecution::~Reexecution() = default;

ReexecutedEpoch Reexecution::next(const CommittedEpoch& e) {
  const ComputationSpec* c = impl_->spec.computation(e.computation);
  assert(c != nullptr);
  ReexecutedEpoch out;
  out.state_before.reserve(e.state_reads.size());
  for (const auto& read : e.state_reads) out.state_before.push_back(impl_->backend.get(read.table, read.key));
  ProcessFunction& f = impl_->function_of(e, *c);
  FixedContext context(e.now, e.random_seed);
  // The function's calls are marked as the engine marked them (the same message, key, time
  // and seed, a fresh count of buggify calls per site), so ONCEFLOW_BUGGIFY and an intercepted
  // clock or random number answer as they did; its assertions were counted when it ran.
  std::map<uint32_t, uint32_t> buggify_calls;
  impl_->epoch = &e;
  impl_->buggify_calls = &buggify_calls;
  struct Done {
    Impl& impl;
    ~Done() {
      impl.epoch = nullptr;
      impl.buggify_calls = nullptr;
    }
  } done{*impl_};
  const bool batching = c->type == ComputationType::kSwiftMap && c->allow_batching_with_relaxed_guarantees;
  OutputBatches batches;
  size_t fired = 0;
  for (size_t i = 0; i <= e.consumed.size(); ++i) {
    // The timers that fired before the message at i (the engine fires them after its messages).
    for (; fired < e.timers_fired.size() && e.timers_fired[fired].after_consumed <= i; ++fired) {
      impl_->timer(*c, f, context, e.timers_fired[fired], out);
    }
    if (i < e.consumed.size()) impl_->message(*c, f, context, e.consumed[i], batching ? &batches : nullptr, out);
  }
  if (batching) {
    for (Message& batch : batches.take(c->batch_size)) out.produced.push_back(std::move(batch));
  }
  return out;
}

std::string encode_history_row(const EngineObserver::Epoch& e) {
  Encoder out;
  out.u64(e.layout_version).i64(e.now).fixed64(e.random_seed).u64(e.consumed.size());
  Micros before = e.now;  // system times as differences: most are close to each other
  for (const Message& m : e.consumed) {
    out.fixed64(m.id).i64(m.system_ts - before);
    before = m.system_ts;
  }
  out.u64(e.timers_fired.size());
  for (const auto& f : e.timers_fired) {
    out.bytes(f.row).u64(f.creation).i64(f.timer.event_ts).u64(f.after_consumed);
  }
  // Last, and only when read, so that rows written before it was kept still decode; then the
  // outputs' digest, which rows written before it was kept lack.
  if (e.clock_at_commit != EngineObserver::Epoch::kNoClockReading) {
    out.i64(e.clock_at_commit - e.now);
    out.fixed64(outputs_digest(e.produced));
    std::string tags;
    tags.reserve(2 * e.consumed.size());
    for (const Message& m : e.consumed) {
      const uint16_t tag = version_tag(m);
      tags.push_back(static_cast<char>(tag & 0xff));
      tags.push_back(static_cast<char>(tag >> 8));
    }
    out.bytes(tags);
  }
  return out.take();
}

namespace {
// What the re-execution check compares of a message besides its id: key, stream, event time
// and payload, hashed.
uint64_t content_hash(const Message& m) {
  uint64_t h = mix64(mix64(m.key) ^ hash_bytes(m.stream));
  h = mix64(h ^ static_cast<uint64_t>(m.event_ts));
  return mix64(h ^ hash_bytes(m.payload));
}
}  // namespace

uint16_t version_tag(const Message& m) { return static_cast<uint16_t>(content_hash(m)); }

uint64_t outputs_digest(const std::vector<Message>& produced) {
  std::vector<std::pair<MessageId, size_t>> by_id;  // each id's first message, as the check keeps it
  by_id.reserve(produced.size());
  for (size_t i = 0; i < produced.size(); ++i) by_id.emplace_back(produced[i].id, i);
  std::sort(by_id.begin(), by_id.end());
  uint64_t digest = mix64(by_id.size());
  for (size_t i = 0; i < by_id.size(); ++i) {
    if (i > 0 && by_id[i].first == by_id[i - 1].first) continue;
    // A sum: the order of the outputs does not count.
    digest += mix64(by_id[i].first ^ content_hash(produced[by_id[i].second]));
  }
  return digest;
}

std::optional<EpochHistoryRow> decode_history_row(std::string_view bytes) {
  Decoder in(bytes);
  EpochHistoryRow row;
  row.layout_version = in.u64();
  row.now = in.i64();
  row.random_seed = in.fixed64();
  const uint64_t consumed = in.u64();
  if (!in.ok() || consumed > bytes.size()) return std::nullopt;
  Micros before = row.now;
  for (uint64_t i = 0; i < consumed && in.ok(); ++i) {
    const MessageId id = in.fixed64();
    before += in.i64();
    row.consumed.emplace_back(id, before);
  }
  const uint64_t fired = in.u64();
  if (!in.ok() || fired > bytes.size()) return std::nullopt;
  for (uint64_t i = 0; i < fired && in.ok(); ++i) {
    EngineObserver::Epoch::FiredTimer f;
    f.row = in.string();
    f.creation = in.u64();
    const Micros event_ts = in.i64();
    f.after_consumed = in.u64();
    if (!in.ok() || f.row.size() <= 34 || f.row[16] != '/' || f.row[33] != '/') return std::nullopt;
    f.timer = decode_timer(f.row, TimerValue{event_ts, f.creation});
    row.timers_fired.push_back(std::move(f));
  }
  if (in.ok() && !in.done()) row.clock_at_commit = row.now + in.i64();
  if (in.ok() && !in.done()) row.outputs_digest = in.fixed64();
  if (in.ok() && !in.done()) {
    const std::string tags = in.string();
    if (tags.size() != 2 * row.consumed.size()) return std::nullopt;
    for (size_t i = 0; i < tags.size(); i += 2) {
      row.version_tags.push_back(static_cast<uint16_t>(static_cast<uint8_t>(tags[i]) | static_cast<uint8_t>(tags[i + 1]) << 8));
    }
  }
  if (!in.ok() || !in.done()) return std::nullopt;
  return row;
}

std::map<std::string, std::map<std::string, std::string>> Reexecution::tables() const {
  Tables out = impl_->tables;
  std::erase_if(out, [](const auto& t) { return t.second.empty(); });
  return out;
}

std::map<std::string, std::map<std::string, std::string>> Reexecution::timers() const {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const ComputationSpec& c : impl_->spec.computations) {
    if (c.timer_streams.empty()) continue;
    std::map<std::string, std::string>& rows = out[c.name];
    const auto held = impl_->timers.find(c.name);
    if (held == impl_->timers.end()) continue;
    for (const auto& [row, value] : held->second) rows.emplace(row, describe_timer_value(value));
  }
  return out;
}

}  // namespace onceflow
