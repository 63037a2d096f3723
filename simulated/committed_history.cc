#include "simulated/committed_history.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/reexecute.h"

namespace onceflow::simulated {

namespace {

Message message_of(const checkers::MessageRecord& r) {
  Message m;
  m.id = r.id;
  m.key = r.key;
  m.stream = r.stream;
  m.alignment_ts = r.alignment_ts;
  m.payload = r.payload;
  m.event_ts = r.event_ts;
  m.system_ts = r.system_ts;
  return m;
}

checkers::StateReadRecord state_record(const std::string& table, uint64_t key, const std::optional<std::string>& value) {
  return {table, key, value.has_value(), value.value_or(std::string())};
}

CommittedEpoch committed_epoch(const checkers::EpochRecord& e) {
  CommittedEpoch c;
  c.job = e.job;
  c.computation = e.computation;
  c.now = e.now;
  c.random_seed = e.random_seed;
  c.consumed.reserve(e.consumed.size());
  for (const auto& m : e.consumed) c.consumed.push_back(message_of(m));
  for (const auto& f : e.fired) {
    c.timers_fired.push_back({f.row, f.creation, Timer{f.key, f.trigger_ts, f.event_ts, f.stream}, f.after_consumed, f.watermark});
  }
  for (const auto& r : e.state_reads) {
    c.state_reads.push_back({r.table, r.key, r.present ? std::optional<std::string>(r.value) : std::nullopt});
  }
  return c;
}

// Which consumers take each stream, and how often each must take a message: once when it
// dedups its input and the stream's producer never emits a message again later
// (PipelineSpec::repeats_late), else at least once.
std::map<std::string, std::vector<checkers::StreamConsumer>> consumers_of(const PipelineSpec& spec) {
  std::map<std::string, std::vector<checkers::StreamConsumer>> out;
  for (const auto& c : spec.computations) {
    const bool once = c.type != ComputationType::kSwiftMap && c.processing_mode == ProcessingMode::kExactlyOnce;
    for (const auto& stream : c.input_streams) {
      out[stream].push_back({"computation/" + c.name + "/", once && !spec.repeats_late(stream)});
    }
  }
  for (const auto& s : spec.sinks) {
    // As core/job_sink.cc: an at-most-once sink and an at-least-once queue sink keep no input dedup.
    const bool alo_queue = s.type == SinkType::kAsyncQueue && s.delivery_guarantee == SinkDelivery::kAtLeastOnce;
    const bool once = !s.at_most_once_strategy.enabled && !alo_queue && !spec.repeats_late(s.input_stream);
    out[s.input_stream].push_back({"sink/" + s.name + "/", once});
  }
  return out;
}

}  // namespace

void reexecute_history(const PipelineSpec& spec, const ComputationRegistry& registry,
                       std::vector<Message> source_messages, checkers::PipelineHistory& h) {
  Reexecution reexecution(spec, registry);
  // A sink's stream: the distinct messages (id, key, payload) the re-execution puts there, in
  // the order it first does, where each id's are in that list, and the sinks still to take it.
  struct SinkStream {
    std::vector<checkers::MessageRecord> messages;
    std::unordered_map<uint64_t, std::vector<size_t>> by_id;
    size_t readers = 0;
  };
  std::map<std::string, SinkStream> on_stream;
  for (const checkers::SinkExpectation& sink : h.sinks) {
    if (const SinkSpec* s = spec.sink(sink.sink)) ++on_stream[s->input_stream].readers;
  }
  const auto put = [&](const checkers::MessageRecord& m) {
    const auto stream = on_stream.find(m.stream);
    if (stream == on_stream.end()) return;  // no sink reads it
    SinkStream& to = stream->second;
    std::vector<size_t>& same_id = to.by_id[m.id];
    for (const size_t i : same_id) {
      if (to.messages[i].key == m.key && to.messages[i].payload == m.payload) return;
    }
    same_id.push_back(to.messages.size());
    to.messages.push_back(m);
  };
  h.source_inputs.reserve(source_messages.size());
  for (Message& m : source_messages) {
    h.source_inputs.push_back(record_of(std::move(m)));
    put(h.source_inputs.back());
  }
  for (checkers::EpochRecord& e : h.epochs) {
    if (!e.job.starts_with("computation/") || spec.computation(e.computation) == nullptr) continue;
    ReexecutedEpoch again = reexecution.next(committed_epoch(e));
    e.reexecuted = true;
    for (const Message& m : again.produced) {
      e.expected_produced.push_back(record_of(m));
      put(e.expected_produced.back());
    }
    e.expected_timers_created = std::move(again.timer_rows_created);
    for (size_t i = 0; i < e.state_reads.size(); ++i) {
      e.expected_state.push_back(state_record(e.state_reads[i].table, e.state_reads[i].key, again.state_before[i]));
    }
    e.reexecution_problems = std::move(again.problems);
  }
  h.reexecuted_tables = reexecution.tables();
  h.reexecuted_timers = reexecution.timers();
  h.stream_consumers = consumers_of(spec);
  for (checkers::SinkExpectation& sink : h.sinks) {
    const SinkSpec* s = spec.sink(sink.sink);
    if (s == nullptr) continue;
    SinkStream& from = on_stream.at(s->input_stream);
    sink.expected = --from.readers == 0 ? std::move(from.messages) : from.messages;
  }
  h.reexecuted = true;
}

}  // namespace onceflow::simulated
