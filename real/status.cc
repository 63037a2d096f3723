#include "real/status.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/controller.h"
#include "core/env/codec.h"
#include "core/job.h"
#include "core/layout.h"
#include "real/deployment.h"
#include "real/operator_requests.h"

namespace onceflow::real {

namespace {

using json = nlohmann::json;

std::string lease_alive(RealStore& store, LeaseId lease) {
  if (lease == 0) return "none";
  auto state = store.lease_state(lease);
  return state ? std::string(lease_state_name(*state)) : "unknown";
}

}  // namespace

OutboxCounts outbox_counts(const SinkProgress& progress) {
  const uint64_t written = progress.next_seqno - 1;
  return {written, written - std::min(written, progress.acked_seqno)};
}

Result<json> read_status(const PipelineSpec& spec, RealStore& store) {
  auto tx = store.begin();
  if (!tx) return tx.error();
  struct Abort {
    RealStore& store;
    const Transaction& tx;
    ~Abort() { store.abort(tx); }
  } abort{store, *tx};
  json out;
  out["pipeline"] = spec.name;
  out["store"] = store.where();
  auto state = store.get(*tx, tables::kController, "state");
  if (!state) return state.error();
  out["state"] = *state ? json(**state) : json("new (never started)");
  auto layout_row = store.get(*tx, tables::kController, kLayoutKey);
  auto pending_row = store.get(*tx, tables::kController, kLayoutPendingKey);
  if (!layout_row || !pending_row) return Status::unavailable("the store did not answer");
  std::optional<Layout> layout = *layout_row ? decode_layout(**layout_row) : std::nullopt;
  const PipelineSpec in_force = layout ? with_layout(spec, *layout) : spec;
  out["layout_version"] = layout ? layout->version : 0;
  out["layout_change_pending"] = pending_row->has_value();
  json partitions = json::object();
  for (const auto& c : in_force.computations) partitions[c.name] = c.partitions;
  for (const auto& s : in_force.sinks) partitions[s.name] = s.partitions;
  out["partitions"] = partitions;
  // The settings in force: the spec's, or what a live change (onceflow ctl set) made them.
  json settings{{"epoch_period", format_duration(in_force.epoch_period_us)}, {"epoch_batch_limit", in_force.epoch_batch_limit}};
  if (layout && layout->max_batch_messages != 0) settings["max_batch_messages"] = layout->max_batch_messages;
  out["settings"] = settings;
  auto leader = store.get(*tx, tables::kController, kLeaderKey);
  if (!leader) return leader.error();
  if (auto row = *leader ? decode_leader(**leader) : std::nullopt) {
    out["leader"] = {{"node", row->node}, {"lease", row->lease}, {"lease_state", lease_alive(store, row->lease)}};
  } else {
    out["leader"] = nullptr;
  }
  auto workers = store.scan(*tx, tables::kWorkers, "", "", 100'000);
  if (!workers) return workers.error();
  json worker_list = json::array();
  for (const Row& row : *workers) {
    auto w = decode_worker(row.value);
    if (!w) continue;
    worker_list.push_back({{"name", row.key}, {"lease", w->lease}, {"lease_state", lease_alive(store, w->lease)},
                           {"jobs_running", w->running.size()}});
  }
  out["workers"] = worker_list;
  // Every job's assignment and meta row, two reads in all (one round trip each on PostgreSQL).
  const std::vector<JobId> ids = all_jobs(in_force);
  std::vector<std::string> assignment_keys, meta_keys;
  for (const JobId& id : ids) {
    assignment_keys.push_back(kJobKeyPrefix + id.str());
    meta_keys.push_back(id.str());
  }
  auto assignments = store.get_many(*tx, tables::kController, assignment_keys);
  if (!assignments) return assignments.error();
  auto metas = store.get_many(*tx, tables::kJobMeta, meta_keys);
  if (!metas) return metas.error();
  json jobs = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const JobId& id = ids[i];
    json job{{"job", id.str()}, {"worker", nullptr}, {"lease", 0}, {"lease_state", "none"}};
    const auto& assigned = (*assignments)[i];
    if (auto a = assigned ? decode_assignment(*assigned) : std::nullopt) {
      job["worker"] = a->worker;
      job["lease"] = a->lease;
      job["lease_state"] = lease_alive(store, a->lease);
    }
    const auto& meta = (*metas)[i];
    job["last_epoch"] = meta ? job_progress(*meta).epoch : 0;
    if (meta && id.kind == JobKind::kSink) {
      if (auto p = sink_progress(*meta)) {
        const OutboxCounts outbox = outbox_counts(*p);
        job["outbox_written"] = outbox.written;
        job["outbox_acknowledged"] = p->acked_seqno;
        job["outbox_undelivered"] = outbox.undelivered;
      }
    }
    jobs.push_back(job);
  }
  out["jobs"] = jobs;
  json sources = json::array();
  for (const auto& source : in_force.sources) {
    for (int p = 0; p < source.partitions; ++p) {
      auto read = store.get(*tx, tables::kSourceOffsets, fmt::format("{}/{}", source_origin(source), p));
      if (!read) return read.error();
      uint64_t offset = 0;
      if (*read) offset = Decoder(**read).u64();
      json row{{"source", source.name}, {"partition", p}, {"read", offset}};
      if (source.type == "queue") {
        auto written = produced_to(store, *tx, source.name, p);
        if (!written) return written.error();
        row["written"] = *written;
        row["lag"] = source_lag(*written, offset);
      }
      sources.push_back(row);
    }
  }
  out["sources"] = sources;
  // An operator's requests (onceflow ctl): those not answered yet, and the last few answered.
  auto requests = recent_requests(store, *tx, 5);
  if (!requests) return requests.error();
  json request_list = json::array();
  for (const OperatorRequest& r : *requests) {
    request_list.push_back({{"id", r.id}, {"command", r.command}, {"state", request_state_name(r.state)},
                            {"by", r.by.empty() ? json(nullptr) : json(r.by)}, {"answer", r.answer},
                            {"asked_at", r.asked_at}});
  }
  out["requests"] = request_list;
  return out;
}

void add_kafka_lag(json& status, const PipelineSpec& spec, const KafkaConfig* kafka) {
  std::map<std::string, Result<std::vector<uint64_t>>> ends;  // by source
  for (json& row : status["sources"]) {
    const SourceSpec* source = spec.source(row["source"].get<std::string>());
    if (source == nullptr || source->type != "kafka") continue;
    if (kafka == nullptr) {
      row["lag_unknown"] = "the topic's end is the cluster's: give --kafka BROKERS";
      continue;
    }
    auto it = ends.find(source->name);
    if (it == ends.end()) it = ends.emplace(source->name, kafka_topic_ends(*kafka, kafka_topic(*source))).first;
    const auto partition = row["partition"].get<size_t>();
    if (!it->second) {
      row["lag_unknown"] = kafka->redact(it->second.error().message());
    } else if (partition >= it->second->size()) {
      row["lag_unknown"] = fmt::format("kafka topic {} has {} partitions", kafka_topic(*source), it->second->size());
    } else {
      const uint64_t end = (*it->second)[partition];
      const uint64_t read = row["read"].get<uint64_t>();
      row["written"] = end;
      row["lag"] = source_lag(end, read);
    }
  }
}

void add_rates(json& now, const json& before, double seconds) {
  // A counter that went back (a sink partition recreated for a resharded target numbers its
  // outbox from 1 again) counts from 0.
  const auto grew = [](uint64_t a, uint64_t b) { return b >= a ? b - a : b; };
  const json no_row = json::object();  // what a job or partition new at the second read was
  std::map<std::string, uint64_t> read, acknowledged, epochs;
  std::map<std::string, int64_t> lag;
  std::map<std::pair<std::string, int>, const json*> source_before;
  for (const auto& s : before["sources"]) source_before[{s["source"].get<std::string>(), s["partition"].get<int>()}] = &s;
  for (const auto& s : now["sources"]) {
    const std::string name = s["source"].get<std::string>();
    // A partition or job that was not there at the first read (a repartition or a respec
    // between the reads) counts its reads and epochs from 0.
    const auto it = source_before.find({name, s["partition"].get<int>()});
    const json& was = it == source_before.end() ? no_row : *it->second;
    read[name] += grew(was.value("read", uint64_t{0}), s["read"].get<uint64_t>());
    if (s.contains("lag") && was.contains("lag")) {  // a new partition's lag is no change
      lag[name] += static_cast<int64_t>(s["lag"].get<uint64_t>()) - static_cast<int64_t>(was["lag"].get<uint64_t>());
    }
  }
  std::map<std::string, const json*> job_before;
  for (const auto& j : before["jobs"]) job_before[j["job"].get<std::string>()] = &j;
  for (const auto& j : now["jobs"]) {
    const std::string job = j["job"].get<std::string>();
    const std::string of = job.substr(0, job.rfind('/'));  // "computation/Counter"
    const auto it = job_before.find(job);
    const json& was = it == job_before.end() ? no_row : *it->second;
    epochs[of] += grew(was.value("last_epoch", uint64_t{0}), j["last_epoch"].get<uint64_t>());
    if (j.contains("outbox_acknowledged")) {  // a sink job: 0 before its first epoch
      acknowledged[of.substr(of.find('/') + 1)] +=
          grew(was.value("outbox_acknowledged", uint64_t{0}), j["outbox_acknowledged"].get<uint64_t>());
    }
  }
  const auto per_second = [&](double n) { return std::round(n / seconds * 10) / 10; };
  json rates{{"over_s", seconds}};
  for (const auto& [name, n] : read) {
    rates["sources"][name]["read_per_s"] = per_second(static_cast<double>(n));
    if (lag.contains(name)) rates["sources"][name]["lag_change_per_s"] = per_second(static_cast<double>(lag[name]));
  }
  for (const auto& [name, n] : acknowledged) rates["sinks"][name]["acknowledged_per_s"] = per_second(static_cast<double>(n));
  for (const auto& [name, n] : epochs) rates["epochs_per_s"][name] = per_second(static_cast<double>(n));
  now["rates"] = rates;
}

std::string format_status(const json& s) {
  std::string out = fmt::format("pipeline {}: {}", s["pipeline"].get<std::string>(), s["state"].get<std::string>());
  if (s["layout_change_pending"].get<bool>()) out += " (a layout change under way)";
  out += fmt::format("\nstore: {}\nlayout version {}:", s["store"].get<std::string>(), s["layout_version"].get<uint64_t>());
  for (const auto& [name, count] : s["partitions"].items()) out += fmt::format(" {}={}", name, count.get<int>());
  out += "\nsettings:";
  for (const auto& [name, value] : s["settings"].items()) {
    out += fmt::format(" {}={}", name, value.is_string() ? value.get<std::string>() : value.dump());
  }
  if (s["leader"].is_null()) {
    out += "\ncontroller: none has led yet";
  } else {
    out += fmt::format("\ncontroller: {} leads under Lease {} ({})", s["leader"]["node"].get<std::string>(),
                       s["leader"]["lease"].get<uint64_t>(), s["leader"]["lease_state"].get<std::string>());
  }
  out += fmt::format("\nworkers: {}", s["workers"].size());
  for (const auto& w : s["workers"]) {
    out += fmt::format("\n  {:<24} Lease {:<20} {:<8} {} jobs", w["name"].get<std::string>(), w["lease"].get<uint64_t>(),
                       w["lease_state"].get<std::string>(), w["jobs_running"].get<size_t>());
  }
  out += fmt::format("\n{:<32} {:<24} {:<20} {:<8} {}", "job", "worker", "Lease", "state", "last epoch");
  for (const auto& j : s["jobs"]) {
    std::string line = fmt::format("{:<32} {:<24} {:<20} {:<8} {}", j["job"].get<std::string>(),
                                   j["worker"].is_null() ? "-" : j["worker"].get<std::string>(), j["lease"].get<uint64_t>(),
                                   j["lease_state"].get<std::string>(), j["last_epoch"].get<uint64_t>());
    if (j.contains("outbox_undelivered")) {
      line = fmt::format("{:<97} outbox {} written, {} acknowledged, {} undelivered", line, j["outbox_written"].get<uint64_t>(),
                         j["outbox_acknowledged"].get<uint64_t>(), j["outbox_undelivered"].get<uint64_t>());
    }
    out += "\n" + line;
  }
  for (const auto& src : s["sources"]) {
    out += fmt::format("\nsource {} partition {}: {} read", src["source"].get<std::string>(), src["partition"].get<int>(),
                       src["read"].get<uint64_t>());
    if (src.contains("lag")) {
      out += fmt::format(" of {} written, lag {}", src["written"].get<uint64_t>(), src["lag"].get<uint64_t>());
    } else if (src.contains("lag_unknown")) {
      out += fmt::format(" (lag unknown: {})", src["lag_unknown"].get<std::string>());
    }
  }
  if (s.contains("rates")) {
    const json& r = s["rates"];
    out += fmt::format("\nrates over {:.1f} s:", r["over_s"].get<double>());
    if (r.contains("sources")) {
      for (const auto& [name, v] : r["sources"].items()) {
        out += fmt::format(" source {} reads {}/s", name, v["read_per_s"].get<double>());
        if (v.contains("lag_change_per_s")) out += fmt::format(" (lag {:+}/s)", v["lag_change_per_s"].get<double>());
        out += ";";
      }
    }
    if (r.contains("sinks")) {
      for (const auto& [name, v] : r["sinks"].items()) {
        out += fmt::format(" sink {} acknowledged {}/s;", name, v["acknowledged_per_s"].get<double>());
      }
    }
    double epochs = 0;
    for (const auto& [name, v] : r["epochs_per_s"].items()) epochs += v.get<double>();
    out += fmt::format(" {:.1f} epochs/s", epochs);
  }
  for (const auto& r : s["requests"]) {
    out += fmt::format("\nrequest {} '{}': {}", r["id"].get<uint64_t>(), r["command"].get<std::string>(),
                       r["state"].get<std::string>());
    if (!r["by"].is_null()) out += " by " + r["by"].get<std::string>();
    if (!r["answer"].get<std::string>().empty()) out += ": " + r["answer"].get<std::string>();
  }
  return out + "\n";
}

}  // namespace onceflow::real
