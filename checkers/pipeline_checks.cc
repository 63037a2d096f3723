#include "checkers/pipeline_checks.h"
#include "core/env/clock.h"
#include "core/spec.h"
#include "core/timer_row.h"

#include <fmt/format.h>

#include <cctype>
#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace onceflow::checkers {

Guarantee guarantee_of(SinkDelivery promised) {
  switch (promised) {
    case SinkDelivery::kAtMostOnce: return Guarantee::kAtMostOnce;
    case SinkDelivery::kAtLeastOnce: return Guarantee::kAtLeastOnce;
    case SinkDelivery::kExactlyOnce: break;
  }
  return Guarantee::kExactlyOnce;
}
namespace {

using Item = std::pair<uint64_t, std::string>;  // (key, payload) as a sink exposes it
using ItemCounts = std::map<Item, size_t>;
using Table = std::map<std::string, std::string>;

constexpr size_t kShownBytesMax = 40;

std::string hex_id(uint64_t id) { return fmt::format("{:016x}", id); }

// At most kShownBytesMax bytes of `bytes` from byte `from` on, quoted, with "..." where
// bytes are left out; anything but printable ASCII (and the quote and backslash, to stay
// unambiguous) is shown as \xNN.
std::string shown(std::string_view bytes, size_t from = 0) {
  std::string out = from > 0 ? "...\"" : "\"";
  const std::string_view head = bytes.substr(std::min(from, bytes.size()), kShownBytesMax);
  for (const char c : head) {
    const auto byte = static_cast<unsigned char>(c);
    const bool plain = byte >= 0x20 && byte < 0x7f && c != '"' && c != '\\';
    if (plain) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  out += "\"";
  if (from + head.size() < bytes.size()) {
    out += fmt::format("...({} bytes)", bytes.size());
  } else if (from > 0) {
    out += fmt::format("({} bytes)", bytes.size());
  }
  return out;
}

// Where to show two byte strings that differ from, so that the difference is in what is shown:
// their start when it is within the first kShownBytesMax bytes, else a little before it.
// Equal strings (values that differ elsewhere, in key or stream) are shown from their start.
size_t shown_from(std::string_view a, std::string_view b) {
  constexpr size_t kContext = 12;
  if (a == b) return 0;
  const size_t n = std::min(a.size(), b.size());
  const auto d = static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first - a.begin());
  return d < kShownBytesMax ? 0 : d - kContext;
}

// A state row's key: the engine stores a computation's key as 16 hex digits (core/engine.h);
// reports write keys in decimal, as the computation gave them.
std::string row_key(const std::string& key) {
  const bool hex16 = key.size() == 16 && std::all_of(key.begin(), key.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  return hex16 ? std::to_string(std::stoull(key, nullptr, 16)) : shown(key);
}

std::string shown(const Item& item, size_t from = 0) {
  return fmt::format("(key {}, {})", item.first, shown(item.second, from));
}

Verdict failure(std::string_view check, const PipelineHistory& h, std::string detail) {
  if (!h.replay_command.empty()) detail += " — replay: " + h.replay_command;
  return Verdict::fail(std::string(check), std::move(detail));
}

std::string_view guarantee_name(Guarantee g) {
  switch (g) {
    case Guarantee::kExactlyOnce:
      return "exactly-once";
    case Guarantee::kAtLeastOnce:
      return "at-least-once";
    case Guarantee::kAtMostOnce:
      return "at-most-once";
  }
  return "unknown-guarantee";
}

// What a run that never drained had not done yet (`what`), for a pass detail: late, and
// judged by liveness, unless the scenario's own request left the pipeline at rest, which
// liveness does not judge (it reads no more input and is not asked to drain).
std::string not_done_yet(const PipelineHistory& h, const std::string& what) {
  if (!h.left_at_rest.empty()) {
    return fmt::format("; left {} by the scenario's request at {}: {} (not asked to drain)", h.left_at_rest,
                       format_time(h.left_at_rest_at), what);
  }
  return fmt::format("; never drained: {}, left to liveness", what);
}

// Calls `f` with each committed epoch of sink `sink`, in commit order.
template <typename F>
void for_each_sink_epoch(const PipelineHistory& h, std::string_view sink, F&& f) {
  for (const EpochRecord& e : h.epochs) {
    if (e.computation == sink && e.job.starts_with("sink/") && e.commit_time >= 0) f(e);
  }
}

// An at-most-once sink whose stream repeats late (SinkExpectation::repeats_late) sends a
// message at most once per take, not once.
bool per_take(const SinkExpectation& e) { return e.guarantee == Guarantee::kAtMostOnce && e.repeats_late; }
std::string guarantee_name(const SinkExpectation& e) {
  return per_take(e) ? "at-most-once per take" : std::string(guarantee_name(e.guarantee));
}

// ---- delivery ----

ItemCounts count_items(std::span<const Item> items) {
  ItemCounts counts;
  for (const Item& item : items) ++counts[item];
  return counts;
}

// An absent sink delivered nothing.
std::span<const Item> sink_output(const PipelineHistory& h, const std::string& sink) {
  auto it = h.sink_outputs.find(sink);
  if (it == h.sink_outputs.end()) return {};
  return it->second;
}

struct OutputDiff {
  std::string first_missing;  // empty: nothing missing
  std::string first_extra;    // empty: nothing extra
  size_t missing_total = 0;
};

OutputDiff diff_outputs(const ItemCounts& want, const ItemCounts& got) {
  OutputDiff diff;
  size_t wanted_total = 0;
  std::string first;
  for (const auto& [item, wanted] : want) {
    wanted_total += wanted;
    auto it = got.find(item);
    const size_t have = it == got.end() ? 0 : it->second;
    if (have >= wanted) continue;
    diff.missing_total += wanted - have;
    if (first.empty()) first = fmt::format("{} delivered {} of {} times", shown(item), have, wanted);
  }
  if (diff.missing_total > 0) {
    diff.first_missing = fmt::format("lost-write: {} of {} outputs missing; first: {}", diff.missing_total, wanted_total, first);
  }
  for (const auto& [item, have] : got) {
    auto it = want.find(item);
    const size_t wanted = it == want.end() ? 0 : it->second;
    if (have <= wanted) continue;
    diff.first_extra = fmt::format("{}: extra {} delivered {} times, reference {}", wanted == 0 ? "unexpected" : "duplicate",
                                   shown(item), have, wanted);
    break;
  }
  return diff;
}

std::string join_problems(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "; " + b;
}

// The MessageIds under which `sink` made (key, payload) visible, for the report.
std::string delivered_ids(const PipelineHistory& h, const std::string& sink, const std::string& extra) {
  std::string ids;
  for (const DeliveryRecord& d : h.deliveries) {
    if (d.sink != sink || extra.find(shown(Item{d.message.key, d.message.payload})) == std::string::npos) continue;
    ids += fmt::format("{}{:016x}", ids.empty() ? "" : " ", d.message.id);
  }
  return ids.empty() ? std::string() : fmt::format(" (message ids {})", ids);
}

// The messages `sink`'s committed epochs consumed, first consumption per MessageId.
std::map<uint64_t, const MessageRecord*> sink_consumed(const PipelineHistory& h, const std::string& sink) {
  std::map<uint64_t, const MessageRecord*> out;
  for (const EpochRecord& e : h.epochs) {
    if (e.computation != sink || !e.job.starts_with("sink/")) continue;
    for (const MessageRecord& m : e.consumed) out.try_emplace(m.id, &m);
  }
  return out;
}

// `sink`'s deliveries by MessageId, in the order the target made them visible.
std::map<uint64_t, std::vector<const DeliveryRecord*>> deliveries_by_id(const PipelineHistory& h,
                                                                        const std::string& sink) {
  std::map<uint64_t, std::vector<const DeliveryRecord*>> out;
  for (const DeliveryRecord& d : h.deliveries) {
    if (d.sink == sink) out[d.message.id].push_back(&d);
  }
  return out;
}

const std::set<uint64_t>& ids_of(const std::map<std::string, std::set<uint64_t>>& by_sink, const std::string& sink) {
  static const std::set<uint64_t> kNone;
  auto it = by_sink.find(sink);
  return it == by_sink.end() ? kNone : it->second;
}

// At most once, by identity: every message the sink consumed is at the target, a counted drop
// or in doubt (its send got no answer); no counted drop is at the target; and nothing the
// reference has is lost before the sink.
std::string at_most_once_problem(const SinkExpectation& e, const PipelineHistory& h, const OutputDiff& diff) {
  const auto& drops = ids_of(h.counted_drops, e.sink);
  const auto& doubt = ids_of(h.in_doubt, e.sink);
  const auto delivered = deliveries_by_id(h, e.sink);
  for (uint64_t id : drops) {
    if (delivered.count(id) != 0) {
      return fmt::format("message {} counted as dropped, but the target holds it", hex_id(id));
    }
  }
  const auto consumed = sink_consumed(h, e.sink);
  for (const auto& [id, m] : consumed) {
    if (delivered.count(id) != 0 || drops.count(id) != 0 || doubt.count(id) != 0) continue;
    return fmt::format("message {} {} lost without a count: not at the target, not dropped, not in doubt",
                       hex_id(id), shown(Item{m->key, m->payload}));
  }
  std::vector<Item> reached;
  for (const auto& [id, m] : consumed) reached.emplace_back(m->key, m->payload);
  const OutputDiff upstream = diff_outputs(count_items(e.reference), count_items(reached));
  if (!upstream.first_missing.empty()) return "before the sink: " + upstream.first_missing;
  return diff.first_extra;
}

// At least once: nothing lost, and every output beyond the reference is a copy: all
// deliveries of one MessageId carry the same message, and the distinct messages are the
// reference's (none made up).
std::string at_least_once_problem(const SinkExpectation& e, const PipelineHistory& h, const OutputDiff& diff) {
  if (!diff.first_missing.empty()) return diff.first_missing;
  const auto delivered = deliveries_by_id(h, e.sink);
  if (delivered.empty()) return "";  // a target that does not name its messages: counts only
  std::vector<Item> distinct;
  for (const auto& [id, copies] : delivered) {
    const MessageRecord& first = copies.front()->message;
    for (const DeliveryRecord* d : copies) {
      if (d->message.key == first.key && d->message.payload == first.payload) continue;
      const size_t from = shown_from(first.payload, d->message.payload);
      return fmt::format("message {} delivered as {} and again as {}: not a copy", hex_id(id),
                         shown(Item{first.key, first.payload}, from), shown(Item{d->message.key, d->message.payload}, from));
    }
    distinct.emplace_back(first.key, first.payload);
  }
  const OutputDiff made_up = diff_outputs(count_items(e.reference), count_items(distinct));
  if (!made_up.first_extra.empty()) return made_up.first_extra + " under distinct message ids: made up, not a copy";
  return "";
}

// What is wrong with one sink's output under its guarantee; empty when nothing is.
std::string sink_problem(const SinkExpectation& e, const PipelineHistory& h) {
  OutputDiff diff = diff_outputs(count_items(e.reference), count_items(sink_output(h, e.sink)));
  if (!diff.first_extra.empty()) diff.first_extra += delivered_ids(h, e.sink, diff.first_extra);
  switch (e.guarantee) {
    case Guarantee::kExactlyOnce: return join_problems(diff.first_missing, diff.first_extra);
    case Guarantee::kAtLeastOnce: return at_least_once_problem(e, h, diff);
    case Guarantee::kAtMostOnce: return at_most_once_problem(e, h, diff);
  }
  return "";
}

// A MessageId made visible twice by a sink that promises no duplicates; empty when none.
std::string visible_twice(const PipelineHistory& h) {
  std::map<std::string_view, const SinkExpectation*> sinks;
  for (const SinkExpectation& e : h.sinks) sinks[e.sink] = &e;
  std::map<std::pair<std::string_view, uint64_t>, const DeliveryRecord*> first;
  for (const DeliveryRecord& d : h.deliveries) {
    auto g = sinks.find(d.sink);
    // Copies a sink sends once per take are held to its takes (sink_problem_by_id).
    if (g == sinks.end() || g->second->guarantee == Guarantee::kAtLeastOnce || (h.reexecuted && per_take(*g->second))) continue;
    auto [it, fresh] = first.try_emplace({d.sink, d.message.id}, &d);
    if (fresh) continue;
    const DeliveryRecord& before = *it->second;
    return fmt::format("message {} made visible twice by sink {} ({}): by job '{}' at {} and job '{}' at {}",
                       hex_id(d.message.id), d.sink, guarantee_name(*g->second), before.producer_job,
                       format_time(before.time), d.producer_job, format_time(d.time));
  }
  return "";
}

// ---- state ----

std::string table_problem(const std::string& table, const Table& got, const Table& want) {
  auto g = got.begin();
  auto w = want.begin();
  while (g != got.end() || w != want.end()) {
    if (w == want.end() || (g != got.end() && g->first < w->first)) {
      return fmt::format("table {} key {}: extra, value {}", table, row_key(g->first), shown(g->second));
    }
    if (g == got.end() || w->first < g->first) {
      return fmt::format("table {} key {}: missing, reference {}", table, row_key(w->first), shown(w->second));
    }
    if (g->second != w->second) {
      const size_t from = shown_from(g->second, w->second);
      return fmt::format("table {} key {}: value {}, reference {}", table, row_key(g->first),
                         shown(g->second, from), shown(w->second, from));
    }
    ++g;
    ++w;
  }
  return "";
}

// An absent table has no rows.
const Table& table_or(const std::map<std::string, Table>& tables, const std::string& name,
                      const Table& empty) {
  auto it = tables.find(name);
  return it == tables.end() ? empty : it->second;
}

// ---- fencing ----

std::string commit_problem(const EpochRecord& e, const PipelineHistory& h) {
  auto it = h.leases.find(e.lease);
  if (it == h.leases.end()) {
    return fmt::format("job {} committed version {} at {} under unknown lease {}", e.job,
                       e.version, format_time(e.commit_time), e.lease);
  }
  const LeaseSpan& span = it->second;
  const bool before_start = e.commit_time < span.started_at;
  const bool after_end = span.ended_at >= 0 && e.commit_time > span.ended_at;
  if (!before_start && !after_end) return "";
  return fmt::format("job {} committed version {} at {} under lease {} that lived {}..{}", e.job, e.version,
                     format_time(e.commit_time), e.lease, format_time(span.started_at),
                     span.ended_at < 0 ? std::string("(still live)") : format_time(span.ended_at));
}

// When each sink committed each message (the earliest commit of an epoch of that sink that
// took it): sink -> id -> commit time.
std::map<std::string, std::map<uint64_t, int64_t>> sink_commits(const PipelineHistory& h) {
  std::map<std::string, std::map<uint64_t, int64_t>> out;
  for (const EpochRecord& e : h.epochs) {
    if (!e.job.starts_with("sink/") || e.commit_time < 0) continue;
    auto& committed = out[e.computation];
    for (const MessageRecord& m : e.consumed) {
      auto [it, fresh] = committed.try_emplace(m.id, e.commit_time);
      if (!fresh) it->second = std::min(it->second, e.commit_time);
    }
  }
  return out;
}

// An async sink's output is decided when its epoch commits (outbox or at-most-once queue)
// under a valid Lease; delivering it later, even by a job whose Lease has since ended, only
// repeats that decision, and the target drops repeats. What must never happen is a message
// becoming visible before (or without) that commit.
std::string delivery_problem(const DeliveryRecord& d, const PipelineHistory& h,
                             const std::map<std::string, std::map<uint64_t, int64_t>>& commits) {
  const auto sink = commits.find(d.sink);
  const auto committed = sink == commits.end() ? nullptr : &sink->second;
  const auto it = committed == nullptr ? decltype(sink->second.end()){} : committed->find(d.message.id);
  if (committed != nullptr && it != committed->end() && it->second <= d.time) return "";
  const auto span = h.leases.find(d.lease);
  const std::string lease = span == h.leases.end() ? "" : fmt::format(" (lease {})", d.lease);
  if (committed == nullptr || it == committed->end()) {
    return fmt::format("job '{}'{} made message {} visible in sink {} at {}, but no epoch of the sink ever "
                       "committed it", d.producer_job, lease, hex_id(d.message.id), d.sink, format_time(d.time));
  }
  return fmt::format("job '{}'{} made message {} visible in sink {} at {}, before the sink committed it at {}",
                     d.producer_job, lease, hex_id(d.message.id), d.sink, format_time(d.time), format_time(it->second));
}

// A record of a transactional target (Kafka) made visible by a transaction other than the
// one its writer meant, named as Jepsen's Kafka checker names such anomalies; or "".
std::string transaction_problem(const DeliveryRecord& d) {
  const std::string who = fmt::format("job '{}' (lease {})", d.producer_job, d.lease);
  const std::string what = fmt::format("message {} to sink {}", hex_id(d.message.id), d.sink);
  if (d.written_epoch != d.committed_epoch) {
    return fmt::format("fenced-write-committed: {} wrote {} as producer epoch {}, and the transaction of epoch {} "
                       "made it visible at {}",
                       who, what, d.written_epoch, d.committed_epoch, format_time(d.time));
  }
  if (d.txn_aborted_by_writer) {
    return fmt::format("aborted-read: {} aborted its transaction {}, but its message {} became visible in sink {} at "
                       "{}",
                       who, d.txn, hex_id(d.message.id), d.sink, format_time(d.time));
  }
  if (d.txn != d.committed_txn) {
    return fmt::format("torn-transaction: {} wrote {} in its transaction {}, and the EndTxn of its transaction {} made "
                       "it visible at {}",
                       who, what, d.txn, d.committed_txn, format_time(d.time));
  }
  return "";
}

// ---- ordering ----

bool is_consumer_job(std::string_view job) {
  return job.starts_with("computation/") || job.starts_with("sink/");
}

// Each message's producer: the source or computation that first emitted it ("kind/name",
// every partition alike: consumers take inputs in alignment order across all of a producer's
// partitions, so a lineage goes on across a repartition of either side).
std::unordered_map<uint64_t, std::string_view> producers_by_id(const PipelineHistory& h) {
  std::unordered_map<uint64_t, std::string_view> producers;
  for (const EpochRecord& e : h.epochs) {
    const std::string_view job = e.job;
    const std::string_view producer = job.substr(0, job.rfind('/'));
    for (const MessageRecord& m : e.produced) producers.try_emplace(m.id, producer);
  }
  return producers;
}

// (consumer computation, key, stream, producer)
using LineageKey = std::tuple<std::string_view, uint64_t, std::string_view, std::string_view>;
struct LineageHash {
  size_t operator()(const LineageKey& k) const {
    const std::hash<std::string_view> text;
    size_t h = text(std::get<0>(k));
    for (const size_t part : {std::hash<uint64_t>{}(std::get<1>(k)), text(std::get<2>(k)), text(std::get<3>(k))}) {
      h ^= part + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    }
    return h;
  }
};

// Looked up only, never walked: hash containers keep the verdicts and reports deterministic.
struct OrderingState {
  std::unordered_map<uint64_t, std::string_view> producers;
  std::unordered_map<std::string_view, std::unordered_set<uint64_t>> consumed;  // ids each computation took
  std::unordered_map<LineageKey, const MessageRecord*, LineageHash> last;
  size_t compared = 0;  // consumptions held against an earlier one of their lineage
};

// Records the first consumption of `m` by `e`'s computation; a problem if it went backwards.
std::string consume(OrderingState& s, const EpochRecord& e, const MessageRecord& m) {
  if (!s.consumed[e.computation].insert(m.id).second) return "";
  auto producer = s.producers.find(m.id);
  if (producer == s.producers.end()) return "";
  const LineageKey lineage{e.computation, m.key, m.stream, producer->second};
  auto [it, fresh] = s.last.try_emplace(lineage, &m);
  if (fresh) return "";
  ++s.compared;
  const MessageRecord& before = *it->second;
  it->second = &m;
  if (m.alignment_ts >= before.alignment_ts) return "";
  return fmt::format(
      "computation {} (job {}) key {} stream {} from producer {}: message {} (alignment {}) "
      "processed after message {} (alignment {})",
      e.computation, e.job, m.key, m.stream, producer->second, hex_id(m.id),
      format_time(m.alignment_ts), hex_id(before.id), format_time(before.alignment_ts));
}


// ---- the committed history as the oracle ----

constexpr size_t kNamedMax = 3;  // messages a report names before it only counts

// Who committed each message: the first committed epoch that produced it.
std::map<uint64_t, const EpochRecord*> producing_epochs(const PipelineHistory& h) {
  std::map<uint64_t, const EpochRecord*> out;
  for (const EpochRecord& e : h.epochs) {
    for (const MessageRecord& m : e.produced) out.try_emplace(m.id, &e);
  }
  return out;
}

// Which committed epoch `e` is, for reports: its store version, or, where the history has
// none (onceflow real --verify reads the epochs' rows, not their commits), its job's epoch.
std::string committed_as(const EpochRecord& e) {
  return e.version > 0 ? fmt::format("committed version {}", e.version) : fmt::format("committed epoch {}", e.epoch);
}

std::string shown(const MessageRecord& m, size_t from = 0) {
  return fmt::format("{} (key {}, {})", hex_id(m.id), m.key, shown(m.payload, from));
}

// The first inputs of an epoch by MessageId, and how many timers it fired, for reports.
std::string first_inputs(const EpochRecord& e) {
  if (e.consumed.empty() && e.fired.empty()) return "no input";
  std::string out;
  for (size_t i = 0; i < e.consumed.size() && i < kNamedMax; ++i) {
    fmt::format_to(std::back_inserter(out), "{}{:016x}", i == 0 ? "" : " ", e.consumed[i].id);
  }
  if (e.consumed.size() > kNamedMax) out += fmt::format(" +{}", e.consumed.size() - kNamedMax);
  if (!e.fired.empty()) out += fmt::format("{}{} timers", out.empty() ? "" : ", ", e.fired.size());
  return out;
}

// Which committed epoch made a message, for a report: the computation or source, its job and
// commit, and a computation's first inputs.
std::string origin_of_epoch(const EpochRecord& e) {
  if (e.job.starts_with("source/")) {
    // onceflow real --verify's sources are one record each, of no epoch: their input.
    if (e.version == 0 && e.epoch == 0) return fmt::format("source {}", e.computation);
    return fmt::format("source {} (job {}, {})", e.computation, e.job, committed_as(e));
  }
  return fmt::format("computation {} (job {}, {}, inputs {})", e.computation, e.job, committed_as(e),
                     first_inputs(e));
}

// Where a message came from, for a report: the first committed epoch that produced it.
std::string origin_of(uint64_t id, const std::map<uint64_t, const EpochRecord*>& producers) {
  const auto it = producers.find(id);
  // Not among what the committed epochs produced as the history records it (a real run's
  // record is its re-execution's): only a re-execution, or nothing, gives this id.
  if (it == producers.end()) return "a re-execution alone (no committed epoch has it as recorded)";
  return origin_of_epoch(*it->second);
}

bool same_content(const MessageRecord& a, const MessageRecord& b) { return a.key == b.key && a.payload == b.payload; }


// One sink held to the re-executed history by MessageId: exactly once, at least once (extras
// only copies) or at most once (a missing one dropped or in doubt). A run that never drained
// stopped short: a message still in the sink's stream at the end, which the sink had not
// committed, or still in its outbox, which it had, is late, not lost (liveness fails the run);
// `late` counts them. One gone from the stream untaken, behind a message of its key the sink
// took, or gone from the outbox undelivered, is lost as in any run.
std::string sink_problem_by_id(const SinkExpectation& e, const PipelineHistory& h,
                               const std::map<uint64_t, const EpochRecord*>& producers, size_t& late) {
  std::map<uint64_t, std::vector<const MessageRecord*>> expected;
  for (const MessageRecord& m : e.expected) expected[m.id].push_back(&m);
  const auto delivered = deliveries_by_id(h, e.sink);
  // Per take: how many of the sink's committed epochs took each message.
  // A real run's history has no sink epochs (onceflow real --verify records computations'
  // epochs only): how often the sink took a message is not known, and its copies are not judged.
  const bool takes_known = h.outputs_recorded;
  std::map<uint64_t, size_t> takes;
  if (per_take(e) && takes_known) {
    for_each_sink_epoch(h, e.sink, [&](const EpochRecord& epoch) {
      for (const MessageRecord& m : epoch.consumed) ++takes[m.id];
    });
  }
  const auto taken = [&](uint64_t id) {
    if (!takes_known) return SIZE_MAX;
    const auto it = takes.find(id);
    return it == takes.end() ? size_t{0} : it->second;
  };
  // A delivery under an id the re-execution never gave this sink.
  for (const auto& [id, copies] : delivered) {
    const auto want = expected.find(id);
    const MessageRecord& got = copies.front()->message;
    if (want == expected.end()) {
      const std::string origin =
          producers.count(id) != 0 ? fmt::format("committed by {}", origin_of(id, producers))
          : h.outputs_recorded     ? std::string("nor did any committed epoch as recorded")
                                   : std::string("a real run records its epochs' outputs by digest only, not by id: a function "
                                                 "that gave this id when it ran and others when re-executed, as one reading "
                                                 "the machine's clock or randomness or keeping a member variable does, or a "
                                                 "message no epoch made");
      return fmt::format("unexpected: message {} delivered by {}, but no committed epoch's re-execution produced it "
                         "for this sink ({})",
                         shown(got), copies.front()->producer_job.empty() ? "the sink" : "job " + copies.front()->producer_job,
                         origin);
    }
    for (const DeliveryRecord* d : copies) {
      const bool known = std::any_of(want->second.begin(), want->second.end(),
                                     [&](const MessageRecord* m) { return same_content(*m, d->message); });
      if (known) continue;
      const MessageRecord& w = *want->second.front();
      const size_t from = shown_from(d->message.payload, w.payload);
      return fmt::format("unexpected: message {} delivered as {}, but its re-execution{} gives {}", hex_id(id),
                         shown(Item{d->message.key, d->message.payload}, from),
                         producers.count(id) != 0 ? fmt::format(" ({})", origin_of(id, producers)) : std::string(),
                         shown(Item{w.key, w.payload}, from));
    }
    if (copies.size() > 1 && e.guarantee != Guarantee::kAtLeastOnce && !(per_take(e) && copies.size() <= taken(id))) {
      // Who made each copy visible, and when where the history knows (onceflow real's targets
      // keep no times).
      const auto by = [](const DeliveryRecord& d) {
        std::string who = d.producer_job.empty() ? "the sink" : "job '" + d.producer_job + "'";
        return d.time > 0 ? who + " at " + format_time(d.time) : who;
      };
      // A copy the transport made (a `duplicate` fault) still breaks the promise at the
      // target, but it is not the engine's: say so, as a sink without producer ids cannot
      // tell it from a send.
      const size_t transport = static_cast<size_t>(
          std::count_if(copies.begin(), copies.end(), [](const DeliveryRecord* d) { return d->network_copy; }));
      const std::string cause =
          transport == 0 ? std::string()
                         : fmt::format("; {} of the {} copies came from the network duplicating the request (a "
                                       "`duplicate` fault), not from a send of the sink's: a target that sees no "
                                       "producer id cannot tell them, so a transport that duplicates breaks {} "
                                       "(leave `duplicate` out of the kinds, as TCP does not duplicate)",
                                       transport, copies.size(), guarantee_name(e));
      return fmt::format("duplicate: message {} made visible {} times{} ({}): by {} and by {}{}", shown(got),
                         copies.size(),
                         per_take(e) ? fmt::format(", taken by the sink's committed epochs {} times", taken(id)) : "",
                         origin_of(id, producers), by(*copies[0]), by(*copies[1]), cause);
    }
  }
  const auto& drops = ids_of(h.counted_drops, e.sink);
  const auto& doubt = ids_of(h.in_doubt, e.sink);
  if (e.guarantee == Guarantee::kAtMostOnce) {
    for (uint64_t id : drops) {
      const auto held = delivered.find(id);
      if (held == delivered.end()) continue;
      // Per take: one take dropped, another delivered.
      if (per_take(e) && held->second.size() < taken(id)) continue;
      return fmt::format("message {} counted as dropped, but the target holds it{}", hex_id(id),
                         per_take(e) ? fmt::format(" as often as the sink's committed epochs took it ({})", taken(id)) : "");
    }
  }
  const auto commits = sink_commits(h);
  const auto sink = commits.find(e.sink);
  const auto sink_committed = [&](uint64_t id) { return sink != commits.end() && sink->second.count(id) != 0; };
  // A sink takes a key's messages in alignment order (as `ordering` holds it to): one behind a
  // message of its key the sink took was skipped, not late. By key, the newest alignment time
  // the sink's committed epochs took.
  std::map<uint64_t, int64_t> newest_taken;
  if (h.never_drained() && h.produced_times_recorded) {
    for_each_sink_epoch(h, e.sink, [&](const EpochRecord& epoch) {
      for (const MessageRecord& m : epoch.consumed) {
        auto [it, fresh] = newest_taken.try_emplace(m.key, m.alignment_ts);
        it->second = std::max(it->second, m.alignment_ts);
      }
    });
  }
  const auto passed_over = [&](uint64_t id, uint64_t key) {
    const auto taken = newest_taken.find(key);
    const auto producer = producers.find(id);
    if (taken == newest_taken.end() || producer == producers.end()) return false;
    for (const MessageRecord& m : producer->second->produced) {
      if (m.id == id) return m.alignment_ts < taken->second;
    }
    return false;
  };
  const auto held = [](const std::vector<uint64_t>& ids, uint64_t id) {
    return std::binary_search(ids.begin(), ids.end(), id);
  };
  // Still on its way in a run that never drained: untaken in the stream, or in the outbox.
  const auto under_way = [&](uint64_t id, uint64_t key) {
    if (!h.never_drained()) return false;
    if (sink_committed(id)) return held(h.in_outboxes_at_end, id);
    return held(h.in_streams_at_end, id) && !passed_over(id, key);
  };
  std::vector<const MessageRecord*> missing;
  for (const auto& [id, variants] : expected) {
    if (delivered.count(id) != 0) continue;
    if (e.guarantee == Guarantee::kAtMostOnce && (drops.count(id) != 0 || doubt.count(id) != 0)) continue;
    if (under_way(id, variants.front()->key)) {
      ++late;
      continue;
    }
    missing.push_back(variants.front());
  }
  if (missing.empty()) return "";
  // Named in the order they were decided: when the sink committed each (its delivery was then
  // due), else when the epoch that produced it committed; the first one named is the first lost.
  const auto decided_at = [&](const MessageRecord* m) -> int64_t {
    if (sink != commits.end()) {
      if (auto it = sink->second.find(m->id); it != sink->second.end()) return it->second;
    }
    const auto producer = producers.find(m->id);
    return producer == producers.end() ? 0 : producer->second->commit_time;
  };
  std::sort(missing.begin(), missing.end(), [&](const MessageRecord* a, const MessageRecord* b) {
    return std::make_pair(decided_at(a), a->id) < std::make_pair(decided_at(b), b->id);
  });
  std::string named;
  for (size_t i = 0; i < missing.size() && i < kNamedMax; ++i) {
    named += fmt::format("{}{} from {}", i == 0 ? "" : "; ", shown(*missing[i]), origin_of(missing[i]->id, producers));
  }
  return fmt::format("lost-write: {} of {} messages missing{}: {}{}", missing.size(), expected.size(),
                     e.guarantee == Guarantee::kAtMostOnce ? " (not delivered, not dropped, not in doubt)" : "", named,
                     missing.size() > kNamedMax ? fmt::format("; and {} more", missing.size() - kNamedMax) : "");
}

// The messages each consumer's committed epochs took, by consumer prefix and id (looked up
// only, never walked).
using Takes = std::unordered_map<std::string_view, std::unordered_map<uint64_t, size_t>>;
// The versions of each message the committed epochs produced, in commit order (looked up only).
using Produced = std::unordered_map<uint64_t, std::vector<const MessageRecord*>>;

// Whether `a` and `b` carry the same message as consumers take it: key, stream, payload and
// event time (a delivery compares less: same_content).
bool same_message(const MessageRecord& a, const MessageRecord& b) {
  return a.key == b.key && a.stream == b.stream && a.payload == b.payload && a.event_ts == b.event_ts;
}

// With `times`, the alignment timestamp too: the order consumers keep (and `ordering` judges)
// is by the times their producers gave, not by whatever a consumer read back.
std::string consumed_problem(const EpochRecord& e, const MessageRecord& m, const Produced& produced, bool times) {
  const auto it = produced.find(m.id);
  if (it == produced.end()) {
    return fmt::format("job {} ({}) consumed message {}, which no committed epoch produced and no "
                       "source holds",
                       e.job, committed_as(e), shown(m));
  }
  for (const MessageRecord* p : it->second) {
    if (same_message(*p, m) && (!times || p->alignment_ts == m.alignment_ts)) return "";
  }
  const MessageRecord& p = *it->second.front();
  if (times && same_message(p, m)) {
    return fmt::format("job {} ({}) consumed message {} on stream {} with alignment time {}, but it was committed with "
                       "alignment time {}",
                       e.job, committed_as(e), shown(m), m.stream, format_time(m.alignment_ts), format_time(p.alignment_ts));
  }
  const size_t from = shown_from(m.payload, p.payload);
  return fmt::format("job {} ({}) consumed message {} on stream {} with event time {}, but it was "
                     "committed as {} on stream {} with event time {}",
                     e.job, committed_as(e), shown(m, from), m.stream, format_time(m.event_ts), shown(p, from), p.stream,
                     format_time(p.event_ts));
}

}  // namespace

Verdict DeliveryCheck::check(const PipelineHistory& h) const {
  if (h.sinks.empty()) return Verdict::not_applicable(std::string(name()), "no sinks");
  std::string summary;
  const auto producers = h.reexecuted ? producing_epochs(h) : std::map<uint64_t, const EpochRecord*>{};
  size_t late = 0;
  for (const SinkExpectation& e : h.sinks) {
    const std::string problem = h.reexecuted ? sink_problem_by_id(e, h, producers, late) : sink_problem(e, h);
    if (!problem.empty()) {
      return failure(name(), h, fmt::format("sink {} ({}): {}", e.sink, guarantee_name(e), problem));
    }
    summary += fmt::format("{}{} {} {} messages", summary.empty() ? "" : ", ", e.sink,
                           guarantee_name(e), sink_output(h, e.sink).size());
  }
  const std::string twice = visible_twice(h);
  if (!twice.empty()) return failure(name(), h, twice);
  return Verdict::pass(std::string(name()),
                       fmt::format("{} sinks: {}{}", h.sinks.size(), summary,
                                   late == 0 ? ""
                                             : not_done_yet(h, fmt::format("{} messages not delivered yet (in a "
                                                                           "stream or an outbox)", late))));
}

namespace {

// When the epoch took no message or timer of `key` and another job of its computation did: a
// note that the function read another key's row, which that job may be writing at the same
// time (the user's mistake, more often than the engine's); else "".
std::string another_jobs_key(const PipelineHistory& h, const EpochRecord& e, uint64_t key) {
  const auto has_key = [key](const EpochRecord& r) {
    return std::any_of(r.consumed.begin(), r.consumed.end(), [&](const MessageRecord& m) { return m.key == key; }) ||
           std::any_of(r.fired.begin(), r.fired.end(), [&](const FiredTimerRecord& t) { return t.key == key; });
  };
  if (has_key(e)) return "";
  for (const EpochRecord& other : h.epochs) {
    if (other.computation != e.computation || other.job == e.job || !has_key(other)) continue;
    return fmt::format(" (key {} is the key of no message or timer this epoch took, and job {} took some: {}, which "
                       "that job may write at the same time)",
                       key, other.job, kReadAnotherKeysRow);
  }
  return "";
}

// The state each committed epoch started from is what the re-execution of the committed epochs
// before it gives, and the tables at the end are what the whole re-execution gives.
Verdict state_by_reexecution(std::string_view check, const PipelineHistory& h) {
  size_t reads = 0;
  for (const EpochRecord& e : h.epochs) {
    if (!e.reexecuted) continue;
    for (size_t i = 0; i < e.state_reads.size() && i < e.expected_state.size(); ++i) {
      ++reads;
      const StateReadRecord& got = e.state_reads[i];
      const StateReadRecord& want = e.expected_state[i];
      if (got == want) continue;
      const size_t from = got.present && want.present ? shown_from(got.value, want.value) : 0;
      return failure(check, h,
                     fmt::format("computation {} (job {}, {}) started from table {} key {} = {}, "
                                 "but re-executing the committed epochs before it gives {}{}",
                                 e.computation, e.job, committed_as(e), got.table, got.key,
                                 got.present ? shown(got.value, from) : "(absent)", want.present ? shown(want.value, from) : "(absent)",
                                 another_jobs_key(h, e, got.key)));
    }
  }
  std::set<std::string> names;
  for (const auto& [table, rows] : h.tables) names.insert(table);
  for (const auto& [table, rows] : h.reexecuted_tables) names.insert(table);
  if (names.empty() && reads == 0) return Verdict::not_applicable(std::string(check), "no state or external tables");
  const Table empty;
  size_t keys = 0;
  for (const std::string& table : names) {
    const Table& want = table_or(h.reexecuted_tables, table, empty);
    std::string problem = table_problem(table, table_or(h.tables, table, empty), want);
    if (!problem.empty()) {
      return failure(check, h, problem + " (reference: the committed epochs re-executed)");
    }
    keys += want.size();
  }
  return Verdict::pass(std::string(check),
                       fmt::format("{} tables, {} keys equal the re-executed history; {} state reads as it gives them",
                                   names.size(), keys, reads));
}

}  // namespace

Verdict StateCheck::check(const PipelineHistory& h) const {
  if (h.reexecuted) return state_by_reexecution(name(), h);
  std::set<std::string> names;
  for (const auto& [table, rows] : h.tables) names.insert(table);
  for (const auto& [table, rows] : h.reference_tables) names.insert(table);
  for (const std::string& table : h.uncompared_tables) names.erase(table);
  if (names.empty()) {
    return Verdict::not_applicable(std::string(name()), h.uncompared_tables.empty()
                                                            ? "no state or external tables"
                                                            : "only tables of at-least-once-consistent computations");
  }
  const Table empty;
  size_t keys = 0;
  for (const std::string& table : names) {
    const Table& want = table_or(h.reference_tables, table, empty);
    const std::string problem = table_problem(table, table_or(h.tables, table, empty), want);
    if (!problem.empty()) return failure(name(), h, problem);
    keys += want.size();
  }
  std::string skipped;
  if (!h.uncompared_tables.empty()) skipped = fmt::format(" ({} of at-least-once-consistent computations not compared)", h.uncompared_tables.size());
  return Verdict::pass(std::string(name()),
                       fmt::format("{} tables, {} keys equal the reference{}", names.size(), keys, skipped));
}

Verdict FencingCheck::check(const PipelineHistory& h) const {
  size_t fenced = 0;
  for (const EpochRecord& e : h.epochs) {
    if (e.lease == 0 || e.commit_time < 0) continue;
    ++fenced;
    const std::string problem = commit_problem(e, h);
    if (!problem.empty()) return failure(name(), h, problem);
  }
  // One owner at a time: once a job's replacement (a newer Lease) has committed, nothing
  // may commit under an older Lease of that job.
  std::map<std::string, const EpochRecord*> newest;
  for (const EpochRecord& e : h.epochs) {
    if (e.lease == 0) continue;
    auto [it, fresh] = newest.try_emplace(e.job, &e);
    if (fresh || e.lease >= it->second->lease) {
      it->second = &e;
      continue;
    }
    return failure(name(), h,
                   fmt::format("job {} committed version {} under lease {} after its replacement committed "
                               "version {} under lease {}",
                               e.job, e.version, e.lease, it->second->version, it->second->lease));
  }
  const auto commits = sink_commits(h);
  std::set<std::string_view> synchronous;
  for (const SinkExpectation& e : h.sinks) {
    if (e.writes_before_commit) synchronous.insert(e.sink);
  }
  for (const DeliveryRecord& d : h.deliveries) {
    if (const std::string anomaly = transaction_problem(d); !anomaly.empty()) return failure(name(), h, anomaly);
    if (synchronous.count(d.sink) > 0) continue;  // visible before its commit by design
    ++fenced;
    const std::string problem = delivery_problem(d, h, commits);
    if (!problem.empty()) return failure(name(), h, problem);
  }
  if (fenced == 0) return Verdict::not_applicable(std::string(name()), "no commits under a Lease, no deliveries");
  return Verdict::pass(std::string(name()),
                       fmt::format("{} commits inside their Lease, deliveries after their commit", fenced));
}

namespace {

// A controller commit outside its own Lease, or "".
std::string zombie_commit(const ControllerCommit& c, const PipelineHistory& h) {
  const auto span = h.leases.find(c.lease);
  if (span == h.leases.end()) return fmt::format("controller {} committed version {} under lease {}, which the store never started", c.node, c.version, c.lease);
  const bool inside = c.commit_time >= span->second.started_at &&
                      (span->second.ended_at < 0 || c.commit_time <= span->second.ended_at);
  if (inside) return "";
  return fmt::format("controller {} committed version {} at {} under lease {}, which had ended at {} (a zombie "
                     "controller's decision reached the store)",
                     c.node, c.version, format_time(c.commit_time), c.lease, format_time(span->second.ended_at));
}

}  // namespace

Verdict ControllerCheck::check(const PipelineHistory& h) const {
  if (h.controller_commits.empty()) return Verdict::not_applicable(std::string(name()), "no controller commits");
  std::map<std::string, uint64_t> last_stored;  // job -> the Lease stored for it last
  std::map<uint64_t, std::set<std::string>> stored;  // every job Lease stored -> the jobs it was stored for
  for (const ControllerCommit& c : h.controller_commits) {
    if (const std::string problem = zombie_commit(c, h); !problem.empty()) return failure(name(), h, problem);
    if (!c.stores_assignments) continue;
    for (const auto& [job, lease] : c.job_leases) {
      stored[lease].insert(job);
      auto [it, fresh] = last_stored.try_emplace(job, lease);
      if (fresh || it->second == lease) continue;
      const auto old = h.leases.find(it->second);
      const bool ended = old != h.leases.end() && old->second.ended_at >= 0 && old->second.ended_at <= c.commit_time;
      if (!ended) {
        return failure(name(), h,
                       fmt::format("job {} got lease {} at {} while its earlier lease {} was still live (two live "
                                   "leases of one job)",
                                   job, lease, format_time(c.commit_time), it->second));
      }
      it->second = lease;
    }
  }
  size_t epochs = 0;
  for (const EpochRecord& e : h.epochs) {
    if (e.lease == 0) continue;
    ++epochs;
    const auto owner = stored.find(e.lease);
    if (owner == stored.end()) {
      return failure(name(), h,
                     fmt::format("job {} committed version {} under lease {}, which no controller ever stored (a worker "
                                 "ran an assignment before it was stored)",
                                 e.job, e.version, e.lease));
    }
    if (owner->second.count(e.job) != 0) continue;
    return failure(name(), h,
                   fmt::format("job {} committed version {} under lease {}, which the controller stored for job {}, not "
                               "for it: a commit under another job's Lease is not fenced when its own job is replaced",
                               e.job, e.version, e.lease, *owner->second.begin()));
  }
  return Verdict::pass(std::string(name()),
                       fmt::format("{} controller commits inside their Lease; {} epochs under stored assignments",
                                   h.controller_commits.size(), epochs));
}

Verdict DeliveryCallbackCheck::check(const PipelineHistory& h) const {
  std::map<std::pair<std::string_view, uint64_t>, int64_t> visible;  // (sink, id) -> first time
  for (const DeliveryRecord& d : h.deliveries) {
    auto [it, fresh] = visible.try_emplace({d.sink, d.message.id}, d.time);
    if (!fresh) it->second = std::min(it->second, d.time);
  }
  std::map<std::pair<std::string_view, uint64_t>, int64_t> committed;  // (job, version) -> time
  for (const EpochRecord& e : h.epochs) {
    if (e.commit_time >= 0) committed[{e.job, e.version}] = e.commit_time;
  }
  for (const ConfirmationRecord& c : h.confirmations) {
    auto v = visible.find({c.sink, c.id});
    if (v == visible.end() || v->second > c.time) {
      return failure(name(), h, fmt::format("job {} confirmed the delivery of message {} to sink {} at {}, which the "
                                            "target did not hold then", c.job, hex_id(c.id), c.sink, format_time(c.time)));
    }
    auto e = committed.find({c.job, c.version});
    if (c.version == 0 || e == committed.end() || e->second > c.time) {
      return failure(name(), h, fmt::format("job {} confirmed the delivery of message {} to sink {} at {} before an "
                                            "epoch acknowledging it committed", c.job, hex_id(c.id), c.sink, format_time(c.time)));
    }
  }
  if (h.confirmations.empty()) return Verdict::not_applicable(std::string(name()), "no delivery callbacks");
  return Verdict::pass(std::string(name()),
                       fmt::format("{} callbacks after the target held the message and its acknowledgement committed",
                                   h.confirmations.size()));
}

namespace {

// A timer's identity, "timers/<computation>/<timer stream>:<partition, hex>/<row>" (the row
// as core/timer_row.h reads it), in its parts; nullopt when it is not one.
struct TimerIdentity {
  std::string_view computation;
  std::string_view partition;
  std::string_view row;
};
std::optional<TimerIdentity> timer_identity(std::string_view timer) {
  const size_t colon = timer.find(':');
  if (colon == std::string_view::npos || !timer.starts_with("timers/")) return std::nullopt;
  const size_t stream = timer.substr(0, colon).find('/', 7);  // the computation ends there
  const size_t slash = timer.find('/', colon + 1);
  if (stream == std::string_view::npos || slash == std::string_view::npos) return std::nullopt;
  return TimerIdentity{timer.substr(7, stream - 7), timer.substr(colon + 1, slash - colon - 1), timer.substr(slash + 1)};
}

// A timer still stored at the end when its stream's watermark is the event time: its job and
// trigger.
struct PendingEventTimer {
  std::string job;
  int64_t trigger_ts = 0;
};
std::optional<PendingEventTimer> pending_event_timer(std::string_view timer, const std::set<std::string>& event_time) {
  const auto id = timer_identity(timer);
  if (!id) return std::nullopt;
  const auto t = parse_timer_row(id->row);
  if (!t || event_time.count(fmt::format("{}/{}", id->computation, t->stream)) == 0) return std::nullopt;
  uint64_t partition = 0;
  const char* end = id->partition.data() + id->partition.size();
  if (std::from_chars(id->partition.data(), end, partition, 16).ptr != end) return std::nullopt;
  return PendingEventTimer{fmt::format("computation/{}/{}", id->computation, partition), t->trigger_ts};
}

// The timers stored at the end ("timers/<computation>/<stream>:<partition>/<row>") against those the
// re-execution of the committed epochs holds then, computation by computation and partitions
// aside (a repartition moves rows, never changes them); the first difference, or "".
std::string timers_unlike_reexecution(const PipelineHistory& h, const std::set<std::string>& pending) {
  // computation -> (row, its stored value or null when the history has none)
  using Stored = std::vector<std::pair<std::string_view, const std::string*>>;
  std::map<std::string, Stored, std::less<>> stored;
  for (const std::string& timer : pending) {
    const auto id = timer_identity(timer);
    if (!id) continue;
    const auto value = h.pending_timer_values.find(timer);
    stored[std::string(id->computation)].emplace_back(id->row, value == h.pending_timer_values.end() ? nullptr : &value->second);
  }
  for (const auto& [computation, held] : h.reexecuted_timers) {
    Stored at_end = stored[computation];
    std::sort(at_end.begin(), at_end.end());
    // Both in row order: a row on one side only is lost or extra (a row stored twice, in two
    // partitions, is extra once), a row on both with other values is stored wrong.
    std::vector<std::string_view> lost, extra;
    std::pair<const std::string*, const std::string*> unlike{nullptr, nullptr};  // stored, held
    std::string_view unlike_row;
    auto want = held.begin();
    for (size_t i = 0; want != held.end() || i < at_end.size();) {
      if (i == at_end.size() || (want != held.end() && want->first < at_end[i].first)) {
        lost.push_back((want++)->first);
      } else if (want == held.end() || at_end[i].first < want->first) {
        extra.push_back(at_end[i++].first);
      } else {
        if (unlike.first == nullptr && at_end[i].second != nullptr && *at_end[i].second != want->second) {
          unlike = {at_end[i].second, &want->second};
          unlike_row = want->first;
        }
        ++i;
        ++want;
      }
    }
    if (!lost.empty()) {
      // Who deleted it, if an epoch said so: the last to record it as fired.
      std::string by;
      for (const EpochRecord& e : h.epochs) {
        for (const std::string& timer : e.timers_fired) {
          const auto id = timer_identity(timer);
          if (id && id->computation == computation && id->row == lost.front()) {
            by = fmt::format(" (job {} recorded it fired at version {})", e.job, e.version);
          }
        }
      }
      return fmt::format("timer {} of computation {} is not stored at the end, though the committed epochs set it and "
                         "none ran its function{}: deleted without firing, or the function sets it only when run again "
                         "on the same history (not deterministic: see re-execution) ({} of {} such)",
                         readable_timer(lost.front()), computation, by, lost.size(), held.size());
    }
    if (!extra.empty()) {
      return fmt::format("timer {} of computation {} is stored at the end, though no committed epoch left it set "
                         "({} of {} stored timers such)",
                         readable_timer(extra.front()), computation, extra.size(), at_end.size());
    }
    if (unlike.first != nullptr) {
      return fmt::format("timer {} of computation {} is stored with {}, but the committed epochs re-executed set it with {}",
                         readable_timer(unlike_row), computation, *unlike.first, *unlike.second);
    }
  }
  return "";
}

}  // namespace

Verdict TimerCheck::check(const PipelineHistory& h) const {
  // Per timer row: how often committed epochs created it and fired it; each creation must be
  // fired exactly once, or still be pending at the end.
  std::map<std::string, std::pair<size_t, size_t>> timers;  // identity -> (created, fired)
  std::map<std::string, const EpochRecord*> last_fired;
  // An event-time timer's watermark, as the history gives it rather than as the engine said: the
  // newest event time its job took in its committed epochs so far (this one's included, whose
  // timers fire after its messages). A job keeps its watermark across lives and layouts, under
  // its name; a timer due where it was stays due where a repartition moves it (its trigger is
  // a floor of the new job's watermark from then on).
  std::map<std::string, int64_t, std::less<>> event_watermark;
  // Only for a run that never drained: when each job's watermark rose (version, new
  // watermark), and the last version at which it took a message or fired a timer.
  const bool stalled = h.never_drained();
  std::map<std::string, std::vector<std::pair<uint64_t, int64_t>>, std::less<>> rises;
  std::map<std::string, uint64_t, std::less<>> last_active;
  // A move counts as a creation of its new row and a firing of its old one, where it applied.
  size_t next_move = 0;
  const auto apply_moves = [&](uint64_t before_version) -> std::string {
    for (; next_move < h.timer_moves.size() && h.timer_moves[next_move].version < before_version; ++next_move) {
      const TimerMoveRecord& m = h.timer_moves[next_move];
      auto& [created, fired] = timers[m.from];
      if (++fired > created) {
        return fmt::format("timer {} moved to {} (version {}) but it was not there", readable_timer(m.from), readable_timer(m.to), m.version);
      }
      ++timers[m.to].first;
      const auto from = pending_event_timer(m.from, h.event_time_timer_streams);
      const auto to = pending_event_timer(m.to, h.event_time_timer_streams);
      const auto was = from ? event_watermark.find(from->job) : event_watermark.end();
      if (to && was != event_watermark.end() && from->trigger_ts <= was->second) {
        auto [floor, fresh] = event_watermark.try_emplace(to->job, from->trigger_ts);
        floor->second = std::max(floor->second, from->trigger_ts);
        if (stalled) rises[floor->first].emplace_back(m.version, floor->second);
      }
    }
    return "";
  };
  for (const EpochRecord& e : h.epochs) {
    if (std::string problem = apply_moves(e.version); !problem.empty()) return failure(name(), h, problem);
    if (!e.consumed.empty() && !h.event_time_timer_streams.empty()) {
      auto [newest, fresh] = event_watermark.try_emplace(e.job, e.consumed.front().event_ts);
      const int64_t was = newest->second;
      for (const MessageRecord& m : e.consumed) newest->second = std::max(newest->second, m.event_ts);
      if (stalled && (fresh || newest->second > was)) rises[e.job].emplace_back(e.version, newest->second);
    }
    if (stalled && (!e.consumed.empty() || !e.fired.empty())) last_active[e.job] = e.version;
    for (const FiredTimerRecord& f : e.fired) {
      if (f.trigger_ts > f.watermark) {
        return failure(name(), h, fmt::format("timer {} of job {} (key {}) fired at version {} with its stream's watermark at "
                                              "{}, before its trigger {}",
                                              readable_timer(f.row), e.job, f.key, e.version, format_time(f.watermark), format_time(f.trigger_ts)));
      }
      if (h.event_time_timer_streams.empty() || h.event_time_timer_streams.count(e.computation + "/" + f.stream) == 0) {
        // A system-time timer: due by its node's clock, whatever the engine took for it.
        if (f.trigger_ts <= e.clock_bound) continue;
        return failure(name(), h, fmt::format("timer {} of job {} (key {}) fired at version {}, before its trigger {}: the "
                                              "clock of its node {} had read no further than {} (the engine said its "
                                              "watermark was {})",
                                              readable_timer(f.row), e.job, f.key, e.version, format_time(f.trigger_ts), e.node,
                                              format_time(e.clock_bound), format_time(f.watermark)));
      }
      const auto taken = event_watermark.find(e.job);
      if (taken != event_watermark.end() && f.trigger_ts <= taken->second) continue;
      return failure(name(), h, fmt::format("event-time timer {} of job {} (key {}) fired at version {}, before its trigger {}: "
                                            "the job's event watermark (the newest event it took, or the trigger of a "
                                            "due timer a repartition moved to it) was {} (the engine said {})",
                                            readable_timer(f.row), e.job, f.key, e.version, format_time(f.trigger_ts),
                                            taken == event_watermark.end() ? std::string("none") : format_time(taken->second),
                                            format_time(f.watermark)));
    }
    for (const std::string& timer : e.timers_created) ++timers[timer].first;
    for (const std::string& timer : e.timers_fired) {
      auto& [created, fired] = timers[timer];
      if (++fired > created) {
        const EpochRecord* before = last_fired.count(timer) != 0 ? last_fired[timer] : nullptr;
        return failure(name(), h,
                       before == nullptr
                           ? fmt::format("timer {} fired by job {} (version {}) but never created", readable_timer(timer), e.job, e.version)
                           : fmt::format("timer {} fired twice: by job {} (version {}) and job {} (version {})", readable_timer(timer),
                                         before->job, before->version, e.job, e.version));
      }
      last_fired[timer] = &e;
    }
  }
  if (std::string problem = apply_moves(UINT64_MAX); !problem.empty()) return failure(name(), h, problem);
  const std::set<std::string> pending(h.pending_timers.begin(), h.pending_timers.end());
  for (const auto& [timer, counts] : timers) {
    const auto& [created, fired] = counts;
    const size_t waiting = pending.count(timer);
    if (created == fired + waiting) continue;
    return failure(name(), h, fmt::format("timer {} created {} times, fired {} times, {} pending at the end: {} deleted "
                                          "without firing",
                                          readable_timer(timer), created, fired, waiting ? "still" : "not", readable_timer(timer)));
  }
  for (const std::string& timer : pending) {
    if (timers.count(timer) == 0) return failure(name(), h, fmt::format("timer {} pending but never created", readable_timer(timer)));
  }
  // What the engine recorded of its timers aside: a row deleted without its function running
  // (the re-execution runs the firings the engine recorded), or stored by no committed epoch.
  if (h.reexecuted) {
    if (std::string problem = timers_unlike_reexecution(h, pending); !problem.empty()) return failure(name(), h, problem);
  }
  // A due event-time timer still stored at the end never fired, whatever the engine's own
  // watermark said: its job had taken an event as new as its trigger. Not when the run ended
  // paused, draining or stopped, when no timer fires; and late, not lost, in a run that never
  // drained if its job took nothing and fired nothing after the commit that made it due (the
  // job was stuck, say every epoch threw: liveness fails the run). A job that went on working
  // and never fired it lost it.
  const std::string_view end_state = h.state_changes.empty() ? "working" : std::string_view(h.state_changes.back().state);
  size_t late = 0;
  if (end_state == "working" || end_state == "completed") {
    for (const std::string& timer : pending) {
      const auto t = pending_event_timer(timer, h.event_time_timer_streams);
      if (!t) continue;
      const auto taken = event_watermark.find(t->job);
      if (taken == event_watermark.end() || t->trigger_ts > taken->second) continue;
      if (stalled) {
        uint64_t due = 0;  // the commit at which the job's watermark first reached the trigger
        if (const auto rose = rises.find(t->job); rose != rises.end()) {
          const auto reached = std::find_if(rose->second.begin(), rose->second.end(),
                                            [&](const auto& rise) { return rise.second >= t->trigger_ts; });
          if (reached != rose->second.end()) due = reached->first;
        }
        const auto active = last_active.find(t->job);
        if (active == last_active.end() || active->second <= due) {
          ++late;
          continue;
        }
      }
      return failure(name(), h, fmt::format("event-time timer {} of job {} never fired: still stored at the end, though the "
                                            "job's event watermark (the newest event it took, or the trigger of a due timer "
                                            "a repartition moved to it) was {}, at or past its trigger {}",
                                            readable_timer(timer), t->job, format_time(taken->second), format_time(t->trigger_ts)));
    }
  }
  if (timers.empty()) return Verdict::not_applicable(std::string(name()), "no timers");
  size_t set = 0, fired = 0;
  for (const auto& [timer, counts] : timers) {
    set += counts.first;
    fired += counts.second;
  }
  return Verdict::pass(std::string(name()),
                       fmt::format("{} timer rows set {} times (moves included), {} firings: each setting fired once; {} "
                                   "pending at the end{}",
                                   timers.size(), set, fired, pending.size(),
                                   late == 0 ? "" : not_done_yet(h, fmt::format("{} of them due, not fired yet", late))));
}

Verdict TimersAtEndCheck::check(const PipelineHistory& h) const {
  if (!h.reexecuted) return Verdict::not_applicable(std::string(name()), "the history was not re-executed");
  if (h.reexecuted_timers.empty()) return Verdict::not_applicable(std::string(name()), "no timers");
  const std::set<std::string> pending(h.pending_timers.begin(), h.pending_timers.end());
  if (std::string problem = timers_unlike_reexecution(h, pending); !problem.empty()) return failure(name(), h, problem);
  return Verdict::pass(std::string(name()), fmt::format("{} timers stored at the end, as the committed epochs re-executed "
                                                        "hold them", pending.size()));
}

Verdict OrderingCheck::check(const PipelineHistory& h) const {
  OrderingState state{producers_by_id(h), {}, {}};
  for (const EpochRecord& e : h.epochs) {
    if (!is_consumer_job(e.job)) continue;
    for (const MessageRecord& m : e.consumed) {
      const std::string problem = consume(state, e, m);
      if (!problem.empty()) return failure(name(), h, problem);
    }
  }
  if (state.compared == 0) {
    return Verdict::not_applicable(std::string(name()), "no lineage with two messages");
  }
  return Verdict::pass(std::string(name()),
                       fmt::format("{} first consumptions in order on {} lineages",
                                   state.consumed.size(), state.last.size()));
}

Verdict SwiftDeterminismCheck::check(const PipelineHistory& h) const {
  std::map<uint64_t, std::pair<const MessageRecord*, const EpochRecord*>> first;
  for (const EpochRecord& e : h.epochs) {
    if (!e.swift) continue;
    for (const MessageRecord& m : e.produced) {
      auto [it, fresh] = first.try_emplace(m.id, &m, &e);
      if (fresh || it->second.first->payload == m.payload) continue;
      const auto& [before, before_epoch] = it->second;
      const size_t from = shown_from(before->payload, m.payload);
      return failure(name(), h,
                     fmt::format("message {} produced with payload {} by job {} and {} by job {}",
                                 hex_id(m.id), shown(before->payload, from), before_epoch->job,
                                 shown(m.payload, from), e.job));
    }
  }
  if (first.empty()) return Verdict::not_applicable(std::string(name()), "no swift computation produced anything");
  return Verdict::pass(std::string(name()),
                       fmt::format("{} swift messages produced deterministically", first.size()));
}

Verdict LifecycleCheck::check(const PipelineHistory& h) const {
  std::set<uint64_t> job_leases;
  for (const ControllerCommit& c : h.controller_commits) {
    for (const auto& [job, lease] : c.job_leases) job_leases.insert(lease);
  }
  // A drain ends: once the faults are lifted, a pipeline left draining reaches "stopped"
  // within the liveness bound (unless it is started again first).
  size_t drains = 0;
  size_t drains_started_again = 0;
  for (size_t i = 0; i < h.state_changes.size(); ++i) {
    const StateChangeRecord& change = h.state_changes[i];
    if (change.state != "draining") continue;
    ++drains;
    const int64_t deadline = std::max(change.commit_time, h.faults_lifted_at) + h.liveness_bound;
    const StateChangeRecord* next = i + 1 < h.state_changes.size() ? &h.state_changes[i + 1] : nullptr;
    if (next != nullptr && next->state == "working") ++drains_started_again;
    if (next != nullptr && (next->state == "stopped" || next->commit_time <= deadline)) continue;
    if (next == nullptr && h.drained_at >= 0 && h.drained_at <= deadline) continue;
    return failure(name(), h,
                   fmt::format("the drain stored at version {} ({}) had not ended by {}, the liveness bound after "
                               "it (and the faults) began; {}",
                               change.version, format_time(change.commit_time), format_time(deadline),
                               next == nullptr ? std::string("it never ended")
                                               : fmt::format("the pipeline was {} at {} instead", next->state,
                                                             format_time(next->commit_time))));
  }
  size_t stops = 0;
  const StateChangeRecord* completed = nullptr;
  for (const StateChangeRecord& change : h.state_changes) {
    if (change.state != "stopped" && change.state != "completed") continue;
    if (change.state == "stopped") ++stops;
    if (change.state == "completed" && completed == nullptr) completed = &change;
    if (!change.in_flight.empty()) {
      std::string rows;
      for (const std::string& row : change.in_flight) rows += (rows.empty() ? "" : ", ") + row;
      return failure(name(), h, fmt::format("the pipeline was {} at version {} with {} still in flight", change.state,
                                            change.version, rows));
    }
    for (uint64_t lease : job_leases) {
      const auto span = h.leases.find(lease);
      if (span == h.leases.end() || span->second.started_at > change.commit_time) continue;
      if (span->second.ended_at < 0 || span->second.ended_at > change.commit_time) {
        return failure(name(), h, fmt::format("job lease {} was still active when the pipeline was {} at version {}",
                                              lease, change.state, change.version));
      }
    }
  }
  if (completed != nullptr) {
    for (const EpochRecord& e : h.epochs) {
      if (e.version > completed->version) {
        return failure(name(), h, fmt::format("job {} committed an epoch at version {} under lease {}, after the "
                                              "pipeline completed at version {}",
                                              e.job, e.version, e.lease, completed->version));
      }
    }
    for (const ControllerCommit& c : h.controller_commits) {
      if (c.version > completed->version && !c.job_leases.empty()) {
        return failure(name(), h, fmt::format("controller {} stored {} job Leases at version {}, after the pipeline "
                                              "completed at version {}",
                                              c.node, c.job_leases.size(), c.version, completed->version));
      }
    }
  }
  if (stops == 0 && completed == nullptr) {
    if (drains == 0) {
      return Verdict::not_applicable(std::string(name()), "the pipeline was never stopped and did not complete");
    }
    // Stops were asked for (the drains were checked above) but none reached "stopped": say so,
    // so a stop fault's "stops applied" is not contradicted by "never stopped".
    const bool still_draining = h.state_changes.back().state == "draining";
    return Verdict::pass(std::string(name()),
                         fmt::format("{} drains begun and none reached \"stopped\": {} started again before they "
                                     "ended{}; each within the liveness bound",
                                     drains, drains_started_again,
                                     still_draining ? ", the last still draining when the run ended" : ""));
  }
  std::string detail = fmt::format("stopped {} times with nothing in flight", stops);
  if (completed != nullptr) detail += fmt::format("; completed at version {}, nothing committed after", completed->version);
  return Verdict::pass(std::string(name()), detail);
}

Verdict LayoutCheck::check(const PipelineHistory& h) const {
  // A resharded target is followed: the sink ends with one partition per tablet.
  std::map<std::string, const PipelineHistory::TargetReshard*> last_reshard;
  for (const auto& r : h.target_reshards) last_reshard[r.sink] = &r;
  for (const auto& [sink, r] : last_reshard) {
    const auto at_end = h.sink_partitions_at_end.find(sink);
    const int partitions = at_end == h.sink_partitions_at_end.end() ? 0 : at_end->second;
    if (partitions != r->tablets) {
      return failure(name(), h,
                     fmt::format("the target of sink {} was resharded to {} tablets at {}, but the sink ended with "
                                 "{} partitions: the reshard was never followed",
                                 sink, r->tablets, format_time(r->time), partitions));
    }
  }
  std::string followed;
  if (!last_reshard.empty()) {
    followed = fmt::format("{} target reshards of {} sinks followed", h.target_reshards.size(), last_reshard.size());
  }
  if (h.layout_changes.empty()) {
    if (!followed.empty()) return Verdict::pass(std::string(name()), followed);
    return Verdict::not_applicable(std::string(name()), "no new layout was stored");
  }
  size_t late = 0;
  for (const EpochRecord& e : h.epochs) {
    if (e.commit_time < 0) continue;
    // The newest layout stored longer than the grace before this epoch committed.
    const LayoutChangeRecord* in_force = nullptr;
    for (const LayoutChangeRecord& c : h.layout_changes) {
      if (c.version < e.version && e.commit_time - c.commit_time > h.layout_grace) in_force = &c;
    }
    if (in_force == nullptr) continue;
    ++late;
    if (e.layout_version < in_force->layout_version) {
      return failure(name(), h,
                     fmt::format("job {} committed an epoch at version {} with layout {}, {} after layout {} was "
                                 "stored at version {} (grace {})",
                                 e.job, e.version, e.layout_version, format_time(e.commit_time - in_force->commit_time),
                                 in_force->layout_version, in_force->version, format_time(h.layout_grace)));
    }
  }
  if (late == 0) {
    if (!followed.empty()) return Verdict::pass(std::string(name()), followed);
    return Verdict::not_applicable(std::string(name()), "no epoch committed later than the grace after a new layout");
  }
  return Verdict::pass(std::string(name()), fmt::format("{} new layouts; the {} epochs committed past the grace ran "
                                                        "with the layout in force{}{}",
                                                        h.layout_changes.size(), late, followed.empty() ? "" : "; ",
                                                        followed));
}

namespace {

// What the pipeline did in the second half of its liveness bound, for a run that never drained:
// busy (which computations kept committing, and whether their timers kept setting timers) or
// stuck (no commit at all).
std::string busy_at_the_bound(const PipelineHistory& h) {
  const int64_t from = std::max(h.heal_at, h.timers_due_at) + h.liveness_bound / 2;
  struct Busy {
    size_t epochs = 0, consumed = 0, fired = 0, set = 0;
  };
  std::map<std::string_view, Busy> by;  // "computation/Name" -> what its epochs did
  for (const EpochRecord& e : h.epochs) {
    // An idle job's heartbeat commits nothing the pipeline waits for.
    if (e.commit_time < from || (e.consumed.empty() && e.timers_fired.empty())) continue;
    const size_t slash = e.job.rfind('/');
    Busy& b = by[std::string_view(e.job).substr(0, slash == std::string::npos ? e.job.size() : slash)];
    ++b.epochs;
    b.consumed += e.consumed.size();
    b.fired += e.timers_fired.size();
    b.set += e.timers_created.size();
  }
  // A sink's epochs that only acknowledge what its target took commit nothing taken or fired:
  // deliveries then are work too, of messages the target did not hold before `from`; copies
  // of what it held already are a sink resending, not progress.
  std::set<std::pair<std::string_view, uint64_t>> held;  // (sink, id) the target took before `from`
  for (const DeliveryRecord& d : h.deliveries) {
    if (d.time < from) held.emplace(d.sink, d.message.id);
  }
  struct Taken {
    size_t fresh = 0, again = 0;
  };
  std::map<std::string_view, Taken> delivered;  // sink -> what its target took after `from`
  for (const DeliveryRecord& d : h.deliveries) {
    if (d.time < from) continue;
    Taken& t = delivered[d.sink];
    ++(held.emplace(d.sink, d.message.id).second ? t.fresh : t.again);
  }
  std::string deliveries, resent;
  for (const auto& [sink, t] : delivered) {
    if (t.fresh > 0) {
      deliveries += fmt::format("{} sink {}'s target took {} messages it did not hold before{}", deliveries.empty() ? "" : ",",
                                sink, t.fresh, t.again == 0 ? "" : fmt::format(" (and {} copies)", t.again));
    } else {
      resent += fmt::format("{} sink {}'s target took {} copies of messages it held already", resent.empty() ? "" : ",",
                            sink, t.again);
    }
  }
  if (by.empty()) {
    if (deliveries.empty() && !resent.empty()) {
      return fmt::format("; no epoch took a message or fired a timer in the bound's second half (from {} on), and the "
                         "deliveries brought nothing new:{} (resending, not delivering: stuck)",
                         format_time(from), resent);
    }
    if (!deliveries.empty()) {
      return fmt::format("; no epoch took a message or fired a timer in the bound's second half (from {} on), but "
                         "deliveries went on:{} (still "
                         "delivering, not stuck)", format_time(from), deliveries);
    }
    return fmt::format("; no epoch took a message or fired a timer in the bound's second half (from {} on): stuck, not busy",
                       format_time(from));
  }
  std::vector<std::pair<std::string_view, Busy>> busiest(by.begin(), by.end());
  std::stable_sort(busiest.begin(), busiest.end(),
                   [](const auto& a, const auto& b) { return a.second.epochs > b.second.epochs; });
  std::string out = fmt::format("; committed in the bound's second half (from {} on):", format_time(from));
  for (size_t i = 0; i < busiest.size() && i < 3; ++i) {
    const auto& [job, b] = busiest[i];
    out += fmt::format("{} {} {} epochs ({} messages taken, {} timers fired, {} set)", i == 0 ? "" : ",", job, b.epochs,
                       b.consumed, b.fired, b.set);
  }
  if (!deliveries.empty()) out += ";" + deliveries;
  // Many firings, most of them setting a timer again, and few messages: timers that keep
  // themselves going.
  for (const auto& [job, b] : busiest) {
    if (b.fired < 10 || b.set * 2 < b.fired || b.consumed * 10 > b.fired) continue;
    out += fmt::format(" — {}'s timers set timers as they fired, with few messages taken: a timer that sets another "
                       "on each firing may keep the pipeline from ever draining",
                       job);
    break;
  }
  return out;
}

}  // namespace

Verdict LivenessCheck::check(const PipelineHistory& h) const {
  // From the calm, or from the trigger of the last timer the function set beyond the bound:
  // such a timer cannot fire earlier, and waiting for it is not being stuck.
  const int64_t from = std::max(h.heal_at, h.timers_due_at);
  const int64_t deadline = from + h.liveness_bound;
  const std::string timers =
      h.timers_due_at > h.heal_at
          ? fmt::format(", and from {}, when the last system-time timer the function set beyond the bound fell due",
                        format_time(h.timers_due_at))
          : std::string();
  if (h.drained_at < 0 && !h.left_at_rest.empty()) {
    // The scenario's own request left the pipeline stopped or paused: it reads no more input,
    // so a drain is not asked for (lifecycle holds the stop's own drain to the bound).
    return Verdict::not_applicable(
        std::string(name()),
        fmt::format("the scenario's last state request left the pipeline {} at {}, so it is not asked to drain{}; "
                    "end the scenario with {{set_state: working}} to have liveness judged",
                    h.left_at_rest, format_time(h.left_at_rest_at),
                    h.undrained.empty() ? "" : " (at the bound: " + h.undrained + ")"));
  }
  if (h.drained_at < 0 || h.drained_at > deadline) {
    std::string when =
        h.drained_at < 0 ? std::string("never drained") : fmt::format("drained at {}", format_time(h.drained_at));
    if (h.drained_at < 0 && !h.undrained.empty()) when += " (at the bound: " + h.undrained + ")" + busy_at_the_bound(h);
    return failure(name(), h,
                   fmt::format("not drained by {} ({} after the calm at {}{}); {}", format_time(deadline),
                               format_time(h.liveness_bound), format_time(h.heal_at), timers, when));
  }
  return Verdict::pass(std::string(name()), fmt::format("drained at {}, {} after the calm (bound {}{})",
                                                        format_time(h.drained_at), format_time(h.drained_at - h.heal_at),
                                                        format_time(h.liveness_bound), timers));
}

// What a computation's committed epochs gave: each output with the event time of an input or
// timer of its epoch, and each MessageId naming one message: a computation that takes each of
// its inputs once (not swift, exactly-once, no input repeated late) names its outputs apart, in
// one epoch and across its epochs. A second message under one id is a problem: a consumer that
// deduplicates by the id keeps one of them, and delivery by id cannot tell (the re-execution
// names its outputs as the engine does).
namespace {
std::string outputs_problem(const PipelineHistory& h) {
  std::map<std::string_view, bool> once;  // "computation/Name/" -> takes each input once
  for (const auto& [stream, consumers] : h.stream_consumers) {
    for (const StreamConsumer& c : consumers) {
      auto [it, fresh] = once.try_emplace(c.job_prefix, c.exactly_once);
      if (!fresh) it->second = it->second && c.exactly_once;
    }
  }
  const auto twice = [](const EpochRecord& e1, const MessageRecord& m1, const EpochRecord& e2, const MessageRecord& m2) {
    return fmt::format("message {} committed twice: as {} on stream {} by {}, and as {} on stream {} by {}; a MessageId "
                       "names one message, and a consumer that deduplicates by it keeps one of them (outputs of "
                       "different inputs, or of one input, given one id)",
                       hex_id(m2.id), shown(m1), m1.stream, origin_of_epoch(e1), shown(m2), m2.stream,
                       origin_of_epoch(e2));
  };
  std::unordered_map<uint64_t, std::pair<const EpochRecord*, const MessageRecord*>> committed;
  std::unordered_map<uint64_t, const MessageRecord*> in_epoch;
  std::set<int64_t> event_times;
  for (const EpochRecord& e : h.epochs) {
    if (!e.job.starts_with("computation/")) continue;
    const std::string_view job = e.job;
    const auto taker = once.find(job.substr(0, job.rfind('/') + 1));
    // A computation that takes each input once names its outputs apart, in one epoch and
    // across its epochs.
    const bool across = !e.swift && taker != once.end() && taker->second;
    in_epoch.clear();
    // An output carries the event time of the input or timer it came from (a batch, one of its
    // inputs'): the re-execution derives outputs as the engine does, so this is asked here. (An
    // epoch that took nothing gives nothing, which re-execution holds it to.)
    const bool took = !e.consumed.empty() || !e.fired.empty();
    event_times.clear();
    for (const MessageRecord& in : e.consumed) event_times.insert(in.event_ts);
    for (const FiredTimerRecord& t : e.fired) event_times.insert(t.event_ts);
    for (const MessageRecord& m : e.produced) {
      if (took && event_times.count(m.event_ts) == 0) {
        return fmt::format("message {} on stream {} by {} carries event time {}, which none of its epoch's inputs and "
                           "timers has: an output carries the event time of what it came from",
                           shown(m), m.stream, origin_of_epoch(e), format_time(m.event_ts));
      }
      // A swift or at-least-once computation may take one input twice, even in one epoch (no
      // input dedup), and a function with state then gives one id two payloads.
      if (!across) continue;
      const auto [same, fresh_here] = in_epoch.try_emplace(m.id, &m);
      if (!fresh_here) return twice(e, *same->second, e, m);
      const auto [it, fresh] = committed.try_emplace(m.id, &e, &m);
      if (!fresh && it->second.first != &e) return twice(*it->second.first, *it->second.second, e, m);
    }
  }
  return "";
}
}  // namespace

Verdict ConsumptionCheck::check(const PipelineHistory& h) const {
  if (!h.reexecuted) return Verdict::not_applicable(std::string(name()), "the history was not re-executed");
  // Every message committed: by the sources' committed epochs and by the computations'.
  Produced produced;
  std::unordered_map<uint64_t, size_t> from_sources;
  std::vector<uint64_t> ids;  // in order, for a deterministic first report
  for (const EpochRecord& e : h.epochs) {
    const bool source = e.job.starts_with("source/");
    for (const MessageRecord& m : e.produced) {
      auto& versions = produced[m.id];
      if (versions.empty()) ids.push_back(m.id);
      versions.push_back(&m);
      if (source) ++from_sources[m.id];
    }
  }
  std::sort(ids.begin(), ids.end());
  if (std::string problem = outputs_problem(h); !problem.empty()) return failure(name(), h, problem);
  // A run that never drained stopped short: what it had not read or consumed yet is late,
  // which liveness reports (with what the run still waited for), not lost. Not read yet: past
  // the last input its source emitted from its queue partition, which it reads in order (one
  // skipped below an emitted one is lost). Not consumed yet: still in its stream.
  const bool stalled = h.never_drained();
  const bool laned = h.source_input_lanes.size() == h.source_inputs.size();
  std::map<uint32_t, size_t> read_to;  // lane -> the index of its last input emitted
  if (stalled && laned) {
    for (size_t i = 0; i < h.source_inputs.size(); ++i) {
      if (h.source_input_lanes[i] != 0 && from_sources.count(h.source_inputs[i].id) != 0) read_to[h.source_input_lanes[i]] = i;
    }
  }
  const auto not_read_yet = [&](size_t i) {
    if (!stalled || !laned || h.source_input_lanes[i] == 0) return false;
    const auto to = read_to.find(h.source_input_lanes[i]);
    return to == read_to.end() || i > to->second;
  };
  const auto not_consumed_yet = [&](uint64_t id) {
    return stalled && std::binary_search(h.in_streams_at_end.begin(), h.in_streams_at_end.end(), id);
  };
  size_t unread = 0, unconsumed = 0;
  for (size_t i = 0; i < h.source_inputs.size(); ++i) {
    const MessageRecord& in = h.source_inputs[i];
    const auto it = produced.find(in.id);
    const auto sourced = from_sources.find(in.id);
    const size_t emitted = sourced == from_sources.end() ? 0 : sourced->second;
    if (emitted == 0 && not_read_yet(i)) {
      ++unread;
      continue;
    }
    if (emitted != 1) {
      return failure(name(), h, fmt::format("source input {} on stream {} emitted by {} committed source epochs, not one",
                                            shown(in), in.stream, emitted));
    }
    const MessageRecord& p = *it->second.front();
    if (!same_message(p, in)) {
      const size_t from = shown_from(in.payload, p.payload);
      return failure(name(), h,
                     fmt::format("source input {} was emitted as {} on stream {}", shown(in, from), shown(p, from), p.stream));
    }
  }
  Takes takes;
  size_t consumed = 0;
  for (const EpochRecord& e : h.epochs) {
    if (!is_consumer_job(e.job)) continue;
    const std::string_view job = e.job;
    const std::string_view prefix = job.substr(0, job.rfind('/') + 1);
    for (const MessageRecord& m : e.consumed) {
      ++consumed;
      ++takes[prefix][m.id];
      if (std::string problem = consumed_problem(e, m, produced, h.produced_times_recorded); !problem.empty()) {
        return failure(name(), h, problem);
      }
    }
  }
  size_t checked = 0;
  for (const uint64_t id : ids) {
    const MessageRecord& m = *produced.at(id).front();
    const auto consumers = h.stream_consumers.find(m.stream);
    if (consumers == h.stream_consumers.end()) continue;
    for (const StreamConsumer& c : consumers->second) {
      ++checked;
      size_t n = 0;
      if (const auto by = takes.find(c.job_prefix); by != takes.end()) {
        if (const auto taken = by->second.find(id); taken != by->second.end()) n = taken->second;
      }
      if (n == 1 || (n > 1 && !c.exactly_once)) continue;
      if (n == 0 && not_consumed_yet(id)) {
        ++unconsumed;
        continue;
      }
      const std::string consumer = c.job_prefix.substr(0, c.job_prefix.size() - 1);
      return failure(name(), h,
                     n == 0 ? fmt::format("message {} on stream {} was never consumed by {} (no committed epoch took it)",
                                          shown(m), m.stream, consumer)
                            : fmt::format("message {} on stream {} was consumed by {} in {} committed epochs: exactly-once "
                                          "allows one",
                                          shown(m), m.stream, consumer, n));
    }
  }
  if (checked == 0 && consumed == 0) return Verdict::not_applicable(std::string(name()), "no message was committed");
  const std::string late =
      unread + unconsumed == 0
          ? ""
          : not_done_yet(h, fmt::format("{} inputs not read and {} messages not consumed yet", unread, unconsumed));
  return Verdict::pass(std::string(name()), fmt::format("{} committed messages taken by each consumer as promised; {} "
                                                        "consumptions each equal to what was committed{}",
                                                        produced.size(), consumed, late));
}

namespace {

std::string timers_created_problem(const EpochRecord& e) {
  std::multiset<std::string> got;
  for (const std::string& t : e.timers_created) {
    const size_t table_end = t.find(':');
    const size_t prefix_end = t.find('/', table_end == std::string::npos ? 0 : table_end);
    got.insert(prefix_end == std::string::npos ? t : t.substr(prefix_end + 1));
  }
  const std::multiset<std::string> want(e.expected_timers_created.begin(), e.expected_timers_created.end());
  if (got == want) return "";
  for (const std::string& t : got) {
    if (want.count(t) == 0) return fmt::format("set timer {}, which its re-execution does not set", t);
  }
  for (const std::string& t : want) {
    if (got.count(t) == 0) return fmt::format("did not set timer {}, which its re-execution sets", t);
  }
  return "set timers other than its re-execution";
}

std::string outputs_problem(const EpochRecord& e) {
  std::map<uint64_t, const MessageRecord*> got, want;
  for (const MessageRecord& m : e.produced) got.emplace(m.id, &m);
  for (const MessageRecord& m : e.expected_produced) want.emplace(m.id, &m);
  for (const auto& [id, m] : got) {
    const auto it = want.find(id);
    if (it == want.end()) {
      return fmt::format("committed message {} on stream {}, which its re-execution does not produce", shown(*m), m->stream);
    }
    const MessageRecord& w = *it->second;
    if (w.key != m->key || w.payload != m->payload || w.stream != m->stream || w.event_ts != m->event_ts) {
      const size_t from = shown_from(m->payload, w.payload);
      return fmt::format("committed message {} on stream {} (event time {}), which its re-execution gives as {} on "
                         "stream {} (event time {})",
                         shown(*m, from), m->stream, format_time(m->event_ts), shown(w, from), w.stream,
                         format_time(w.event_ts));
    }
  }
  for (const auto& [id, w] : want) {
    if (got.count(id) == 0) {
      return fmt::format("did not commit message {} on stream {}, which its re-execution produces", shown(*w), w->stream);
    }
  }
  return "";
}


}  // namespace

Verdict ReexecutionCheck::check(const PipelineHistory& h) const {
  if (!h.reexecuted) return Verdict::not_applicable(std::string(name()), "the history was not re-executed");
  size_t epochs = 0, outputs = 0, clocked = 0, compared = 0;
  for (const EpochRecord& e : h.epochs) {
    if (!e.reexecuted) continue;
    ++epochs;
    compared += e.outputs_compared ? 1 : 0;
    outputs += e.produced.size();
    clocked += e.clock_bound != INT64_MAX ? 1 : 0;
    std::string problem =
        e.now <= e.clock_bound ? "" : fmt::format("was told the time {}, past the furthest the clock of its {} had read by its commit ({})",
                                                  format_time(e.now), e.node.empty() ? "process" : "node " + e.node,
                                                  format_time(e.clock_bound));
    if (problem.empty() && !e.reexecution_problems.empty()) problem = e.reexecution_problems.front();
    if (problem.empty() && h.outputs_recorded) problem = outputs_problem(e);
    if (problem.empty() && h.outputs_recorded) problem = timers_created_problem(e);
    if (problem.empty()) continue;
    return failure(name(), h,
                   fmt::format("computation {} (job {}, {}{} at {}, inputs {}) {}: the "
                               "committed epoch is not what its function gives on what it took",
                               e.computation, e.job, committed_as(e), e.version > 0 ? fmt::format(", epoch {}", e.epoch) : "",
                               format_time(e.now), first_inputs(e), problem));
  }
  if (epochs == 0) return Verdict::not_applicable(std::string(name()), "no computation epoch committed");
  if (!h.outputs_recorded) {
    return Verdict::pass(std::string(name()),
                         fmt::format("{} committed epochs re-executed: each timer they fired held, and due by the events "
                                     "taken or the clock read; {} of them told a time their clock had reached{}; {} "
                                     "committed the outputs their re-execution gives (by digest){}",
                                     epochs, clocked, clocked < epochs ? " (the others kept no clock reading)" : "", compared,
                                     compared < epochs ? " (the others kept no digest, bind an external table, took a "
                                                                 "message whose version is in doubt, or failed otherwise)"
                                                               : ""));
  }
  return Verdict::pass(std::string(name()),
                       fmt::format("{} committed epochs re-executed: {} outputs, timers and state as committed", epochs,
                                   outputs));
}

Verdict AssertionsCheck::check(const PipelineHistory& h) const {
  if (h.user_assertions.empty()) return Verdict::not_applicable(std::string(name()), "the program has no always or unreachable assertion");
  std::string failures;
  uint64_t evaluated = 0, failing = 0;
  for (const UserAssertionRecord& a : h.user_assertions) {
    evaluated += a.evaluated;
    if (a.failed == 0) continue;
    ++failing;
    failures += fmt::format("{}{} \"{}\" {} {} of {} times, first in {}", failures.empty() ? "" : "; ", a.kind, a.name,
                            a.kind == "unreachable" ? "reached" : "false", a.failed, a.evaluated, a.first_failure);
  }
  if (failing == 0) {
    return Verdict::pass(std::string(name()), fmt::format("{} assertions held over {} evaluations", h.user_assertions.size(), evaluated));
  }
  return failure(name(), h, std::move(failures));
}

std::vector<std::unique_ptr<PipelineChecker>> all_pipeline_checkers() {
  std::vector<std::unique_ptr<PipelineChecker>> out;
  out.push_back(std::make_unique<DeliveryCheck>());
  out.push_back(std::make_unique<StateCheck>());
  out.push_back(std::make_unique<ConsumptionCheck>());
  out.push_back(std::make_unique<ReexecutionCheck>());
  out.push_back(std::make_unique<FencingCheck>());
  out.push_back(std::make_unique<ControllerCheck>());
  out.push_back(std::make_unique<DeliveryCallbackCheck>());
  out.push_back(std::make_unique<TimerCheck>());
  out.push_back(std::make_unique<OrderingCheck>());
  out.push_back(std::make_unique<SwiftDeterminismCheck>());
  out.push_back(std::make_unique<LifecycleCheck>());
  out.push_back(std::make_unique<LayoutCheck>());
  out.push_back(std::make_unique<LivenessCheck>());
  out.push_back(std::make_unique<AssertionsCheck>());
  return out;
}

std::vector<Verdict> run_pipeline_checks(const PipelineHistory& history) {
  std::vector<Verdict> out;
  for (const auto& checker : all_pipeline_checkers()) out.push_back(checker->check(history));
  return out;
}

}  // namespace onceflow::checkers
