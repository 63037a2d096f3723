#include "core/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <utility>

#include "core/delivery.h"
#include "core/emitted.h"
#include "core/reexecute.h"
#include "core/env/codec.h"
#include "core/user_code.h"

namespace onceflow {

namespace {

// Partitions of the consumer of `stream`, or 0 when nothing consumes it.
int consumer_partitions(const PipelineSpec& spec, const std::string& stream) {
  for (const auto& c : spec.computations) {
    for (const auto& in : c.input_streams) {
      if (in == stream) return c.partitions;
    }
  }
  for (const auto& s : spec.sinks) {
    if (s.input_stream == stream) return s.partitions;
  }
  return 0;
}

// The jobs that write into `stream`: all partitions of its producer.
std::vector<JobId> producers(const PipelineSpec& spec, const std::string& stream) {
  std::vector<JobId> out;
  for (const auto& s : spec.sources) {
    if (s.output_stream != stream) continue;
    for (int p = 0; p < s.partitions; ++p) out.push_back({JobKind::kSource, s.name, p});
  }
  for (const auto& c : spec.computations) {
    if (std::find(c.output_streams.begin(), c.output_streams.end(), stream) == c.output_streams.end()) continue;
    for (int p = 0; p < c.partitions; ++p) out.push_back({JobKind::kComputation, c.name, p});
  }
  return out;
}

constexpr Micros kNoWatermark = INT64_MAX;

// A queue or static table row: key, payload, event time, write time (the system time).
Message decode_source_row(std::string_view value) {
  Decoder in(value);
  Message m;
  m.key = in.u64();
  m.payload = in.string();
  m.event_ts = in.i64();
  m.system_ts = m.alignment_ts = in.i64();
  assert(in.done());
  return m;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Meta: the job's own row, rewritten by every epoch.

struct Job::Meta {
  uint64_t epoch = 0;
  Micros last_output_ts = INT64_MIN;
  Micros low_watermark = INT64_MIN;     // no NEW message this job emits will be older
  Micros replay_watermark = INT64_MIN;  // nothing it may emit again (a replay) is older
  Micros event_watermark = INT64_MIN;
  uint64_t next_seqno = 1;   // async sinks: seqNo of the next outbox row
  uint64_t acked_seqno = 0;  // async sinks: every seqNo up to this one is delivered
  uint64_t sink_offset = 0;  // sync sinks: next row offset in the sink table
  std::string dedup_cursor;  // where the next input dedup cleanup goes on ("": the start)
  JobProgress progress;      // for draining and completion (core/controller.h)
  // Sources while the pipeline drains: the cut, written by the controller (INT64_MIN: none).
  Micros drain_cut = INT64_MIN;

  std::string encode() const {
    Encoder out;
    out.u64(epoch).i64(last_output_ts).i64(low_watermark).i64(event_watermark);
    out.u64(next_seqno).u64(acked_seqno).u64(sink_offset).i64(replay_watermark).bytes(dedup_cursor);
    out.u64(progress.amo_pending).u64(progress.finished ? 1 : 0).i64(drain_cut);
    return out.take();
  }
  static Meta decode(std::string_view bytes) {
    Decoder in(bytes);
    Meta m;
    m.epoch = in.u64();
    m.last_output_ts = in.i64();
    m.low_watermark = in.i64();
    m.event_watermark = in.i64();
    m.next_seqno = in.u64();
    m.acked_seqno = in.u64();
    m.sink_offset = in.u64();
    m.replay_watermark = in.i64();
    m.dedup_cursor = in.string();
    if (!in.done()) {  // rows written before these were kept end here
      m.progress.amo_pending = in.u64();
      m.progress.finished = in.u64() != 0;
      m.drain_cut = in.i64();
    }
    assert(in.done());
    return m;
  }
};

JobProgress job_progress(std::string_view meta_row) {
  const Job::Meta meta = Job::Meta::decode(meta_row);
  JobProgress out = meta.progress;
  out.low_watermark = meta.low_watermark;
  out.last_output_ts = meta.last_output_ts;
  out.event_watermark = meta.event_watermark;
  return out;
}

bool timer_may_fire(const ComputationSpec& c, const Timer& t, Micros partition_event_watermark) {
  const auto stream = std::find_if(c.timer_streams.begin(), c.timer_streams.end(),
                                   [&](const TimerStreamSpec& s) { return s.name == t.timer_stream; });
  if (stream == c.timer_streams.end() || stream->watermark != Watermark::kEventTime) return true;
  return t.trigger_ts <= partition_event_watermark;
}

bool timers_may_fire(const ComputationSpec& c, const std::vector<Row>& rows,
                     const std::function<std::optional<std::string>(const std::string& job)>& meta) {
  std::map<std::string, Micros, std::less<>> watermarks;  // partition prefix -> the job's event watermark
  for (const Row& row : rows) {
    const size_t slash = row.key.find('/');
    const std::string_view rest = slash == std::string::npos ? std::string_view() : std::string_view(row.key).substr(slash + 1);
    if (slash == 0 || slash > 16 || rest.size() <= 34 || rest[16] != '/' || rest[33] != '/') return true;
    const Timer t = decode_timer(rest, decode_timer_value(row.value));
    const std::string_view prefix = std::string_view(row.key).substr(0, slash);
    auto it = watermarks.find(prefix);
    if (it == watermarks.end()) {
      const auto partition = static_cast<int>(tables::parse_hex16(std::string(16 - slash, '0') + std::string(prefix)));
      const auto row_of_job = meta(JobId{JobKind::kComputation, c.name, partition}.str());
      it = watermarks.emplace(std::string(prefix), row_of_job ? job_progress(*row_of_job).event_watermark : INT64_MIN).first;
    }
    if (timer_may_fire(c, t, it->second)) return true;
  }
  return false;
}

Result<uint64_t> at_most_once_pending(Store& store, const Transaction& tx, const PipelineSpec& spec) {
  std::vector<std::string> metas;
  for (const auto& s : spec.sinks) {
    if (!s.at_most_once_strategy.enabled) continue;
    for (int p = 0; p < s.partitions; ++p) metas.push_back(JobId{JobKind::kSink, s.name, p}.str());
  }
  if (metas.empty()) return uint64_t{0};
  auto rows = store.get_many(tx, tables::kJobMeta, metas);
  if (!rows) return rows.error();
  uint64_t pending = 0;
  for (const auto& meta : *rows) {
    if (meta) pending += job_progress(*meta).amo_pending;
  }
  return pending;
}

std::string with_output_floor(std::optional<std::string_view> meta_row, Micros floor) {
  Job::Meta meta = meta_row ? Job::Meta::decode(*meta_row) : Job::Meta{};
  meta.last_output_ts = std::max(meta.last_output_ts, floor);
  return meta.encode();
}

std::string with_input_swapped(std::string_view meta_row, Micros newest) {
  Job::Meta meta = Job::Meta::decode(meta_row);
  meta.progress.finished = false;
  meta.low_watermark = meta.replay_watermark = meta.last_output_ts = newest;
  return meta.encode();
}

std::string with_new_producer(std::string_view meta_row) {
  Job::Meta meta = Job::Meta::decode(meta_row);
  meta.next_seqno = 1;
  meta.acked_seqno = 0;
  return meta.encode();
}

std::string with_drain_cut(std::string_view meta_row, std::optional<Micros> cut) {
  Job::Meta meta = Job::Meta::decode(meta_row);
  meta.drain_cut = cut.value_or(INT64_MIN);
  return meta.encode();
}

std::optional<SinkProgress> sink_progress(std::string_view meta_row) {
  Decoder in(meta_row);
  for (int skip = 0; skip < 4; ++skip) (void)in.u64();  // epoch and three timestamps
  SinkProgress p;
  p.next_seqno = in.u64();
  p.acked_seqno = in.u64();
  if (!in.ok()) return std::nullopt;
  return p;
}

// ---------------------------------------------------------------------------------------
// EpochTx: one epoch's transaction, the state backend user code writes through.

class Job::EpochTx final : public StateBackend {
 public:
  EpochTx(Store& store, Transaction tx, Micros now) : store_(store), tx(std::move(tx)), now(now) {}

  std::optional<std::string> get(const std::string& table, uint64_t key) override {
    std::string hex = tables::hex16(key);
    if (!observed || tx.buffered(table, hex) != nullptr || !state_read.emplace(table, key).second) return read(table, hex);
    std::optional<std::string> value = read(table, hex);
    record.state_reads.push_back({table, key, value});
    return value;
  }
  void put(const std::string& table, uint64_t key, std::string value) override {
    tx.put(table, tables::hex16(key), std::move(value));
  }
  void erase(const std::string& table, uint64_t key) override { tx.erase(table, tables::hex16(key)); }

  std::optional<std::string> read(const std::string& table, const std::string& key) {
    if (!failed.is_ok()) return std::nullopt;
    if (const auto* own = tx.buffered(table, key)) return *own;
    if (auto it = prefetched_.find(Transaction::TableKey{table, key}); it != prefetched_.end()) return it->second;
    if (const KnownRange* range = known(table, key)) {
      auto row = std::lower_bound(range->rows.begin(), range->rows.end(), key,
                                  [](const Row& r, const std::string& k) { return r.key < k; });
      if (row != range->rows.end() && row->key == key) return row->value;
      return std::nullopt;
    }
    auto r = store_.get(tx, table, key);
    if (!r) {
      failed = r.error();
      return std::nullopt;
    }
    return *r;
  }
  // Reads `keys` of `table` in one round trip, for read() to answer from later. Keys already
  // read that way are not asked again.
  void prefetch(const std::string& table, const std::vector<std::string>& keys) {
    if (!failed.is_ok()) return;
    std::vector<std::string> wanted;
    for (const std::string& key : keys) {
      if (prefetched_.count(Transaction::TableKey{table, key}) == 0) wanted.push_back(key);
    }
    if (wanted.size() < 2) return;  // one key costs one read either way
    auto r = store_.get_many(tx, table, wanted);
    if (!r) {
      failed = r.error();
      return;
    }
    for (size_t i = 0; i < wanted.size(); ++i) {
      prefetched_.insert_or_assign(std::pair<std::string, std::string>(table, std::move(wanted[i])), std::move((*r)[i]));
    }
  }
  // Reads the first `limit` committed rows of [from, to) of `table` in one round trip. Reads
  // and scans inside the part of the range they cover (all of it when there are fewer, else
  // up to the last row read) are answered from them from then on, with the transaction's
  // own writes laid over.
  // Returns false when the range held `limit` rows or more (only the first are known).
  bool prefetch_range(const std::string& table, const std::string& from, const std::string& to, size_t limit) {
    if (!failed.is_ok()) return true;
    // Rows this transaction wrote already would be mistaken for committed ones.
    if (writes_in(table, from, to)) return true;
    auto r = store_.scan(tx, table, from, to, limit);
    if (!r) {
      failed = r.error();
      return true;
    }
    if (r->size() < limit) {
      known_.push_back({table, from, to, std::move(*r)});
      return true;
    }
    std::string past_last = r->back().key + '\0';  // the least key after the last row read
    known_.push_back({table, from, std::move(past_last), std::move(*r)});
    return false;
  }
  std::vector<Row> scan(const std::string& table, const std::string& from, const std::string& to,
                        size_t limit) {
    if (!failed.is_ok()) return {};
    if (const KnownRange* range = known(table, from, to)) {
      std::vector<Row> committed;
      for (const Row& row : range->rows) {
        if (row.key >= from && (to.empty() || row.key < to)) committed.push_back(row);
      }
      return tx.overlay(table, from, to, limit, std::move(committed), true);
    }
    auto r = store_.scan(tx, table, from, to, limit);
    if (!r) {
      failed = r.error();
      return {};
    }
    return std::move(*r);
  }

 private:
  struct KnownRange {
    std::string table, from, to;  // an empty `to`: no upper bound
    std::vector<Row> rows;        // every committed row of the range, in key order
  };
  // The known range of `table` holding all of [from, to), or null.
  const KnownRange* known(const std::string& table, const std::string& from, const std::string& to) const {
    for (const KnownRange& r : known_) {
      if (r.table == table && from >= r.from && (r.to.empty() || (!to.empty() && to <= r.to))) return &r;
    }
    return nullptr;
  }
  // The known range of `table` holding `key`, or null.
  const KnownRange* known(const std::string& table, const std::string& key) const {
    for (const KnownRange& r : known_) {
      if (r.table == table && key >= r.from && (r.to.empty() || key < r.to)) return &r;
    }
    return nullptr;
  }
  bool writes_in(const std::string& table, const std::string& from, const std::string& to) const {
    auto it = tx.writes().lower_bound(Transaction::TableKey{table, from});
    return it != tx.writes().end() && it->first.first == table && (to.empty() || it->first.second < to);
  }
  Store& store_;
  // What get_many answered: the snapshot's value, or the transaction's own write when it had
  // one then (read() looks at the transaction's writes first, so those are never used).
  std::map<std::pair<std::string, std::string>, std::optional<std::string>, Transaction::TableKeyLess> prefetched_;
  std::vector<KnownRange> known_;

 public:
  Transaction tx;
  Micros now;
  Meta meta;
  Status failed;       // the first read error; the epoch is abandoned when set
  bool has_work = false;
  bool page_full = false;  // an input read returned a whole page: more may be waiting
  bool aligned = false;    // an input was left for later, newer than a producer's watermark
  Micros watermark_before = 0;  // the job's low watermark as the epoch began
  EngineObserver::Epoch record;
  bool observed = false;  // an observer reads `record`: state reads are recorded too
  std::map<uint32_t, uint32_t> buggify_calls;  // ONCEFLOW_BUGGIFY calls so far, per site (core/user_code.h)
  std::set<std::pair<std::string, uint64_t>> state_read;  // (table, key) in record.state_reads
  StreamWrites stream_out;                   // what the epoch emits into streams
  std::vector<std::pair<std::string, int>> streams_written;  // (stream table, partition)
  InputTakes inputs;                         // what it takes from its input rows
  std::vector<InputRef> consumed_rows;       // swift: acknowledged after the next commit
  std::vector<Message> amo_outputs;          // at-most-once: queued after commit
  std::vector<Message> written_late;         // bug switch alo-write-after-commit
  std::vector<MessageId> confirmed;          // async sinks: delivery callbacks after commit
  Delivery::EpochOutbox outbox;              // async sinks: the outbox rows written and erased
  std::vector<std::pair<std::string, std::string>> timer_deletes_apart;  // bug switch
};

// ---------------------------------------------------------------------------------------
// Context: the runtime user code sees while processing one input or timer.

class Job::Context final : public RuntimeContext {
 public:
  Context(Micros now, Random& random) : now_(now), random_(random) {}
  Micros current_timestamp() const override { return now_; }
  Random& random() override { return random_; }

 private:
  Micros now_;
  Random& random_;
};

// Forwards state calls to the epoch being run. REQUIRES: called while an epoch runs.
class Job::StateForward final : public StateBackend {
 public:
  explicit StateForward(Job& job) : job_(job) {}
  std::optional<std::string> get(const std::string& t, uint64_t k) override {
    const user_code::CallPause pause;  // a read from the store lets other fibers run
    return epoch().get(t, k);
  }
  void put(const std::string& t, uint64_t k, std::string v) override { epoch().put(t, k, std::move(v)); }
  void erase(const std::string& t, uint64_t k) override { epoch().erase(t, k); }

 private:
  EpochTx& epoch() {
    assert(job_.current_ != nullptr);
    return *job_.current_;
  }
  Job& job_;
};

// ---------------------------------------------------------------------------------------
// Job

Job::Job(const EngineEnv& env, JobId id, LeaseId lease)
    : env_(env),
      id_(std::move(id)),
      lease_(lease),
      sink_(id_.kind == JobKind::kSink ? env_.spec.sink(id_.name) : nullptr),
      job_name_(id_.str()) {
  switch (id_.kind) {
    case JobKind::kSource:
      source_ = env_.spec.source(id_.name);
      if (source_ != nullptr) origin_ = source_origin(*source_);
      break;
    case JobKind::kComputation: computation_ = env_.spec.computation(id_.name); break;
    case JobKind::kSink:
      if (sink_ != nullptr) delivery_ = std::make_unique<Delivery>(env_, id_, lease_, *sink_, [this] { request_stop(); });
      break;
  }
  assert(source_ != nullptr || computation_ != nullptr || sink_ != nullptr);
  // Where this job's input dedup lives, worked out once rather than per message.
  if (source_ == nullptr) {
    const std::string owner = computation_ != nullptr ? computation_->name : "sink:" + sink_->name;
    // A sink's input keys are the uint64 hashes of the stream, so it always takes the
    // compact layout (one row per key rather than a row put and erased per message).
    const bool compact = computation_ == nullptr || computation_->compact_input_messages();
    dedup_table_ = compact ? tables::compact_input_messages(owner) : tables::input_messages(owner);
    dedup_ = DedupTable(compact ? DedupLayout::kCompact : DedupLayout::kFull, id_.partition);
  }
  const auto outputs = computation_ != nullptr ? computation_->output_streams
                       : source_ != nullptr    ? std::vector<std::string>{source_->output_stream}
                                               : std::vector<std::string>{};
  for (const auto& stream : outputs) {
    consumers_[stream] = Consumer{consumer_partitions(env_.spec, stream), tables::stream(stream)};
    watermark_outputs_.push_back(InputWakeups::watermark(tables::stream(stream)));
  }
  prefix_ = tables::partition_prefix(id_.partition);
  if (computation_ != nullptr) timers_table_ = tables::timers(computation_->name);
  if (sink_ != nullptr) outbox_table_ = tables::outbox(sink_->name);
  if (computation_ != nullptr) {
    state_backend_ = std::make_unique<StateForward>(*this);
    function_ = env_.registry.create(computation_->processing_function);
    const InitContext init(*state_backend_, computation_->name);
    function_->init(init);
    state_tables_ = init.tables();
    std::sort(state_tables_.begin(), state_tables_.end());
    state_tables_.erase(std::unique(state_tables_.begin(), state_tables_.end()), state_tables_.end());
  }
  // The meta rows an epoch reads: its own, and those of its inputs' producers (watermarks).
  const auto inputs = computation_ != nullptr ? computation_->input_streams
                      : sink_ != nullptr      ? std::vector<std::string>{sink_->input_stream}
                                              : std::vector<std::string>{};
  // A queue source is woken by rows appended in its process (`onceflow real`'s producer).
  if (source_ != nullptr && source_->type == "queue") wake_inputs_.emplace_back(tables::queue(table_of(*source_)), id_.partition);
  for (const auto& stream : inputs) {
    wake_inputs_.emplace_back(tables::stream(stream), id_.partition);
    watermark_inputs_.push_back(InputWakeups::watermark(tables::stream(stream)));
    for (const JobId& producer : producers(env_.spec, stream)) {
      producer_metas_.push_back(producer.str());
      source_producers_.push_back(producer.kind == JobKind::kSource);
    }
  }
  watermark_inputs_.insert(watermark_inputs_.begin(), wake_inputs_.begin(), wake_inputs_.end());
  meta_key_ = id_.str();
  epoch_metas_ = producer_metas_;
  epoch_metas_.push_back(meta_key_);
}

Job::~Job() = default;

UserCall Job::user_call(EpochTx& etx, uint64_t message, uint64_t key, bool timer) {
  return UserCall{computation_->name, job_name_, etx.meta.epoch, message, key, timer, etx.now, function_random_.seed(),
                  &etx.buggify_calls, false};
}

Random& Job::function_random() { return env_.bugs.random_per_process ? env_.random : function_random_; }

void Job::run() {
  const Micros period = env_.spec.epoch_period_us;
  while (!stop_requested_) {
    const Micros started = env_.runtime.clock().now();
    const bool wakes = env_.wakeups != nullptr && !wake_inputs_.empty();
    const uint64_t seen = wakes ? env_.wakeups->commits(wake_inputs_) : 0;  // before the epoch's snapshot
    const uint64_t seen_watermarks = wakes ? env_.wakeups->commits(watermark_inputs_) : 0;
    epoch_by_watermark_ = std::exchange(next_by_watermark_, false);
    const Outcome outcome = run_epoch();
    if (outcome == Outcome::kFenced) {
      fenced_ = true;
      if (env_.observer != nullptr) env_.observer->job_fenced(id_, lease_);
      break;
    }
    bool outbox_empty = true;
    if (sink_ != nullptr && !sink_->at_most_once_strategy.enabled && !writes_before_commit(*sink_)) {
      outbox_empty = delivery_->deliver_outbox();
    }
    // Idle means no work and nothing waiting to be delivered; an idle job slows down step by
    // step (1, 2, 4... periods, up to idle_epoch_periods), and any work brings it back.
    idle_epochs_ = idle_ && outbox_empty ? idle_epochs_ + 1 : 0;
    const int64_t periods =
        idle_epochs_ == 0 ? 1 : std::min<int64_t>(int64_t{1} << std::min(idle_epochs_ - 1, 20), env_.options.idle_epoch_periods);
    if (periods > 1) probe(env_, Probe::kIdleSlowdown);
    if (behind_) {
      // Behind its input: the next epoch at once (other fibers run first), not a period on.
      probe(env_, Probe::kEpochCatchUp);
      env_.runtime.sleep_for(0);
      continue;
    }
    // Epochs start a period apart (the epoch's own time counted in), so a busy job keeps its
    // cadence; bounded, so that a clock that jumps neither stalls nor races the job.
    // Rows committed into the job's inputs by a job of this process start the next epoch at
    // once (core/input_wakeups.h).
    const Micros wait = periods * period;
    const Micros now = env_.runtime.clock().now();
    const Micros until = std::clamp<Micros>(started + wait, now, now + wait);
    // An epoch that left inputs for a producer's watermark also starts when a producer of
    // this process commits an epoch that moves its watermark on, rows or not (see
    // after_commit for which do).
    if (wakes && aligned_) {
      if (env_.wakeups->wait(env_.runtime, watermark_inputs_, until, seen_watermarks)) {
        next_by_watermark_ = env_.wakeups->commits(wake_inputs_) == seen;
        probe(env_, next_by_watermark_ ? Probe::kEpochWokenByWatermark : Probe::kEpochWokenByInput);
      }
    } else if (wakes) {
      if (env_.wakeups->wait(env_.runtime, wake_inputs_, until, seen)) probe(env_, Probe::kEpochWokenByInput);
    } else {
      env_.runtime.sleep_until(until);
    }
  }
  finished_ = true;
  if (delivery_ != nullptr) delivery_->job_ended();
}

Job::Outcome Job::run_epoch() {
  auto began = env_.store.begin();
  if (!began) return Outcome::kRetry;
  EpochTx etx(env_.store, std::move(*began), env_.runtime.clock().now());
  current_ = &etx;
  struct Reset {
    EpochTx** slot;
    ~Reset() { *slot = nullptr; }
  } reset{&current_};

  etx.prefetch(tables::kJobMeta, epoch_metas_);
  if (auto meta = etx.read(tables::kJobMeta, meta_key_)) etx.meta = Meta::decode(*meta);
  if (!etx.failed.is_ok()) return Outcome::kRetry;
  ++etx.meta.epoch;
  etx.watermark_before = etx.meta.low_watermark;
  if (computation_ != nullptr) function_random_ = Xoshiro256StarStar(env_.seed).fork(meta_key_ + "#" + std::to_string(etx.meta.epoch));
  etx.observed = env_.observer != nullptr && env_.observer->wants_state_reads();
  etx.record.now = etx.now;
  etx.record.random_seed = function_random_.seed();
  idle_ = false;
  switch (id_.kind) {
    case JobKind::kSource: step_source(etx); break;
    case JobKind::kComputation: step_computation(etx); break;
    case JobKind::kSink: step_sink(etx); break;
  }
  if (etx.failed.is_ok()) {
    etx.streams_written = etx.stream_out.partitions();
    etx.stream_out.write(etx.tx, meta_key_, etx.meta.epoch);
    (void)etx.inputs.settle(
        etx.tx, [&etx](const std::string& table, const std::string& key) { return etx.read(table, key); }, &etx.failed);
  }
  if (!etx.failed.is_ok()) {
    probe(env_, Probe::kEpochReadFailed);
    if (env_.observer != nullptr) {
      env_.observer->epoch_abandoned(id_, lease_, etx.meta.epoch, "its reads failed (" + etx.failed.message() + ")");
    }
    env_.store.abort(etx.tx);
    return Outcome::kRetry;
  }
  if (!etx.has_work && env_.bugs.no_idle_heartbeat) {
    env_.store.abort(etx.tx);
    return Outcome::kRetry;
  }
  idle_ = !etx.has_work;
  etx.tx.put(tables::kJobMeta, meta_key_, etx.meta.encode());
  const Outcome outcome = commit(etx);
  if (outcome == Outcome::kCommitted) after_commit(etx);
  behind_ = outcome == Outcome::kCommitted && etx.has_work && etx.page_full;
  aligned_ = outcome == Outcome::kCommitted && etx.aligned;
  return outcome;
}

Job::Outcome Job::commit(EpochTx& etx) {
  std::vector<LeaseId> prerequisites;
  if (!env_.bugs.no_lease_prerequisite) prerequisites.push_back(lease_);
  if (env_.bugs.deliver_before_commit && sink_ != nullptr) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& [where, value] : etx.tx.writes()) {
      if (where.first == outbox_table_ && value) rows.emplace_back(where.second, *value);
    }
    delivery_->deliver_uncommitted(rows);
  }
  etx.record.job = id_;
  etx.record.node = env_.network.self();
  etx.record.lease = lease_;
  etx.record.layout_version = env_.spec.layout_version;
  etx.record.tx = etx.tx.id();
  etx.record.epoch = etx.meta.epoch;
  if (env_.options.record_history && computation_ != nullptr &&
      (!etx.record.consumed.empty() || !etx.record.timers_fired.empty())) {
    etx.tx.put(tables::history(computation_->name), prefix_ + tables::hex16(etx.meta.epoch), encode_history_row(etx.record));
  }
  if (env_.observer != nullptr) env_.observer->epoch_committing(etx.record);
  if (etx.has_work) fault_point(env_, "epoch.before_commit");
  auto result = env_.store.commit(etx.tx, prerequisites);
  Outcome outcome = Outcome::kRetry;
  if (result) {
    etx.record.version = *result;
    outcome = Outcome::kCommitted;
  } else if (result.error().is_prerequisite_failed()) {
    probe(env_, Probe::kEpochFenced);
    outcome = Outcome::kFenced;
  } else if (result.error().is_ambiguous()) {
    outcome = resolve_ambiguous(etx);
    probe(env_, outcome == Outcome::kCommitted ? Probe::kEpochAmbiguousCommitted : Probe::kEpochAmbiguousNotCommitted);
  } else {
    probe(env_, result.error().is_conflict() ? Probe::kEpochConflict : Probe::kEpochUnavailable);
    if (env_.observer != nullptr) {
      env_.observer->epoch_abandoned(id_, lease_, etx.meta.epoch,
                                     (result.error().is_conflict() ? "its commit conflicted (" : "the store was unavailable (") +
                                         result.error().message() + ")");
    }
  }
  if (outcome == Outcome::kCommitted && committed_epochs_++ == 0 && etx.meta.epoch > 1) {
    probe(env_, Probe::kEpochFirstOfIncarnation);
  }
  if (outcome == Outcome::kCommitted && env_.observer != nullptr) env_.observer->epoch_committed(etx.record);
  if (etx.has_work) fault_point(env_, "epoch.after_commit");
  return outcome;
}

Job::Outcome Job::resolve_ambiguous(EpochTx& etx) {
  if (env_.bugs.ambiguous_as_success) return Outcome::kCommitted;
  if (env_.bugs.ambiguous_as_failure) return Outcome::kRetry;
  return resolve_until_answered(env_, etx.tx.id(), &etx.record.version) ? Outcome::kCommitted : Outcome::kRetry;
}

void Job::after_commit(EpochTx& etx) {
  if (env_.wakeups != nullptr && !etx.streams_written.empty()) env_.wakeups->committed(env_.runtime, etx.streams_written);
  // Only a watermark that moved, and not by an idle epoch that a watermark began: two jobs of
  // a cycle (or the partitions of a job reading its own outputs), each waiting for a slow
  // third producer, would otherwise wake each other without end (a computation's watermark
  // follows its clock, so it moves on every epoch). A consumer waiting behind such an epoch
  // waits for the producer's next one, as without watermark wake-ups.
  if (env_.wakeups != nullptr && !watermark_outputs_.empty() && etx.meta.low_watermark != etx.watermark_before &&
      (etx.has_work || !epoch_by_watermark_)) {
    env_.wakeups->committed(env_.runtime, watermark_outputs_);
  }
  if (computation_ != nullptr && computation_->type == ComputationType::kSwiftMap) {
    pending_ack_.clear();
    pending_ack_.insert(etx.consumed_rows.begin(), etx.consumed_rows.end());
  }
  for (const auto& [table, key] : etx.timer_deletes_apart) {
    // The bug: the fired timer is deleted in a transaction of its own, after its result.
    auto tx = env_.store.begin();
    if (!tx) continue;
    tx->erase(table, key);
    (void)env_.store.commit(*tx, {lease_});
  }
  if (delivery_ == nullptr) return;
  delivery_->committed(std::move(etx.outbox));
  if (!etx.confirmed.empty()) {
    // The delivery callback: the target holds them, and this commit acknowledged them.
    if (env_.observer != nullptr) env_.observer->delivery_confirmed(id_, etx.confirmed, etx.record.version);
    delivery_->confirmed_up_to(etx.meta.acked_seqno);
  }
  if (!etx.amo_outputs.empty()) delivery_->queue_at_most_once(std::move(etx.amo_outputs));
  if (!etx.written_late.empty()) (void)delivery_->write_now(etx.written_late);
}

// --- Sources ---------------------------------------------------------------------------

void Job::step_source(EpochTx& etx) {
  // The bug: a swapped input is read from the offsets its predecessor left under the name.
  const std::string offset_key =
      fmt::format("{}/{}", env_.bugs.source_swap_keeps_offsets ? source_->name : origin_, id_.partition);
  uint64_t offset = 0;
  if (auto stored = etx.read(tables::kSourceOffsets, offset_key)) {
    Decoder in(*stored);
    offset = in.u64();
  }
  std::optional<Micros> cut;
  if (etx.meta.drain_cut != INT64_MIN) cut = etx.meta.drain_cut;
  if (cut && source_->type != "queue" && source_->type != "static_table") {
    // Draining: a source that stamps what it reads with the time of reading reads nothing
    // more; what it emits later is stamped no earlier than its watermark, so the cut and the
    // clock are watermarks as good.
    etx.meta.low_watermark = etx.meta.replay_watermark = std::max({etx.meta.low_watermark, *cut, etx.now});
    return;
  }
  if (ExternalSource* external = external_source()) {
    step_external_source(etx, *external, offset_key, offset);
    return;
  }
  if (source_->type == "service_log") {
    step_service_log(etx, offset_key);
    return;
  }
  // A queue, or a static table read by row ranges: the committed range end is the offset,
  // so a replayed epoch reads the same range again and a committed one never.
  const std::string table =
      source_->type == "static_table" ? tables::static_table(table_of(*source_)) : tables::queue(table_of(*source_));
  // Draining, one row more is looked at (not taken): the first row not taken gives the
  // watermark, so that it reaches the cut once every older row is taken.
  const auto limit = static_cast<size_t>(env_.spec.epoch_batch_limit);
  const auto rows = etx.scan(table, prefix_ + tables::hex16(offset), prefix_ + "~", limit + (cut ? 1 : 0));
  std::vector<Message> messages;
  messages.reserve(rows.size());
  for (const Row& row : rows) messages.push_back(decode_source_row(row.value));
  size_t take = std::min(rows.size(), limit);
  etx.page_full = rows.size() >= limit;
  while (cut && take > 0 && messages[take - 1].system_ts >= *cut) --take;  // the rows come in time order
  // A row's time (system and alignment) is its write time, but never below the watermark
  // already published, nor as old as the row before: rows read after a drain (which raised the
  // watermark, below) keep their order, and so do rows written at one time.
  Micros last_write = etx.meta.low_watermark;
  for (size_t i = 0; i < take; ++i) {
    Message& m = messages[i];
    m.id = source_message_id(origin_, id_.partition, offset);
    m.stream = source_->output_stream;
    m.system_ts = m.alignment_ts = std::max({m.alignment_ts, etx.meta.low_watermark, etx.meta.last_output_ts + 1});
    last_write = std::max(last_write, m.alignment_ts);
    emit(etx, std::move(m));
    ++offset;
    etx.has_work = true;
  }
  // Appends to a partition come in time order, so nothing older than the last row read, nor
  // than the first row not taken, can follow; once caught up, the queue's head time (nothing
  // older will be written) holds too.
  if (take < messages.size()) {
    last_write = std::max(last_write, messages[take].system_ts);
  } else if (rows.size() < limit) {
    probe(env_, Probe::kSourceCaughtUp);
    // A static table is written before the pipeline reads it: caught up is the end.
    if (source_->type == "static_table") etx.meta.progress.finished = true;
    if (auto head = etx.read(tables::kQueueHeads, fmt::format("{}/{}", table_of(*source_), id_.partition))) {
      Decoder in(*head);
      last_write = std::max(last_write, in.i64());
    }
  }
  etx.meta.low_watermark = etx.meta.replay_watermark = last_write;
  Encoder out;
  out.u64(offset);
  if (env_.bugs.offsets_before_commit && etx.has_work) {
    // The bug: the offset moves in its own transaction before the epoch's rows commit.
    auto tx = env_.store.begin();
    if (tx) {
      tx->put(tables::kSourceOffsets, offset_key, out.buffer());
      (void)env_.store.commit(*tx, {lease_});
    }
    return;
  }
  etx.tx.put(tables::kSourceOffsets, offset_key, out.take());
}

ExternalSource* Job::external_source() const {
  if (env_.connectors == nullptr || source_ == nullptr) return nullptr;
  auto it = env_.connectors->sources.find(source_->name);
  return it == env_.connectors->sources.end() ? nullptr : it->second;
}

ExternalSink* Job::external_sink() const {
  if (env_.connectors == nullptr || sink_ == nullptr) return nullptr;
  auto it = env_.connectors->sinks.find(sink_->name);
  return it == env_.connectors->sinks.end() ? nullptr : it->second;
}

// A source outside the store: its records' offsets are the ids' origin and the next offset
// is kept in the pipeline state, committed with the epoch. A record's own timestamp is its
// event time (another clock, perhaps another machine's); its alignment time is when this
// job read it, which never goes back, so once the source is caught up, "now" is a valid low
// watermark.
void Job::step_external_source(EpochTx& etx, ExternalSource& external, const std::string& offset_key,
                               uint64_t offset) {
  bool caught_up = false;
  auto records = external.read(id_.partition, offset, static_cast<size_t>(env_.spec.epoch_batch_limit), &caught_up);
  if (!records) {
    probe(env_, Probe::kSourceReadFailed);
    etx.failed = records.error();
    return;
  }
  Micros last = etx.meta.low_watermark;
  for (auto& record : *records) {
    Message m;
    m.key = record.key;
    m.payload = std::move(record.payload);
    m.event_ts = record.timestamp;
    m.system_ts = m.alignment_ts = std::max(etx.now, last);
    m.id = source_message_id(origin_, id_.partition, record.offset);
    m.stream = source_->output_stream;
    last = m.alignment_ts;
    emit(etx, std::move(m));
    offset = record.offset + 1;
    etx.has_work = true;
  }
  if (caught_up) {
    probe(env_, Probe::kSourceCaughtUp);
    last = std::max(last, etx.now);
  }
  etx.meta.low_watermark = etx.meta.replay_watermark = last;
  Encoder out;
  out.u64(offset);
  etx.tx.put(tables::kSourceOffsets, offset_key, out.take());
}

// A service log: this partition's rows of a sorted table, read in key order over and over;
// one pass is a cycle. The cursor (row, cycle) is in the pipeline state and moves with the
// epoch, so within a cycle each row is read exactly once; a row's MessageId names its cycle.
// A row's alignment time is when it was read (the table is re-read, so its write times
// would go back).
void Job::step_service_log(EpochTx& etx, const std::string& cursor_key) {
  uint64_t offset = 0;
  uint64_t cycle = 0;
  if (auto stored = etx.read(tables::kSourceOffsets, cursor_key)) {
    Decoder in(*stored);
    offset = in.u64();
    cycle = in.u64();
  }
  const auto max_cycles = static_cast<uint64_t>(source_->max_cycles);
  Micros last = etx.meta.low_watermark;
  const bool finished = max_cycles != 0 && cycle >= max_cycles;
  if (!finished) {
    const std::string& prefix = prefix_;
    const auto limit = static_cast<size_t>(env_.spec.epoch_batch_limit);
    const auto rows = etx.scan(tables::static_table(table_of(*source_)), prefix + tables::hex16(offset), prefix + "~", limit);
    for (const Row& row : rows) {
      Message m = decode_source_row(row.value);
      m.system_ts = m.alignment_ts = std::max(etx.now, last);
      m.id = source_message_id(origin_, id_.partition, service_log_offset(cycle, offset));
      m.stream = source_->output_stream;
      last = m.alignment_ts;
      emit(etx, std::move(m));
      ++offset;
      etx.has_work = true;
    }
    if (rows.size() < limit) {  // the end of the table: the next epoch starts the next cycle
      offset = 0;
      ++cycle;
      etx.has_work = true;
      last = std::max(last, etx.now);  // later rows are read later: nothing older will come
    }
  }
  if (max_cycles != 0 && cycle >= max_cycles) {
    last = std::max(last, etx.now);
    etx.meta.progress.finished = true;
  }
  etx.meta.low_watermark = etx.meta.replay_watermark = last;
  Encoder out;
  out.u64(offset).u64(cycle);
  etx.tx.put(tables::kSourceOffsets, cursor_key, out.take());
}

// --- Shared input handling ---------------------------------------------------------------

bool Job::read_inputs(EpochTx& etx, const std::vector<std::string>& streams, std::vector<Input>* rows,
                      Micros* unseen_from) {
  const std::string& prefix = prefix_;
  const auto limit = static_cast<size_t>(env_.spec.epoch_batch_limit);
  *unseen_from = kNoWatermark;
  for (const auto& stream : streams) {
    const std::string table = tables::stream(stream);
    // A row holds a producer epoch's messages, often many: rows are read a few at a time, more
    // each time (up to a page of rows), so that rows left unread are not read at all.
    size_t rows_wanted = 4;
    std::vector<Row> page = etx.scan(table, prefix, prefix + "~", rows_wanted);
    size_t used = 0;              // rows of the page taken in
    size_t fresh = 0;             // their messages, those a swift job processed already left out
    Micros least = kNoWatermark;  // the oldest of those
    const auto use = [&](Row& row) {
      auto messages = stream_rows::decode_row(table, row.key, row.value);
      if (!messages) {
        etx.failed = messages.error();
        return false;
      }
      const uint32_t read = etx.inputs.read(table + "\x1f" + row.key, std::move(row.value));
      for (Message& m : *messages) {
        rows->push_back({read, std::move(m)});
        if (!processed(etx, rows->back())) {
          ++fresh;
          least = std::min(least, rows->back().m.alignment_ts);
        }
      }
      return true;
    };
    // Whether a row is left to read (page[used]), reading on where the page ends.
    const auto more = [&] {
      if (used < page.size()) return true;
      if (page.size() < rows_wanted) return false;  // the page ended the table's rows
      const std::string after = page.back().key + '\0';
      rows_wanted = std::min(limit, 2 * rows_wanted);
      page = etx.scan(table, after, prefix + "~", rows_wanted);
      used = 0;
      return !page.empty();
    };
    // Rows are taken in key order until they hold a page of messages. A row left unread holds
    // nothing older than its key says (core/stream_rows.h), which may be older than what it
    // holds now: rows are taken on while their keys say no more than the oldest message
    // taken in, so that what comes first is known. Messages from the first unread row's time
    // on wait.
    while (fresh < limit && more()) {
      if (!use(page[used++])) return false;
    }
    Micros unread_from = kNoWatermark;
    while (more()) {
      const Micros next = stream_rows::least_ts(page[used].key);
      if (next > least) {
        unread_from = next;
        break;
      }
      if (!use(page[used++])) return false;
    }
    if (unread_from != kNoWatermark) {
      *unseen_from = std::min(*unseen_from, unread_from);
      etx.page_full = true;
    }
  }
  // In (alignment_ts, id) order, rows read earlier first among equals; an order of indexes is
  // sorted, so that each message moves once.
  std::vector<uint32_t> order(rows->size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [rows](uint32_t a, uint32_t b) {
    const Message& x = (*rows)[a].m;
    const Message& y = (*rows)[b].m;
    return x.alignment_ts != y.alignment_ts ? x.alignment_ts < y.alignment_ts : x.id < y.id;
  });
  std::vector<Input> sorted;
  sorted.reserve(rows->size());
  for (const uint32_t i : order) sorted.push_back(std::move((*rows)[i]));
  *rows = std::move(sorted);
  // Only messages older than any unread one are taken, in order; and at most a page of them
  // per input stream an epoch, rows holding many: the rest waits.
  const size_t most = limit * streams.size();
  const Micros unread_from = *unseen_from;
  size_t fresh = 0;
  size_t kept = 0;
  for (Input& in : *rows) {
    if (!processed(etx, in) && (in.m.alignment_ts >= unread_from || fresh++ >= most)) {
      if (fresh == most + 1) *unseen_from = std::min(*unseen_from, in.m.alignment_ts);
      etx.page_full = true;
      continue;
    }
    if (&in != &(*rows)[kept]) (*rows)[kept] = std::move(in);
    ++kept;
  }
  rows->resize(kept);
  return etx.failed.is_ok();
}

bool Job::processed(const EpochTx& etx, const Input& in) const {
  return !pending_ack_.empty() && pending_ack_.count(InputRef{etx.inputs.row(in.read), in.m.id}) != 0;
}

// The dedup table's rows as the current epoch sees them.
class Job::DedupRows final : public TableRows {
 public:
  DedupRows(EpochTx& etx, const std::string& table) : etx_(etx), table_(table) {}
  std::optional<std::string> read(const std::string& key) override { return etx_.read(table_, key); }
  void put(const std::string& key, std::string value) override { etx_.tx.put(table_, key, std::move(value)); }
  void erase(const std::string& key) override { etx_.tx.erase(table_, key); }
  std::vector<Row> scan(const std::string& from, const std::string& to, size_t limit) override {
    return etx_.scan(table_, from, to, limit);
  }

 private:
  EpochTx& etx_;
  const std::string& table_;
};

// The dedup rows the epoch will look at (those of the inputs it may take), in one read.
void Job::prefetch_dedup(EpochTx& etx, const std::vector<Input>& rows, Micros watermark) {
  std::vector<uint64_t> names;
  for (const auto& [read, m] : rows) {
    if (m.alignment_ts >= watermark) break;
    names.push_back(dedup_.row_of(m));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<std::string> keys;
  keys.reserve(names.size());
  for (const uint64_t name : names) keys.push_back(dedup_.row_key(name));
  etx.prefetch(dedup_table_, keys);
}

Micros Job::producers_watermark(EpochTx& etx, bool replay, Micros* take_below) {
  etx.prefetch(tables::kJobMeta, producer_metas_);
  Micros low = kNoWatermark;
  Micros bound = kNoWatermark;
  const bool own_clock = (computation_ == nullptr || computation_->type != ComputationType::kSwiftMap) &&
                         !env_.bugs.drain_waits_for_sources;
  for (size_t i = 0; i < producer_metas_.size(); ++i) {
    const auto meta = etx.read(tables::kJobMeta, producer_metas_[i]);
    if (!meta) {  // a producer that never committed may emit anything
      low = bound = INT64_MIN;
      break;
    }
    const Meta m = Meta::decode(*meta);
    const Micros w = replay ? m.replay_watermark : m.low_watermark;
    low = std::min(low, w);
    // Draining, a source that has taken every row older than the cut emits nothing more until
    // the pipeline works again (and clears the cut in this row). A job that stamps its outputs
    // with its own clock need not wait for it meanwhile, so another input (a later stage's
    // outputs, stamped with the clock) is taken and the drain ends. The source's own stamps are
    // untouched, so what it reads later keeps its order. A swift job stamps outputs with its
    // inputs' times and waits.
    const bool drained_source = source_producers_[i] && m.drain_cut != INT64_MIN && m.low_watermark >= m.drain_cut;
    if (!drained_source || !own_clock) bound = std::min(bound, w);
  }
  if (take_below != nullptr) *take_below = bound;
  return low;
}

// Removes input_messages rows no replay can need: a duplicate of a message can only come
// from a producer that may still re-emit it, and no producer will re-emit anything older
// than its replay watermark; or it has been re-emitted already and waits among the job's own
// inputs, which it has not taken from `backlog_from` on (a replay, older than the rows
// before it, can sort behind a full page).
Micros Job::dedup_forget_below(EpochTx& etx, Micros backlog_from) {
  if (env_.bugs.dedup_cleanup_ignores_backlog) backlog_from = kNoWatermark;
  return env_.bugs.dedup_cleanup_early ? kNoWatermark : std::min(producers_watermark(etx, true), backlog_from);
}

void Job::clean_dedup(EpochTx& etx, Micros backlog_from) {
  if (etx.meta.epoch % static_cast<uint64_t>(env_.options.dedup_cleanup_every_epochs) != 0) return;
  const Micros watermark = dedup_forget_below(etx, backlog_from);
  DedupRows rows(etx, dedup_table_);
  // Looking at more rows than were added since the last cleanup, a sweep always ends.
  const size_t budget = std::max<size_t>(env_.options.dedup_cleanup_rows, 2 * dedup_recorded_);
  size_t forgotten = 0;
  const bool went_on = !etx.meta.dedup_cursor.empty();
  etx.meta.dedup_cursor = dedup_.cleanup(rows, watermark, budget, etx.meta.dedup_cursor, &forgotten);
  if (forgotten > 0) probe(env_, Probe::kDedupCleanupForgot);
  if (went_on && etx.meta.dedup_cursor.empty()) probe(env_, Probe::kDedupCleanupWrapped);
  dedup_recorded_ = 0;
}

Micros Job::next_output_ts(EpochTx& etx) {
  // Strictly increasing per job, across restarts and clock jumps, so that the order of a
  // job's outputs is the order they were made in.
  etx.meta.last_output_ts = std::max(etx.now, etx.meta.last_output_ts + 1);
  return etx.meta.last_output_ts;
}

void Job::emit(EpochTx& etx, Message m) {
  if (source_ != nullptr) etx.meta.last_output_ts = std::max(etx.meta.last_output_ts, m.alignment_ts);
  const Consumer& consumer = consumers_.at(m.stream);
  if (consumer.partitions != 0) {  // else nothing reads this stream
    const int partition = key_partition(m.key, consumer.partitions);
    etx.stream_out.add(consumer.table, partition, m);
  }
  etx.record.produced.push_back(std::move(m));
}

// --- Computations ---------------------------------------------------------------------------

void Job::step_computation(EpochTx& etx) {
  const ComputationSpec& spec = *computation_;
  const bool swift = spec.type == ComputationType::kSwiftMap;
  const bool dedup = spec.processing_mode == ProcessingMode::kExactlyOnce && !swift && !env_.bugs.no_input_dedup;
  std::vector<Input> rows;
  Micros unseen_from = kNoWatermark;
  if (!read_inputs(etx, spec.input_streams, &rows, &unseen_from)) return;

  // Swift: acknowledge what the previous committed epoch processed.
  if (!pending_ack_.empty()) probe(env_, Probe::kSwiftAcknowledge);
  for (const InputRef& ref : pending_ack_) etx.inputs.take(ref);
  Context context(etx.now, function_random());
  // Alignment: only messages older than every producer's watermark are taken, so a message
  // that arrives late can never be older than one already processed.
  Micros take_below = INT64_MIN;  // the alignment bound: messages older than it are taken
  const Micros input_watermark = producers_watermark(etx, false, &take_below);
  if (dedup) prefetch_dedup(etx, rows, take_below);
  if (!spec.timer_streams.empty()) {
    // All of the partition's timers, usually: then adding and firing them needs no reads.
    const std::string& prefix = prefix_;
    if (!etx.prefetch_range(timers_table_, prefix, prefix + "~", env_.options.timer_rows_known)) probe(env_, Probe::kTimerReadAheadFull);
  }
  prefetch_state(etx, rows, take_below);
  Micros first_unacked = unseen_from;      // oldest input that may still be recomputed
  Micros first_unprocessed = unseen_from;  // oldest input not yet processed
  OutputBatches batches;  // swift batching with relaxed guarantees
  DedupRows dedup_rows(etx, dedup_table_);
  DedupTable::Batch seen(dedup_, dedup_rows);

  for (Input& in : rows) {
    Message& m = in.m;
    if (processed(etx, in)) continue;
    first_unacked = std::min(first_unacked, m.system_ts);
    if (m.alignment_ts >= take_below) {
      first_unprocessed = std::min(first_unprocessed, m.system_ts);
      probe(env_, Probe::kAlignmentWait);
      etx.aligned = true;
      break;
    }
    etx.has_work = true;
    if (dedup && !seen.record_if_new(m)) {
      etx.inputs.take(in.read, m.id);
      probe(env_, Probe::kInputDedupHit);
      if (env_.observer != nullptr) env_.observer->duplicate_dropped(id_, m);
      continue;
    }
    // A restored swift job takes inputs its predecessor may have processed: they were not
    // acknowledged.
    if (swift && committed_epochs_ == 0 && etx.meta.epoch > 1) probe(env_, Probe::kSwiftRecompute);
    CollectingOutput out(spec, m.key, m.event_ts);
    {
      const UserCall call = user_call(etx, m.id, m.key, false);
      const user_code::CallScope scope(call);
      function_->process_message(m, out, context);
    }
    if (!etx.failed.is_ok() || misused(etx, out)) return;
    etx.meta.event_watermark = std::max(etx.meta.event_watermark, m.event_ts);
    if (swift) {
      etx.consumed_rows.push_back({etx.inputs.row(in.read), m.id});
    } else {
      etx.inputs.take(in.read, m.id);
    }
    for (uint32_t i = 0; i < out.messages.size(); ++i) {
      if (swift && spec.allow_batching_with_relaxed_guarantees) {
        batches.add(m, std::move(out.messages[i]));
        continue;
      }
      Message child = message_output(m, std::move(out.messages[i]), i);
      child.system_ts = child.alignment_ts = swift ? m.system_ts : next_output_ts(etx);
      emit(etx, std::move(child));
    }
    for (uint32_t i = 0; i < out.timers.size(); ++i) add_timer(etx, out.timers[i], message_timer_unique(m, i));
    etx.record.consumed.push_back(std::move(m));
  }
  // Rows the epoch rewrites anyway forget what a cleanup now would.
  dedup_recorded_ += dedup ? seen.flush(dedup_forget_below(etx, first_unprocessed)) : seen.flush();
  // Batching: one message per (stream, key) group of up to batch_size inputs.
  if (swift && spec.allow_batching_with_relaxed_guarantees) {
    for (Message& batch : batches.take(spec.batch_size)) emit(etx, std::move(batch));
  }
  // No timer fires while the pipeline drains (core/controller.h): a drain must end.
  if (etx.meta.drain_cut == INT64_MIN) fire_timers(etx);
  if (dedup) clean_dedup(etx, first_unprocessed);
  // The low watermark of what this job may still emit. A swift job re-emits what it has not
  // acknowledged, with its inputs' timestamps; a regular job never re-emits, and stamps
  // whatever it emits next above its last output.
  if (swift) {
    // New outputs inherit their inputs' times; re-emissions after a restart are repeats of
    // what was emitted already, which consumers drop by MessageId.
    // A stage above may replay too (a swift producer re-emits what it has not acknowledged),
    // and this one then re-emits what it derives from the repeats.
    const Micros upstream_replay = env_.bugs.swift_replay_own_watermark ? kNoWatermark : producers_watermark(etx, true);
    etx.meta.low_watermark = std::max(etx.meta.low_watermark, std::min(first_unprocessed, input_watermark));
    etx.meta.replay_watermark =
        std::max(etx.meta.replay_watermark, std::min({first_unacked, input_watermark, upstream_replay}));
  } else {
    etx.meta.last_output_ts = std::max(etx.meta.last_output_ts, etx.now);
    etx.meta.low_watermark = etx.meta.replay_watermark = etx.meta.last_output_ts + 1;
  }
}

// A call of the function its spec does not allow fails the epoch, and is reported.
bool Job::misused(EpochTx& etx, const CollectingOutput& out) {
  if (out.misuse.empty()) return false;
  etx.failed = Status::invalid_argument(fmt::format("computation {}: {}", computation_->name, out.misuse));
  if (env_.observer != nullptr) env_.observer->computation_misuse(computation_->name, out.misuse);
  return true;
}

// How far the timers of `timer_stream` are due: its watermark, the event time seen so far or
// the system time.
Micros Job::timer_watermark(const std::string& timer_stream, Micros event_watermark, Micros now) const {
  for (const auto& s : computation_->timer_streams) {
    if (s.name == timer_stream) return s.watermark == Watermark::kEventTime ? event_watermark : now;
  }
  assert(false && "a timer of an undeclared timer stream");
  return now;
}

// A timer is due once its stream's watermark has reached its trigger.
bool Job::due(const Timer& t, Micros event_watermark, Micros now) const {
  const Micros watermark = timer_watermark(t.timer_stream, event_watermark, now);
  if (env_.bugs.timer_fires_after_watermark) return t.trigger_ts < watermark;  // the bug: one past it
  return t.trigger_ts <= watermark;
}

// The state rows of the keys the epoch will process (its inputs' and its due timers'), one
// read per state table.
void Job::prefetch_state(EpochTx& etx, const std::vector<Input>& rows, Micros watermark) {
  if (state_tables_.empty()) return;
  std::vector<uint64_t> keys;
  Micros event_watermark = etx.meta.event_watermark;
  for (const Input& in : rows) {
    const Message& m = in.m;
    if (m.alignment_ts >= watermark) break;
    if (processed(etx, in)) continue;
    keys.push_back(m.key);
    event_watermark = std::max(event_watermark, m.event_ts);
  }
  if (!computation_->timer_streams.empty()) {
    const std::string& prefix = prefix_;
    for (const Row& row : etx.scan(timers_table_, prefix, prefix + "~", env_.options.timers_per_epoch)) {
      const std::string_view rest = std::string_view(row.key).substr(prefix.size());
      const Timer t = decode_timer(rest, decode_timer_value(row.value));
      if (due(t, event_watermark, etx.now)) keys.push_back(t.key);
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::string> hex;
  hex.reserve(keys.size());
  for (uint64_t key : keys) hex.push_back(tables::hex16(key));
  for (const std::string& table : state_tables_) etx.prefetch(table, hex);
}

// Stores a timer: rows are keyed by (trigger, key, stream), so with
// deduplicate_equal_timestamps (the default) equal triggers of one key merge into one row
// keeping the smallest event time; without it each timer gets a row of its own.
void Job::add_timer(EpochTx& etx, const Timer& t, uint64_t unique) {
  const ComputationSpec& spec = *computation_;
  const TimerStreamSpec* stream = nullptr;
  for (const auto& s : spec.timer_streams) {
    if (s.name == t.timer_stream) stream = &s;
  }
  assert(stream != nullptr);
  const std::string key = prefix_ + timer_row(t, stream->deduplicate_equal_timestamps, unique);
  std::optional<TimerValue> existing;
  if (const auto row = etx.read(timers_table_, key)) {
    probe(env_, Probe::kTimerMerged);
    existing = decode_timer_value(*row);
  } else {
    etx.record.timer_rows_created.push_back(timers_table_ + ":" + key);
  }
  const std::optional<TimerValue> value = timer_after_add(existing, t.event_ts, unique);
  if (value) etx.tx.put(timers_table_, key, encode_timer_value(*value));
}

void Job::fire_timers(EpochTx& etx) {
  const ComputationSpec& spec = *computation_;
  if (spec.timer_streams.empty()) return;
  const std::string& prefix = prefix_;
  Context context(etx.now, function_random());
  for (const Row& row : etx.scan(timers_table_, prefix, prefix + "~", env_.options.timers_per_epoch)) {
    const std::string rest = row.key.substr(prefix.size());
    const TimerValue value = decode_timer_value(row.value);
    const Timer t = decode_timer(rest, value);
    if (!due(t, etx.meta.event_watermark, etx.now)) continue;
    const std::string firing = timer_firing(rest, value.creation);  // this timer, this creation
    etx.has_work = true;
    CollectingOutput out(spec, t.key, t.event_ts);
    {
      const UserCall call = user_call(etx, 0, t.key, true);
      const user_code::CallScope scope(call);
      function_->process_timer(t, out, context);
    }
    if (!etx.failed.is_ok() || misused(etx, out)) return;
    probe(env_, committed_epochs_ == 0 && etx.meta.epoch > 1 ? Probe::kTimerFiredAfterRestart : Probe::kTimerFired);
    etx.record.timers_fired.push_back({rest, value.creation, t, etx.record.consumed.size(),
                                       timer_watermark(t.timer_stream, etx.meta.event_watermark, etx.now)});
    etx.record.timer_rows_fired.push_back(timers_table_ + ":" + row.key);
    if (env_.bugs.timer_delete_apart) {
      etx.timer_deletes_apart.emplace_back(timers_table_, row.key);
    } else {
      etx.tx.erase(timers_table_, row.key);
    }
    // The bug: outputs named by the key, stream and event time, which a repeating timer's
    // firings share.
    const std::string named = env_.bugs.timer_output_id_by_event_time
                                  ? fmt::format("{:016x}/{}/{}", t.key, t.timer_stream, t.event_ts)
                                  : firing;
    for (uint32_t i = 0; i < out.messages.size(); ++i) {
      Message child = timer_output(spec.name, named, t, std::move(out.messages[i]), i);
      child.system_ts = child.alignment_ts = next_output_ts(etx);
      emit(etx, std::move(child));
    }
    for (uint32_t i = 0; i < out.timers.size(); ++i) add_timer(etx, out.timers[i], timer_timer_unique(spec.name, firing, i));
  }
}

// --- Sinks -----------------------------------------------------------------------------------

void Job::step_sink(EpochTx& etx) {
  const SinkSpec& spec = *sink_;
  const bool amo = spec.at_most_once_strategy.enabled;
  // An at-least-once queue sink keeps no input dedup: a repeat is delivered again.
  const bool alo_queue = spec.type == SinkType::kAsyncQueue && spec.delivery_guarantee == SinkDelivery::kAtLeastOnce;
  const bool dedup = !amo && !alo_queue && !env_.bugs.no_input_dedup;
  const std::string& prefix = prefix_;
  // Outbox rows delivered since the last epoch are acknowledged now.
  const bool write_now = writes_before_commit(spec);
  std::vector<Message> written_now;
  if (spec.type != SinkType::kSyncQueue && !amo && !write_now) {
    const uint64_t acked =
        delivery_->acknowledge(etx.tx, etx.meta.acked_seqno, etx.meta.next_seqno - 1, &etx.confirmed, &etx.outbox);
    if (acked > etx.meta.acked_seqno) probe(env_, Probe::kOutboxAcknowledged);
    etx.meta.acked_seqno = acked;
  }
  const uint64_t first_seqno = etx.meta.next_seqno;
  delivery_->incarnation_starts_at(first_seqno);  // earlier seqNos are an earlier incarnation's
  OutboxRowWriter outbox;  // the epoch's outputs, one row (or one per message)
  const bool row_per_message = outbox_row_per_message(spec);
  const bool batched = batched_outbox(spec);
  uint64_t row_first = first_seqno;  // the first seqNo of the outbox row being filled
  const auto batch_block = static_cast<uint64_t>(std::max(1, spec.max_batch_messages));
  // Writes the row being filled (up to seqNo `last`) and starts the next one after it.
  const auto close_row = [&](uint64_t last) {
    Delivery::EpochOutbox::Written& row = etx.outbox.written.emplace_back();
    row.first = row_first;
    etx.tx.put(outbox_table_, prefix + tables::hex16(row_first), outbox.take(&row.messages));
    row_first = last + 1;
  };
  std::vector<Input> rows;
  Micros unseen_from = kNoWatermark;
  if (!read_inputs(etx, {spec.input_stream}, &rows, &unseen_from)) return;
  Micros take_below = INT64_MIN;
  (void)producers_watermark(etx, false, &take_below);
  if (dedup) prefetch_dedup(etx, rows, take_below);
  Micros backlog_from = unseen_from;  // the oldest input left for later
  DedupRows dedup_rows(etx, dedup_table_);
  DedupTable::Batch seen(dedup_, dedup_rows);
  for (auto& [read, m] : rows) {
    if (m.alignment_ts >= take_below) {
      backlog_from = std::min(backlog_from, m.system_ts);
      probe(env_, Probe::kAlignmentWait);
      etx.aligned = true;
      break;
    }
    etx.has_work = true;
    etx.inputs.take(read, m.id);
    if (dedup && !seen.record_if_new(m)) {
      probe(env_, Probe::kSinkDedupHit);
      if (env_.observer != nullptr) env_.observer->duplicate_dropped(id_, m);
      continue;
    }
    etx.record.consumed.push_back(m);
    if (amo) {
      etx.amo_outputs.push_back(std::move(m));
    } else if (spec.type == SinkType::kSyncQueue) {
      etx.tx.put(tables::sync_sink(spec.name), prefix + tables::hex16(etx.meta.sink_offset++), encode_message(m));
    } else if (write_now) {
      written_now.push_back(std::move(m));
    } else {
      outbox.add(std::move(m));
      const uint64_t seqno = etx.meta.next_seqno++;
      if (row_per_message) etx.tx.put(outbox_table_, prefix + tables::hex16(seqno), outbox.take());
      // A batching sink's batch is a row of its own, cut here at every max_batch_messages-th
      // seqNo (and at the epoch's end, below): once committed the cut never moves, whatever
      // limit a later incarnation runs with, so a batch sent again is the same batch, under
      // the same token.
      if (batched && seqno % batch_block == 0) close_row(seqno);
    }
  }
  if (outbox.messages() > 0) close_row(etx.meta.next_seqno - 1);
  dedup_recorded_ += dedup ? seen.flush(dedup_forget_below(etx, backlog_from)) : seen.flush();
  if (dedup) clean_dedup(etx, backlog_from);
  if (amo) {  // what a drain waits for: held in memory now, or queued once this epoch commits
    etx.meta.progress.amo_pending = delivery_->at_most_once_pending() + etx.amo_outputs.size();
  }
  if (!written_now.empty()) {
    // Acknowledged before the epoch commits; if the commit then fails, they go again.
    if (alo_queue && env_.bugs.alo_write_after_commit) {
      etx.written_late = std::move(written_now);  // the bug: written once the inputs are gone
      return;
    }
    ExternalSink* external = external_sink();
    const Status written = external != nullptr ? external->write_now(id_.str(), lease_, written_now)
                           : alo_queue         ? delivery_->write_now(written_now)
                                               : Status::invalid_argument("no connector for sink " + spec.name);
    if (!written.is_ok()) {
      probe(env_, Probe::kSyncWriteFailed);
      etx.failed = written;
      return;
    }
    fault_point(env_, "sink.after_external_write");
  }
}

}  // namespace onceflow
