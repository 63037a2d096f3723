#include "real/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "checkers/pipeline_checks.h"
#include "core/engine.h"
#include "core/reexecute.h"
#include "real/deployment.h"

namespace onceflow::real {
namespace {

using json = nlohmann::json;

// The guarantee a sink of `onceflow real` promises: at least once for an at-least-once Kafka
// or queue sink, exactly once otherwise.
checkers::Guarantee guarantee_of(const SinkSpec& sink) {
  if ((sink.type == SinkType::kKafka || sink.type == SinkType::kAsyncQueue) &&
      sink.delivery_guarantee == SinkDelivery::kAtLeastOnce) {
    return checkers::Guarantee::kAtLeastOnce;
  }
  return checkers::Guarantee::kExactlyOnce;
}

checkers::MessageRecord record_of(const Message& m) {
  return {m.id, m.key, m.stream, m.alignment_ts, m.payload, m.event_ts, m.system_ts};
}

// What `sink` delivered, as its target holds it, into `h` (deliveries, and the sink's output).
Status read_deliveries(const SinkSpec& sink, RealStore& store, const KafkaConfig& kafka, checkers::PipelineHistory& h) {
  std::vector<Message> delivered;
  if (sink.type == SinkType::kSyncQueue) {
    auto rows = store.dump(tables::sync_sink(sink.name));
    if (!rows) return rows.error();
    for (const Row& row : *rows) {
      auto m = decode_message(row.value);
      if (!m) return Status::corruption(fmt::format("{}: sink row {} does not decode", store.where(), row.key));
      h.deliveries.push_back({sink.name, "", 0, 0, record_of(*m)});
      delivered.push_back(std::move(*m));
    }
  } else if (sink.type == SinkType::kKafka) {
    auto records = read_kafka_topic(kafka, kafka_topic(sink));
    if (!records) return records.error();
    for (const auto& record : *records) {
      Message m;
      m.key = kafka_key(record.key);
      m.payload = record.value;
      m.id = tables::parse_hex16(record.id);  // 0 for a record no onceflow sink wrote
      h.deliveries.push_back({sink.name, "", 0, 0, record_of(m)});
      delivered.push_back(std::move(m));
    }
  } else {
    auto entries = target_entries(store, sink.name);
    if (!entries) return entries.error();
    for (auto& e : *entries) {
      h.deliveries.push_back({sink.name, e.producer, e.lease, 0, record_of(e.message)});
      delivered.push_back(std::move(e.message));
    }
  }
  auto& out = h.sink_outputs[sink.name];
  for (const Message& m : delivered) out.emplace_back(m.key, m.payload);
  std::sort(out.begin(), out.end());
  return Status::ok();
}

// Every input the sources hold, named as the source jobs name them: the input log of the
// built-in producer (offsets counted per partition, in write order) and the Kafka input topics.
Result<std::vector<Message>> source_messages(const PipelineSpec& spec, RealStore& store, const KafkaConfig& kafka) {
  auto logged = produced_inputs(store);
  if (!logged) return logged.error();
  std::vector<Message> out;
  std::map<std::pair<std::string, int>, uint64_t> offsets;
  for (const SourceInput& in : *logged) {
    const SourceSpec* source = spec.source(in.source);
    if (source == nullptr) return Status::corruption(fmt::format("{}: the input log names source '{}', which the spec "
                                                                 "does not have", store.where(), in.source));
    Message m;
    m.id = source_message_id(source_origin(*source), in.partition, offsets[{in.source, in.partition}]++);
    m.key = in.key;
    m.stream = source->output_stream;
    m.event_ts = in.event_ts;
    m.payload = in.payload;
    out.push_back(std::move(m));
  }
  for (const auto& source : spec.sources) {
    if (source.type != "kafka") continue;
    auto records = read_kafka_topic(kafka, kafka_topic(source));
    if (!records) return records.error();
    for (const auto& record : *records) {
      Message m;
      m.id = source_message_id(source_origin(source), record.partition, static_cast<uint64_t>(record.offset));
      m.key = kafka_key(record.key);
      m.stream = source.output_stream;
      m.event_ts = record.timestamp;
      m.payload = record.value;
      out.push_back(std::move(m));
    }
  }
  return out;
}

// The computations in an order where each comes after what produces its inputs (as far as
// the pipeline has no cycle; one in a cycle comes in spec order).
std::vector<const ComputationSpec*> upstream_first(const PipelineSpec& spec) {
  std::set<std::string> ready;
  for (const auto& s : spec.sources) ready.insert(s.output_stream);
  std::vector<const ComputationSpec*> order;
  std::set<std::string> placed;
  while (order.size() < spec.computations.size()) {
    const ComputationSpec* next = nullptr;
    for (const auto& c : spec.computations) {
      if (placed.count(c.name) != 0) continue;
      const bool inputs_ready = std::all_of(c.input_streams.begin(), c.input_streams.end(),
                                            [&](const std::string& s) { return ready.count(s) != 0; });
      if (inputs_ready) {
        next = &c;
        break;
      }
      if (next == nullptr) next = &c;  // a cycle: the first one left
    }
    order.push_back(next);
    placed.insert(next->name);
    ready.insert(next->output_streams.begin(), next->output_streams.end());
  }
  return order;
}

// The committed history as a real run recorded it, re-executed: sources, then each
// computation's committed epochs (upstream first, each partition's in epoch order).
Status reexecute_recorded(const PipelineSpec& spec, const ComputationRegistry& registry, RealStore& store,
                          const std::vector<Message>& sources, checkers::PipelineHistory& h) {
  std::map<MessageId, Message> known;  // every message committed so far, by id
  for (const auto& source : spec.sources) {
    checkers::EpochRecord e;
    e.job = fmt::format("source/{}/0", source.name);
    e.computation = source.name;
    for (const Message& m : sources) {
      if (m.stream != source.output_stream) continue;
      e.produced.push_back(record_of(m));
      known.emplace(m.id, m);
    }
    h.epochs.push_back(std::move(e));
  }
  Reexecution reexecution(spec, registry);
  for (const ComputationSpec* c : upstream_first(spec)) {
    auto rows = store.dump(tables::history(c->name));
    if (!rows) return rows.error();
    for (const Row& row : *rows) {
      const auto recorded = decode_history_row(row.value);
      const size_t slash = row.key.find('/');
      if (!recorded || slash == std::string::npos) {
        return Status::corruption(fmt::format("{}: history row {} of computation {} does not decode", store.where(),
                                              row.key, c->name));
      }
      CommittedEpoch epoch;
      epoch.job = fmt::format("computation/{}/{}", c->name, std::stoi(row.key.substr(0, slash), nullptr, 16));
      epoch.computation = c->name;
      epoch.now = recorded->now;
      epoch.random_seed = recorded->random_seed;
      epoch.timers_fired = recorded->timers_fired;
      checkers::EpochRecord e;
      e.job = epoch.job;
      e.computation = c->name;
      e.epoch = tables::parse_hex16(row.key.substr(slash + 1));
      e.now = recorded->now;
      for (const auto& [id, system_ts] : recorded->consumed) {
        Message m;
        if (const auto it = known.find(id); it != known.end()) {
          m = it->second;
        } else {
          m.id = id;  // committed by nobody: the consumption check names it
        }
        m.system_ts = m.alignment_ts = system_ts;
        e.consumed.push_back(record_of(m));
        epoch.consumed.push_back(std::move(m));
      }
      for (Message& m : reexecution.next(epoch).produced) {
        e.produced.push_back(record_of(m));
        known.emplace(m.id, std::move(m));
      }
      h.epochs.push_back(std::move(e));
    }
  }
  h.reexecuted_tables = reexecution.tables();
  // The messages on each stream, for the sinks: every committed version of each id.
  std::map<std::string, std::set<std::tuple<uint64_t, uint64_t, std::string>>> seen;
  for (const auto& e : h.epochs) {
    for (const auto& m : e.produced) {
      if (!seen[m.stream].emplace(m.id, m.key, m.payload).second) continue;
      for (auto& sink : h.sinks) {
        const SinkSpec* s = spec.sink(sink.sink);
        if (s != nullptr && s->input_stream == m.stream) sink.expected.push_back(m);
      }
    }
  }
  // The computations' consumption is recorded; the sinks' is what their targets hold.
  for (const auto& c : spec.computations) {
    const bool once = c.type != ComputationType::kSwiftMap && c.processing_mode == ProcessingMode::kExactlyOnce;
    for (const auto& stream : c.input_streams) h.stream_consumers[stream].push_back({"computation/" + c.name + "/", once});
  }
  h.reexecuted = true;
  return Status::ok();
}

}  // namespace

Result<int> verify_run(const PipelineSpec& spec, const ComputationRegistry& registry, RealStore& store,
                       const KafkaConfig& kafka) {
  auto sources = source_messages(spec, store, kafka);
  if (!sources) return sources.error();
  checkers::PipelineHistory h;
  for (const auto& sink : spec.sinks) {
    if (Status read = read_deliveries(sink, store, kafka, h); !read.is_ok()) return read;
    h.sinks.push_back({sink.name, guarantee_of(sink), {}, {}, writes_before_commit(sink)});
  }
  if (Status done = reexecute_recorded(spec, registry, store, *sources, h); !done.is_ok()) return done;
  for (const std::string prefix : {"state/", "external/"}) {
    auto names = store.table_names(prefix);
    if (!names) return names.error();
    for (const std::string& table : *names) {
      auto rows = store.dump(table);
      if (!rows) return rows.error();
      for (const Row& row : *rows) h.tables[table][row.key] = row.value;
    }
  }
  const std::vector<checkers::Verdict> verdicts = {checkers::DeliveryCheck().check(h), checkers::StateCheck().check(h),
                                                   checkers::ConsumptionCheck().check(h)};
  // Counts by MessageId per sink: what the re-executed history gives it, what it holds.
  uint64_t outputs = 0, duplicates = 0, lost = 0, expected_total = 0;
  json sinks = json::object();
  for (const auto& e : h.sinks) {
    std::map<uint64_t, size_t> held;
    size_t sink_outputs = 0;
    for (const auto& d : h.deliveries) {
      if (d.sink != e.sink) continue;
      ++held[d.message.id];
      ++sink_outputs;
    }
    std::set<uint64_t> expected;
    for (const auto& m : e.expected) expected.insert(m.id);
    uint64_t sink_dup = 0, sink_lost = 0;
    for (const auto& [id, n] : held) sink_dup += expected.count(id) != 0 && n > 1 ? n - 1 : 0;
    for (uint64_t id : expected) sink_lost += held.count(id) == 0 ? 1 : 0;
    outputs += sink_outputs;
    duplicates += sink_dup;
    lost += sink_lost;
    expected_total += expected.size();
    sinks[e.sink] = {{"outputs", sink_outputs}, {"expected", expected.size()}, {"duplicates", sink_dup},
                     {"lost", sink_lost},
                     {"guarantee", e.guarantee == checkers::Guarantee::kAtLeastOnce ? "at_least_once" : "exactly_once"}};
  }
  json checks = json::array();
  for (const auto& v : verdicts) {
    checks.push_back({{"name", v.check}, {"verdict", v.verdict_name()}, {"detail", v.detail}});
  }
  const bool passed = checkers::all_passed(verdicts);
  const json verdict{{"verdict", passed ? "pass" : "fail"}, {"inputs", sources->size()}, {"outputs", outputs},
                     {"expected", expected_total}, {"duplicates", duplicates}, {"lost", lost}, {"sinks", sinks},
                     {"oracle", "the committed history, re-executed"}, {"checks", checks}};
  fmt::print("{}\n", verdict.dump(2));
  return passed ? 0 : 1;
}

}  // namespace onceflow::real
