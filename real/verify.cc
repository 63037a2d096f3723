#include "real/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "checkers/pipeline_checks.h"
#include "checkers/records.h"
#include "checkers/user_checks.h"
#include "core/engine.h"
#include "core/env/codec.h"
#include "core/outbox.h"
#include "core/emitted.h"
#include "core/reexecute.h"
#include "core/timer_row.h"
#include "real/clickhouse_sink.h"
#include "real/deployment.h"
#include "real/user_code_counts.h"
#include "real/wall_clock.h"

namespace onceflow::real {
namespace {

using json = nlohmann::json;
using checkers::record_of;

constexpr Micros kClickHouseTimeout = 60 * kSeconds;  // reading a whole table back

// The guarantee a sink of `onceflow real` is held to (core/spec.h: pipeline_delivery), as the
// simulator holds it; `dedups`: a ClickHouse sink's tables deduplicate blocks (their engine,
// as the server says; its warning said so otherwise).
checkers::Guarantee guarantee_of(const PipelineSpec& spec, const SinkSpec& sink, bool dedups = true) {
  return checkers::guarantee_of(pipeline_delivery(spec, sink, dedups));
}

// What a ClickHouse sink's table holds (every shard's), as messages; `dedups` is whether every
// shard's table deduplicates blocks.
Result<std::vector<Message>> read_clickhouse(const SinkSpec& sink, bool* dedups) {
  const auto [database, table] = clickhouse_table(sink);
  std::vector<std::string> urls = sink.shard_hosts;
  if (urls.empty()) urls.push_back(sink.url);
  std::vector<Message> out;
  *dedups = true;
  for (const std::string& url : urls) {
    if (!parse_http_url(url)) return Status::invalid_argument(fmt::format("sinks.{}: '{}' is not a URL", sink.name, shown_url(url)));
    ClickHouseServer server(url, kClickHouseTimeout);
    auto engine = server.query(fmt::format("SELECT engine FROM system.tables WHERE database = {} AND name = {}",
                                           clickhouse_literal(database), clickhouse_literal(table)));
    if (!engine) return engine.error();
    *dedups = *dedups && clickhouse_engine_deduplicates(engine->substr(0, engine->find('\n')));
    auto rows = server.query(fmt::format("SELECT message_id, key, payload FROM {} FORMAT TabSeparated", clickhouse_table_sql(database, table)));
    if (!rows) return rows.error();
    auto parsed = parse_clickhouse_rows(*rows);
    if (!parsed) return Status::corruption(fmt::format("sink {} at {}: {}", sink.name, shown_url(url), parsed.error().message()));
    for (ClickHouseRow& row : *parsed) {
      Message& m = out.emplace_back();
      m.id = tables::parse_hex16(row.message_id);  // 0 for a row no onceflow sink wrote
      m.key = row.key;
      m.stream = sink.input_stream;
      m.payload = std::move(row.payload);
    }
  }
  return out;
}

}  // namespace

std::string process_life_key(Micros started_at, const std::string& process) {
  return tables::hex16(static_cast<uint64_t>(started_at)) + "/" + process;
}

namespace {
constexpr std::string_view kBugMark = " bug=";
std::string bug_mark(const std::string& bug) { return bug.empty() ? std::string() : std::string(kBugMark) + bug; }
}  // namespace

std::string process_life_start(const std::string& bug) { return "running" + bug_mark(bug); }

std::string process_life_end(bool clean, uint64_t dropped, uint64_t in_doubt, const std::string& bug) {
  return fmt::format("{} {} {}{}", clean ? "ended" : "cut", dropped, in_doubt, bug_mark(bug));
}

namespace {

// What the lives of the deployment's processes account for, across its sinks: how many did
// not end with nothing in flight (killed, failed, cut short), and how many at-most-once
// messages they counted as given up.
struct Lives {
  uint64_t cut = 0;
  uint64_t given_up = 0;
  std::map<std::string, std::vector<std::string>> bugs;  // bug switch ("": none) -> the lives that ran with it
};
Result<Lives> read_lives(RealStore& store) {
  auto rows = store.dump(kProcessLives);
  if (!rows) return rows.error();
  Lives lives;
  for (const Row& row : *rows) {
    // "ended|cut DROPPED IN_DOUBT", or "running"; then " bug=NAME" if it ran with one
    std::string_view text = row.value;
    const size_t mark = text.find(kBugMark);
    lives.bugs[mark == std::string_view::npos ? std::string() : std::string(text.substr(mark + kBugMark.size()))].push_back(row.key);
    if (mark != std::string_view::npos) text = text.substr(0, mark);
    const bool ended = text.starts_with("ended "), cut = text.starts_with("cut ");
    uint64_t counts[2] = {0, 0};
    bool read = ended || cut;
    text.remove_prefix(ended ? 6 : cut ? 4 : 0);
    for (uint64_t& n : counts) {
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      read = read && ec == std::errc();
      text.remove_prefix(static_cast<size_t>(end - text.data()));
      if (text.starts_with(' ')) text.remove_prefix(1);
    }
    if (read) lives.given_up += counts[0] + counts[1];
    if (!read || cut) ++lives.cut;
  }
  return lives;
}

// The most partitions sink `sink` ever ran with: a life cut under an earlier layout (a
// repartition since, by a later life) may have held a queue in each of them. Every partition
// that ever ran keeps its meta row.
Result<uint64_t> partitions_ever(RealStore& store, const std::string& sink, int now) {
  const std::string prefix = JobId{JobKind::kSink, sink, 0}.str();
  const std::string from = prefix.substr(0, prefix.size() - 1);  // "sink/<name>/"
  auto tx = store.begin();
  if (!tx) return tx.error();
  auto rows = store.scan(*tx, tables::kJobMeta, from, from + "~", kMaxPartitions);
  store.abort(*tx);
  if (!rows) return rows.error();
  uint64_t most = static_cast<uint64_t>(std::max(1, now));
  for (const Row& row : *rows) {
    uint64_t p = 0;
    const char* begin = row.key.data() + from.size();
    const char* end = row.key.data() + row.key.size();
    if (std::from_chars(begin, end, p).ptr == end) most = std::max(most, p + 1);
  }
  return most;
}

// The MessageIds `sink`'s outbox still holds: written by committed epochs, not yet
// acknowledged (an acknowledged row is erased).
Result<std::set<uint64_t>> outbox_ids(RealStore& store, const std::string& sink) {
  auto rows = store.dump(tables::outbox(sink));
  if (!rows) return rows.error();
  std::set<uint64_t> ids;
  for (const Row& row : *rows) {
    std::vector<OutboxRow> messages;
    const size_t slash = row.key.rfind('/');
    if (slash == std::string::npos ||
        !decode_outbox_row(tables::parse_hex16(row.key.substr(slash + 1)), row.value, false, &messages)) {
      return Status::corruption(fmt::format("{}: outbox row {} of sink {} does not decode", store.where(), row.key, sink));
    }
    for (const OutboxRow& m : messages) ids.insert(m.id);
  }
  return ids;
}

// What `sink` delivered, as its target holds it, into `h` (deliveries, and the sink's output).
Status read_deliveries(const SinkSpec& sink, RealStore& store, const KafkaConfig& kafka, checkers::PipelineHistory& h,
                       bool* dedups) {
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
  } else if (sink.type == SinkType::kClickHouse) {
    auto held = read_clickhouse(sink, dedups);
    if (!held) return held.error();
    for (Message& m : *held) {
      h.deliveries.push_back({sink.name, "", 0, 0, record_of(m)});
      delivered.push_back(std::move(m));
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

// How far each Kafka source partition's committed epochs have read: the next offset, by
// (source, partition); a partition never read is absent.
Result<std::map<std::pair<std::string, int>, uint64_t>> kafka_read_up_to(const PipelineSpec& spec, RealStore& store) {
  std::map<std::pair<std::string, int>, uint64_t> out;
  auto tx = store.begin();
  if (!tx) return tx.error();
  for (const auto& source : spec.sources) {
    if (source.type != "kafka") continue;
    for (int p = 0; p < source.partitions; ++p) {
      auto row = store.get(*tx, tables::kSourceOffsets, fmt::format("{}/{}", source_origin(source), p));
      if (!row) {
        store.abort(*tx);
        return row.error();
      }
      if (*row) out[{source.name, p}] = Decoder(**row).u64();
    }
  }
  store.abort(*tx);
  return out;
}

// Every input the sources hold, named as the source jobs name them: the input log of the
// built-in producer (offsets counted per partition, in write order) and the Kafka input topics
// up to what the sources' committed epochs read (`unread` counts the records past that: a topic
// still being written is verified up to that point, and what comes after is not "lost").
Result<std::vector<Message>> source_messages(const PipelineSpec& spec, RealStore& store, const KafkaConfig& kafka,
                                             uint64_t* unread) {
  auto read_up_to = kafka_read_up_to(spec, store);
  if (!read_up_to) return read_up_to.error();
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
      const auto read = read_up_to->find({source.name, record.partition});
      if (read == read_up_to->end() || static_cast<uint64_t>(record.offset) >= read->second) {
        ++*unread;
        continue;
      }
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

// The history rows a real run recorded (tables::history), by job, each job's in epoch order.
struct RecordedEpoch {
  uint64_t layout = 0;
  uint64_t epoch = 0;
  EpochHistoryRow row;
};
struct JobEpochs {
  std::string computation;
  std::vector<RecordedEpoch> epochs;
  size_t next = 0;  // the first not yet re-executed
};
Result<std::map<std::string, JobEpochs>> recorded_epochs(const PipelineSpec& spec, RealStore& store) {
  std::map<std::string, JobEpochs> out;
  for (const auto& c : spec.computations) {
    auto rows = store.dump(tables::history(c.name));
    if (!rows) return rows.error();
    for (const Row& row : *rows) {  // keys "<partition>/<epoch>": in epoch order per partition
      auto recorded = decode_history_row(row.value);
      const size_t slash = row.key.find('/');
      if (!recorded || slash == 0 || slash > 16 || slash == std::string::npos || row.key.size() != slash + 17) {
        return Status::corruption(fmt::format("{}: history row {} of computation {} does not decode", store.where(),
                                              row.key, c.name));
      }
      const uint64_t partition = tables::parse_hex16(std::string(16 - slash, '0') + row.key.substr(0, slash));
      JobEpochs& job = out[fmt::format("computation/{}/{}", c.name, partition)];
      job.computation = c.name;
      job.epochs.push_back({recorded->layout_version, tables::parse_hex16(row.key.substr(slash + 1)), std::move(*recorded)});
    }
  }
  return out;
}

// The committed history as a real run recorded it, re-executed: the sources, then every
// committed computation epoch, in an order the run's causality allows (below).
Status reexecute_recorded(const PipelineSpec& spec, const ComputationRegistry& registry, RealStore& store,
                          const std::vector<Message>& sources, checkers::PipelineHistory& h) {
  std::map<MessageId, Message> known;  // every message committed so far, by id (its first version)
  // Ids committed in more than one version (by an at-least-once stage): every version.
  std::map<MessageId, std::vector<Message>> versions;
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
  auto recorded = recorded_epochs(spec, store);
  if (!recorded) return recorded.error();
  Reexecution reexecution(spec, registry);
  // A real run does not record the order epochs of different jobs committed in, but it is
  // causal: an epoch took only what was committed before it. So the epochs are re-executed
  // each job's in order, a job's next epoch once every message it took is known and no epoch
  // of an older layout of its computation is left (a key changes partition only with a new
  // layout, after the old one drained). That also orders a pipeline with a cycle.
  std::map<std::string, uint64_t> oldest_left;  // computation -> the oldest layout with epochs left
  const auto update_oldest = [&] {
    oldest_left.clear();
    for (const auto& [job, queue] : *recorded) {
      if (queue.next == queue.epochs.size()) continue;
      const uint64_t layout = queue.epochs[queue.next].layout;
      auto [it, fresh] = oldest_left.try_emplace(queue.computation, layout);
      if (!fresh) it->second = std::min(it->second, layout);
    }
  };
  // Into `out`, the versions of `id` committed so far whose tag is `tag`.
  const auto tagged = [&](MessageId id, uint16_t tag, std::vector<const Message*>& out) {
    out.clear();
    const auto it = known.find(id);
    if (it == known.end()) return;
    const auto several = versions.find(id);
    if (several == versions.end()) {
      if (version_tag(it->second) == tag) out.push_back(&it->second);
      return;
    }
    for (const Message& v : several->second) {
      if (version_tag(v) == tag) out.push_back(&v);
    }
  };
  // Whether the message an epoch took (its `i`-th) is known yet: by id, and with `exact`, in
  // the version it took (by its tag, where the row kept tags).
  std::vector<const Message*> matches;
  const auto taken_known = [&](const EpochHistoryRow& row, size_t i, bool exact) {
    const MessageId id = row.consumed[i].first;
    if (known.count(id) == 0) return false;
    if (!exact || i >= row.version_tags.size()) return true;
    tagged(id, row.version_tags[i], matches);
    return !matches.empty();
  };
  const auto ready = [&](const JobEpochs& queue, bool exact) {
    const RecordedEpoch& head = queue.epochs[queue.next];
    if (head.layout > oldest_left[queue.computation]) return false;
    for (size_t i = 0; i < head.row.consumed.size(); ++i) {
      if (!taken_known(head.row, i, exact)) return false;
    }
    return true;
  };
  // The newest event time any job of each computation took so far, for fired_before_due.
  std::map<std::string, Micros> newest_event;
  // The computations whose epochs' outputs are compared with their re-execution's: those
  // binding no external table. An external table may be written by several jobs, whose order
  // of commits a real run does not record; a computation's own state is its keys', each
  // written by one job at a time, in the order re-executed here.
  std::set<std::string> judged_by_digest;
  for (const auto& c : spec.computations) {
    std::vector<std::string> tables;
    try {
      tables = bound_tables(registry, c);
    } catch (...) {
      continue;  // its init() threw here: what it binds is not known, so it is not judged
    }
    const bool external = std::any_of(tables.begin(), tables.end(), [](const std::string& t) {
      return t.starts_with(InitContext::external_table(""));
    });
    if (!external) judged_by_digest.insert(c.name);
  }
  const auto run_head = [&](const std::string& job, JobEpochs& queue) {
    const RecordedEpoch& r = queue.epochs[queue.next++];
    CommittedEpoch epoch;
    epoch.job = job;
    epoch.computation = queue.computation;
    epoch.now = r.row.now;
    epoch.random_seed = r.row.random_seed;
    epoch.timers_fired = r.row.timers_fired;
    checkers::EpochRecord e;
    for (const auto& f : r.row.timers_fired) e.fired.push_back(record_of(f));
    e.job = job;
    e.computation = queue.computation;
    e.epoch = r.epoch;
    e.layout_version = r.layout;
    e.now = r.row.now;
    e.clock_bound = r.row.clock_at_commit;
    e.reexecuted = true;
    bool inputs_known = true;  // each message it took, in the version it took
    for (size_t i = 0; i < r.row.consumed.size(); ++i) {
      const auto& [id, system_ts] = r.row.consumed[i];
      const auto it = known.find(id);
      inputs_known = inputs_known && it != known.end();
      Message m;
      m.id = id;
      if (it != known.end()) m = it->second;
      // The version whose tag the row kept; the first committed when it kept none. A tag no
      // version has (the producer's re-execution gave another: it binds an external table), or
      // that two have, leaves the version in doubt, and the epoch's outputs uncompared.
      if (it != known.end() && i < r.row.version_tags.size()) {
        tagged(id, r.row.version_tags[i], matches);
        inputs_known = inputs_known && matches.size() == 1;
        if (matches.size() == 1) m = *matches.front();
      } else if (versions.count(id) != 0) {
        inputs_known = false;
      }
      m.system_ts = m.alignment_ts = system_ts;
      e.consumed.push_back(record_of(m));
      // A message committed by nobody is not handed to the function (the consumption check
      // names it); the epoch is re-executed without it.
      if (it != known.end()) epoch.consumed.push_back(std::move(m));
    }
    ReexecutedEpoch again = reexecution.next(epoch);
    // What the epoch committed on its streams, by its digest: a computation's outputs that a
    // later stage ignores or never passes on reach no sink, and are judged here.
    // Not where the inputs are in doubt (one taken that nobody committed, which the
    // consumption check names, or in a version not told apart), nor where the re-execution
    // found another problem, which is then the one to read.
    e.outputs_compared = r.row.outputs_digest && judged_by_digest.count(queue.computation) != 0 && inputs_known &&
                         again.problems.empty();
    e.reexecution_problems = std::move(again.problems);
    if (e.outputs_compared && outputs_digest(again.produced) != *r.row.outputs_digest) {
      e.reexecution_problems.push_back(fmt::format(
          "committed outputs other than the {} its re-execution gives (the run recorded their digest, not the "
          "messages): a function whose outputs depend on more than what its epoch took, its key's state, its "
          "timers, its system time and its random seed (a member or static variable, another key's row, the wall "
          "clock, an unseeded generator), or outputs changed after it gave them",
          again.produced.size() == 1 ? std::string("1 message") : fmt::format("{} messages", again.produced.size())));
    }
    for (Message& m : again.produced) {
      e.produced.push_back(record_of(m));
      // Versions differ in what the digest and the tags see.
      const auto same = [&](const Message& v) {
        return v.key == m.key && v.payload == m.payload && v.event_ts == m.event_ts && v.stream == m.stream;
      };
      const auto [it, fresh] = known.try_emplace(m.id, m);
      if (fresh || same(it->second)) continue;
      std::vector<Message>& all = versions[m.id];
      if (all.empty()) all.push_back(it->second);
      if (std::none_of(all.begin(), all.end(), same)) all.push_back(m);
    }
    auto [newest, fresh] = newest_event.try_emplace(queue.computation, INT64_MIN);
    for (const auto& m : e.consumed) newest->second = std::max(newest->second, m.event_ts);
    if (const ComputationSpec* c = spec.computation(queue.computation)) {
      if (std::string early = fired_before_due(*c, newest->second, r.row); !early.empty()) {
        e.reexecution_problems.push_back(std::move(early));
      }
    }
    h.epochs.push_back(std::move(e));
  };
  for (bool left = true; left;) {
    update_oldest();
    left = false;
    bool progress = false;
    for (auto& [job, queue] : *recorded) {
      while (queue.next < queue.epochs.size() && ready(queue, true)) {
        run_head(job, queue);
        progress = true;
      }
      left = left || queue.next < queue.epochs.size();
    }
    if (left && !progress) {
      // An epoch that waits for a version of a message no re-execution gives (its producer's
      // re-execution differs, binding an external table) goes with the version there is.
      for (auto& [job, queue] : *recorded) {
        if (queue.next < queue.epochs.size() && ready(queue, false)) {
          run_head(job, queue);
          progress = true;
          break;
        }
      }
    }
    if (left && !progress) {
      // Nothing can go on: some epoch took a message nobody committed. The oldest such head goes
      // anyway, so that the check can name what is missing.
      auto stuck = std::min_element(recorded->begin(), recorded->end(), [](const auto& a, const auto& b) {
        const bool a_left = a.second.next < a.second.epochs.size(), b_left = b.second.next < b.second.epochs.size();
        if (a_left != b_left) return a_left;
        return a_left && a.second.epochs[a.second.next].layout < b.second.epochs[b.second.next].layout;
      });
      run_head(stuck->first, stuck->second);
    }
  }
  h.reexecuted_tables = reexecution.tables();
  h.reexecuted_timers = reexecution.timers();
  for (const auto& entry : h.reexecuted_timers) {
    const ComputationSpec* c = spec.computation(entry.first);
    if (c == nullptr) continue;
    for (const std::string& table : tables::timers(*c)) {
      auto rows = store.dump(table);
      if (!rows) return rows.error();
      for (const Row& row : *rows) {
        h.pending_timers.push_back(table + ":" + row.key);
        h.pending_timer_values.emplace(h.pending_timers.back(), describe_timer_value(decode_timer_value(row.value)));
      }
    }
  }
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
    for (const auto& stream : c.input_streams) {
      h.stream_consumers[stream].push_back({"computation/" + c.name + "/", once && !spec.repeats_late(stream)});
    }
  }
  h.reexecuted = true;
  h.outputs_recorded = false;
  return Status::ok();
}

}  // namespace

std::string fired_before_due(const ComputationSpec& c, Micros newest_event, const EpochHistoryRow& row) {
  for (const auto& f : row.timers_fired) {
    const TimerStreamSpec* stream = c.timer_stream(f.timer.timer_stream);
    if (stream == nullptr) continue;  // not a timer of this computation: the re-execution says so
    if (stream->watermark == Watermark::kEventTime) {
      if (f.timer.trigger_ts <= newest_event) continue;
      return fmt::format("fired event-time timer {} before its trigger: the computation had taken no event as new (the "
                         "newest: {})",
                         readable_timer(f.row), newest_event == INT64_MIN ? std::string("none") : format_time(newest_event));
    }
    if (f.timer.trigger_ts <= row.clock_at_commit) continue;  // no reading kept: INT64_MAX
    return fmt::format("fired timer {} before its trigger: its process's clock read {} as the epoch committed",
                       readable_timer(f.row), format_time(row.clock_at_commit));
  }
  return "";
}

namespace {

Status lives_agree_on_bug(const std::string& where, const Lives& lives, const ComputationRegistry& registry,
                          const std::string& bug) {
  // Only the program's own switches change what its functions give; the engine's change what
  // the run committed, which is what --verify holds to account.
  const auto own = [&](const std::string& name) { return registry.bug(name) != nullptr ? name : std::string(); };
  std::map<std::string, std::vector<std::string>> by_switch;
  for (const auto& [name, keys] : lives.bugs) {
    auto& all = by_switch[own(name)];
    all.insert(all.end(), keys.begin(), keys.end());
  }
  const std::string mine = own(bug);
  if (by_switch.empty() || (by_switch.size() == 1 && by_switch.begin()->first == mine)) return Status::ok();
  std::string ran;
  for (const auto& [name, keys] : by_switch) {
    const std::string& key = keys.front();
    const size_t slash = key.find('/');
    ran += fmt::format("{}{} in {} {} ({}{})", ran.empty() ? "" : ", ", name.empty() ? "none of its own bug switches" : "--bug " + name,
                       keys.size(), keys.size() == 1 ? "life" : "lives", slash == std::string::npos ? key : key.substr(slash + 1),
                       keys.size() > 1 ? " and others" : "");
  }
  return Status::invalid_argument(fmt::format(
      "{}: its lives ran with {}, and --verify re-executes the whole history with the program's functions under "
      "one switch, its own ({}): run every life with the same --bug of the program's, on a fresh store",
      where, ran, mine.empty() ? "none" : "--bug " + mine));
}

}  // namespace

Status lives_agree_on_bug(RealStore& store, const ComputationRegistry& registry, const std::string& bug) {
  auto lives = read_lives(store);
  if (!lives) return lives.error();
  return lives_agree_on_bug(store.where(), *lives, registry, bug);
}

Result<int> verify_run(const PipelineSpec& spec, const ComputationRegistry& registry, RealStore& store,
                       const KafkaConfig& kafka, const VerifyOptions& options) {
  const WallClock clock;
  const Micros start = clock.now();
  const auto say = [&](const std::string& what) {
    if (options.progress == nullptr) return;
    fmt::print(options.progress, "onceflow real --verify: {} ({:.1f}s)\n", what, static_cast<double>(clock.now() - start) / 1e6);
    std::fflush(options.progress);
  };
  auto lives = read_lives(store);
  if (!lives) return lives.error();
  if (Status agree = lives_agree_on_bug(store.where(), *lives, registry, options.bug); !agree.is_ok()) return agree;
  say("reading the inputs back");
  uint64_t unread = 0;  // Kafka input records past what the sources' committed epochs read
  auto sources = source_messages(spec, store, kafka, &unread);
  if (!sources) return sources.error();
  say(fmt::format("{} inputs; reading what the sinks hold", sources->size()));
  checkers::PipelineHistory h;
  for (const auto& sink : spec.sinks) {
    if (sink.type == SinkType::kHttp) {  // not read back (below)
      h.sinks.push_back({sink.name, checkers::Guarantee::kAtLeastOnce, {}, {}, false});
      continue;
    }
    bool dedups = true;
    if (Status read = read_deliveries(sink, store, kafka, h, &dedups); !read.is_ok()) return read;
    h.sinks.push_back({sink.name, guarantee_of(spec, sink, dedups), {}, {}, writes_before_commit(sink),
                       spec.repeats_late(sink.input_stream)});
  }
  say(fmt::format("{} outputs held; re-executing the committed history", h.deliveries.size()));
  // The program's assertions as the re-execution of every committed epoch evaluates them (with
  // the life's bug switch, as lives_agree_on_bug holds every life to): a committed epoch in
  // which one failed fails `assertions`, whichever process ran it.
  UserCodeCounts assertions(registry.bug(options.bug) != nullptr ? options.bug : std::string(), true);
  {
    const user_code::HooksScope scope(&assertions);
    if (Status done = reexecute_recorded(spec, registry, store, *sources, h); !done.is_ok()) return done;
  }
  assertions.fill(h);
  say(fmt::format("{} epochs re-executed; checking", h.epochs.size()));
  for (const std::string prefix : {"state/", "external/"}) {
    auto names = store.table_names(prefix);
    if (!names) return names.error();
    for (const std::string& table : *names) {
      auto rows = store.dump(table);
      if (!rows) return rows.error();
      for (const Row& row : *rows) h.tables[table][row.key] = row.value;
    }
  }
  // An http sink's receiver is the user's server, which onceflow cannot read back: its
  // expected outputs are counted, its delivery is not checked (n/a, said so in its entry).
  json sinks = json::object();
  for (auto it = h.sinks.begin(); it != h.sinks.end();) {
    const SinkSpec* s = spec.sink(it->sink);
    if (s == nullptr || s->type != SinkType::kHttp) {
      ++it;
      continue;
    }
    std::set<uint64_t> expected;
    for (const auto& m : it->expected) expected.insert(m.id);
    sinks[it->sink] = {{"expected", expected.size()}, {"verdict", "n/a"},
                       {"why", "an http sink's receiver is not read back: count what it holds (one per Idempotency-Key)"},
                       {"guarantee", "at_least_once"}};
    it = h.sinks.erase(it);
  }
  // An at-most-once message the target lacks and the sink's outbox no longer holds was taken
  // for its one send. It may be gone for good, as at most once allows, when a process gave it
  // up (counted in its life's row) or died holding it: a kill between a message's
  // acknowledgement and its send loses that one message of the sink partition (the outbox
  // strategy), and a kill under the in-memory strategy whatever the queue held. Which process
  // died when, the run does not record (the simulator does, and names each loss), so the
  // messages are in doubt while the lives account for as many: given up (counted across the
  // sinks), plus for each life cut short and each sink partition one message (the outbox
  // strategy) or what its queue can hold, each message costing 64 bytes and its payload
  // (the in-memory strategy). Beyond that, every missing message is a loss.
  // What each sink's target holds: how many times, by MessageId.
  std::map<std::string, std::map<uint64_t, size_t>> held;
  for (const auto& d : h.deliveries) ++held[d.sink][d.message.id];
  for (const auto& e : h.sinks) {
    if (e.guarantee != checkers::Guarantee::kAtMostOnce) continue;
    const SinkSpec* s = spec.sink(e.sink);
    auto pending = outbox_ids(store, e.sink);
    if (!pending) return pending.error();
    std::vector<uint64_t> taken;
    for (const auto& m : e.expected) {
      if (held[e.sink].count(m.id) == 0 && pending->count(m.id) == 0) taken.push_back(m.id);
    }
    const bool in_memory = s != nullptr && s->at_most_once_strategy.enabled;
    auto partitions = partitions_ever(store, e.sink, s == nullptr ? 1 : s->partitions);
    if (!partitions) return partitions.error();
    const uint64_t per_cut = in_memory ? s->at_most_once_strategy.total_queue_bytes_limit / 64 + 1 : 1;
    if (taken.size() > lives->given_up + lives->cut * *partitions * per_cut) continue;  // losses, all of them
    h.in_doubt[e.sink].insert(taken.begin(), taken.end());
  }
  std::vector<checkers::Verdict> verdicts = {checkers::DeliveryCheck().check(h), checkers::StateCheck().check(h),
                                             checkers::ConsumptionCheck().check(h), checkers::ReexecutionCheck().check(h),
                                             checkers::TimersAtEndCheck().check(h), checkers::AssertionsCheck().check(h)};
  // The program's own checks also see the inputs (the consumption check above reads
  // source_inputs as what source epochs emitted, which a real run does not record).
  for (const Message& m : *sources) h.source_inputs.push_back(record_of(m));
  for (checkers::Verdict& v : checkers::run_user_checks(registry, h)) verdicts.push_back(std::move(v));
  // Counts by MessageId per sink: what the re-executed history gives it, what it holds.
  uint64_t outputs = 0, duplicates = 0, lost = 0, expected_total = 0;
  for (const auto& e : h.sinks) {
    const std::map<uint64_t, size_t>& by_id = held[e.sink];
    size_t sink_outputs = 0;
    for (const auto& [id, n] : by_id) sink_outputs += n;
    std::set<uint64_t> expected;
    for (const auto& m : e.expected) expected.insert(m.id);
    uint64_t sink_dup = 0, sink_lost = 0;
    for (const auto& [id, n] : by_id) sink_dup += expected.count(id) != 0 && n > 1 ? n - 1 : 0;
    const std::set<uint64_t>& doubt = h.in_doubt[e.sink];
    for (uint64_t id : expected) sink_lost += by_id.count(id) == 0 && doubt.count(id) == 0 ? 1 : 0;
    outputs += sink_outputs;
    duplicates += sink_dup;
    lost += sink_lost;
    expected_total += expected.size();
    sinks[e.sink] = {{"outputs", sink_outputs}, {"expected", expected.size()}, {"duplicates", sink_dup},
                     {"lost", sink_lost},
                     {"guarantee", e.guarantee == checkers::Guarantee::kAtLeastOnce  ? "at_least_once"
                                   : e.guarantee == checkers::Guarantee::kAtMostOnce ? "at_most_once"
                                                                                     : "exactly_once"}};
    if (e.guarantee == checkers::Guarantee::kAtMostOnce) {
      sinks[e.sink]["in_doubt"] = doubt.size();
      sinks[e.sink]["lives_cut"] = lives->cut;
      sinks[e.sink]["lives_gave_up"] = lives->given_up;
    }
  }
  json checks = json::array();
  for (const auto& v : verdicts) {
    checks.push_back({{"name", v.check}, {"verdict", v.verdict_name()}, {"detail", v.detail}});
  }
  const bool passed = checkers::all_passed(verdicts);
  json verdict{{"verdict", passed ? "pass" : "fail"}, {"inputs", sources->size()}, {"outputs", outputs},
                     {"expected", expected_total}, {"duplicates", duplicates}, {"lost", lost}, {"sinks", sinks},
                     {"oracle", "the committed history, re-executed"},
                     {"kafka_inputs_not_yet_read", unread}, {"checks", checks}};
  // As `run` and `explore` say it: the failure the others may follow from.
  if (const std::string first = checkers::read_first(verdicts); !first.empty()) {
    verdict["read_first"] = first;
    fmt::print(stderr, "onceflow real --verify: read first: {}\n", first);
  }
  if (options.stats != nullptr) verdict["stats"] = *options.stats;
  if (!options.bug.empty()) verdict["bug"] = options.bug;
  fmt::print("{}\n", verdict.dump(2));
  return passed ? 0 : 1;
}

}  // namespace onceflow::real
