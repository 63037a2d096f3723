#include "core/reference.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <memory>
#include <tuple>

#include "core/env/random.h"
#include "core/message.h"

namespace onceflow {

namespace {

class MapBackend final : public StateBackend {
 public:
  explicit MapBackend(PipelineResult& result) : result_(result) {}
  std::optional<std::string> get(const std::string& table, uint64_t key) override {
    auto& t = result_.tables[table];
    auto it = t.find(format_id(key));
    return it == t.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void put(const std::string& table, uint64_t key, std::string value) override {
    result_.tables[table][format_id(key)] = std::move(value);
  }
  void erase(const std::string& table, uint64_t key) override { result_.tables[table].erase(format_id(key)); }

 private:
  PipelineResult& result_;
};

class Context final : public RuntimeContext {
 public:
  Context(const Micros& now, Random& random) : now_(now), random_(random) {}
  Micros current_timestamp() const override { return now_; }
  Random& random() override { return random_; }

 private:
  const Micros& now_;
  Random& random_;
};

class Reference {
 public:
  Reference(const PipelineSpec& spec, const ComputationRegistry& registry)
      : spec_(spec), backend_(result_), random_(0), context_(now_, random_) {
    for (const auto& c : spec.computations) {
      auto f = registry.create(c.processing_function);
      f->init(InitContext(backend_, c.name));
      functions_[c.name] = std::move(f);
    }
  }

  PipelineResult run(std::vector<SourceInput> inputs) {
    std::stable_sort(inputs.begin(), inputs.end(), [](const auto& a, const auto& b) { return a.write_ts < b.write_ts; });
    // A service log is read max_cycles times over; each cycle after the last write.
    int cycles = 1;
    for (const auto& source : spec_.sources) {
      if (source.type == "service_log") cycles = std::max(cycles, source.max_cycles);
    }
    const Micros cycle_span = inputs.empty() ? 1 : inputs.back().write_ts + 1;
    for (int cycle = 0; cycle < cycles; ++cycle) {
      std::map<std::pair<std::string, int>, uint64_t> offsets;
      for (const auto& in : inputs) {
        const SourceSpec* source = spec_.source(in.source);
        assert(source != nullptr);
        const bool service_log = source->type == "service_log";
        if (cycle > 0 && (!service_log || cycle >= source->max_cycles)) continue;
        const uint64_t offset = offsets[{in.source, in.partition}]++;
        Message m;
        m.id = source_message_id(in.source, in.partition,
                                 service_log ? service_log_offset(static_cast<uint64_t>(cycle), offset) : offset);
        m.key = in.key;
        m.stream = source->output_stream;
        m.system_ts = m.alignment_ts = in.write_ts + cycle * cycle_span;
        m.event_ts = in.event_ts;
        m.payload = in.payload;
        queue_.push_back(std::move(m));
      }
    }
    while (true) {
      while (!queue_.empty()) {
        Message m = std::move(queue_.front());
        queue_.pop_front();
        now_ = std::max(now_, m.system_ts);
        dispatch(m);
      }
      if (timers_.empty()) break;
      auto it = timers_.begin();
      const auto [computation, timer] = it->second;
      pending_.erase({timer.trigger_ts, computation, timer.key, timer.timer_stream});
      timers_.erase(it);
      now_ = std::max(now_, timer.trigger_ts);
      const ComputationSpec* spec = spec_.computation(computation);
      CollectingOutput out(*spec, timer.key, timer.event_ts);
      functions_[computation]->process_timer(timer, out, context_);
      absorb(*spec, out, timer.event_ts);
    }
    for (auto& [sink, messages] : result_.sinks) std::sort(messages.begin(), messages.end());
    std::erase_if(result_.tables, [](const auto& t) { return t.second.empty(); });
    return std::move(result_);
  }

 private:
  void dispatch(const Message& m) {
    for (const auto& s : spec_.sinks) {
      if (s.input_stream == m.stream) result_.sinks[s.name].emplace_back(m.key, m.payload);
    }
    for (const auto& c : spec_.computations) {
      if (std::find(c.input_streams.begin(), c.input_streams.end(), m.stream) == c.input_streams.end()) continue;
      CollectingOutput out(c, m.key, m.event_ts);
      functions_[c.name]->process_message(m, out, context_);
      absorb(c, out, m.event_ts);
    }
  }

  void absorb(const ComputationSpec& c, CollectingOutput& out, Micros event_ts) {
    for (auto& o : out.messages) {
      Message child;
      child.id = derived_message_id(++next_id_, 0);
      child.key = o.key;
      child.stream = o.stream;
      child.system_ts = child.alignment_ts = now_;
      child.event_ts = event_ts;
      child.payload = std::move(o.payload);
      queue_.push_back(std::move(child));
    }
    for (const Timer& t : out.timers) {
      // deduplicate_equal_timestamps (on by default): one timer per (key, trigger, stream),
      // smallest event time; without it every timer stands on its own.
      const auto stream = std::find_if(c.timer_streams.begin(), c.timer_streams.end(),
                                       [&](const TimerStreamSpec& ts) { return ts.name == t.timer_stream; });
      if (stream != c.timer_streams.end() && !stream->deduplicate_equal_timestamps) {
        timers_.emplace(t.trigger_ts, std::make_pair(c.name, t));
        continue;
      }
      TimerIdentity identity{t.trigger_ts, c.name, t.key, t.timer_stream};
      if (auto same = pending_.find(identity); same != pending_.end()) {
        Timer& existing = same->second->second.second;
        existing.event_ts = std::min(existing.event_ts, t.event_ts);
        continue;
      }
      pending_.emplace(std::move(identity), timers_.emplace(t.trigger_ts, std::make_pair(c.name, t)));
    }
  }

  const PipelineSpec& spec_;
  PipelineResult result_;
  MapBackend backend_;
  Xoshiro256StarStar random_;
  Micros now_ = 0;
  Context context_;
  uint64_t next_id_ = 0;
  std::map<std::string, std::unique_ptr<ProcessFunction>> functions_;
  std::deque<Message> queue_;
  // Timers to fire, by trigger time and then in the order they were set.
  using TimerQueue = std::multimap<Micros, std::pair<std::string, Timer>>;
  TimerQueue timers_;
  // The same timers by (trigger, computation, key, timer stream), for merging equal ones.
  using TimerIdentity = std::tuple<Micros, std::string, uint64_t, std::string>;
  std::map<TimerIdentity, TimerQueue::iterator> pending_;
};

}  // namespace

PipelineResult run_reference(const PipelineSpec& spec, const ComputationRegistry& registry,
                             const std::vector<SourceInput>& inputs) {
  return Reference(spec, registry).run(inputs);
}

}  // namespace onceflow
