#include "real/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "checkers/pipeline_checks.h"
#include "core/reference.h"
#include "core/engine.h"
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

// What `sink` delivered, as its target holds it; each delivery also goes into `h`.
Result<std::vector<Message>> delivered_by(const SinkSpec& sink, RealStore& store, const KafkaConfig& kafka,
                                          checkers::PipelineHistory& h) {
  std::vector<Message> delivered;
  if (sink.type == SinkType::kSyncQueue) {
    auto rows = store.dump(tables::sync_sink(sink.name));
    if (!rows) return rows.error();
    for (const Row& row : *rows) {
      auto m = decode_message(row.value);
      if (!m) return Status::corruption(fmt::format("{}: sink row {} does not decode", store.where(), row.key));
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
  return delivered;
}

}  // namespace

Result<int> verify_run(const PipelineSpec& spec, const ComputationRegistry& registry, RealStore& store,
                       const KafkaConfig& kafka) {
  auto logged = produced_inputs(store);
  if (!logged) return logged.error();
  std::vector<SourceInput> inputs = std::move(*logged);
  for (const auto& source : spec.sources) {
    if (source.type != "kafka") continue;
    auto records = read_kafka_topic(kafka, kafka_topic(source));
    if (!records) return records.error();
    for (const auto& record : *records) {
      inputs.push_back({source.name, record.partition, kafka_key(record.key), record.value, record.timestamp,
                        record.timestamp, {}, {}});
    }
  }
  std::stable_sort(inputs.begin(), inputs.end(),
                   [](const SourceInput& a, const SourceInput& b) { return a.write_ts < b.write_ts; });
  const PipelineResult reference = run_reference(spec, registry, inputs);

  checkers::PipelineHistory h;
  uint64_t outputs = 0, duplicates = 0, lost = 0;
  json sinks = json::object();
  for (const auto& sink : spec.sinks) {
    auto delivered = delivered_by(sink, store, kafka, h);
    if (!delivered) return delivered.error();
    auto& out = h.sink_outputs[sink.name];
    std::map<std::pair<uint64_t, std::string>, int64_t> balance;  // actual minus reference
    for (const Message& m : *delivered) {
      out.emplace_back(m.key, m.payload);
      ++balance[{m.key, m.payload}];
    }
    std::sort(out.begin(), out.end());
    auto ref = reference.sinks.find(sink.name);
    const auto expected = ref == reference.sinks.end() ? decltype(ref->second){} : ref->second;
    for (const auto& item : expected) --balance[item];
    uint64_t sink_dup = 0, sink_lost = 0;
    for (const auto& [item, n] : balance) {
      if (n > 0) sink_dup += static_cast<uint64_t>(n);
      if (n < 0) sink_lost += static_cast<uint64_t>(-n);
    }
    outputs += delivered->size();
    duplicates += sink_dup;
    lost += sink_lost;
    const checkers::Guarantee guarantee = guarantee_of(sink);
    sinks[sink.name] = {{"outputs", delivered->size()}, {"expected", expected.size()}, {"duplicates", sink_dup},
                        {"lost", sink_lost},
                        {"guarantee", guarantee == checkers::Guarantee::kAtLeastOnce ? "at_least_once" : "exactly_once"}};
    h.sinks.push_back({sink.name, guarantee, expected, {}, writes_before_commit(sink)});
  }
  for (const std::string prefix : {"state/", "external/"}) {
    auto names = store.table_names(prefix);
    if (!names) return names.error();
    for (const std::string& table : *names) {
      auto rows = store.dump(table);
      if (!rows) return rows.error();
      for (const Row& row : *rows) h.tables[table][row.key] = row.value;
    }
  }
  h.reference_tables = reference.tables;
  for (const auto& c : spec.computations) {
    if (c.processing_mode != ProcessingMode::kAtLeastOnceConsistent) continue;
    for (const std::string& table : bound_tables(registry, c)) h.uncompared_tables.insert(table);
  }
  const std::vector<checkers::Verdict> verdicts = {checkers::DeliveryCheck().check(h), checkers::StateCheck().check(h)};
  json checks = json::array();
  for (const auto& v : verdicts) {
    checks.push_back({{"name", v.check}, {"verdict", v.verdict_name()}, {"detail", v.detail}});
  }
  const bool passed = checkers::all_passed(verdicts);
  const json verdict{{"verdict", passed ? "pass" : "fail"}, {"inputs", inputs.size()}, {"outputs", outputs},
                     {"duplicates", duplicates}, {"lost", lost}, {"sinks", sinks}, {"checks", checks}};
  fmt::print("{}\n", verdict.dump(2));
  return passed ? 0 : 1;
}

}  // namespace onceflow::real
