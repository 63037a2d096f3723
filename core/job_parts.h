// The parts of a Job that its files share (core/job.cc, job_meta.cc, job_sources.cc,
// job_inputs.cc, job_computation.cc, job_sink.cc): the job's own row (Meta), an epoch's
// transaction (EpochTx) and what user code and the dedup table see of it. Included by those
// files only.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <utility>

#include "core/delivery.h"
#include "core/emitted.h"
#include "core/env/codec.h"
#include "core/job.h"
#include "core/reexecute.h"
#include "core/user_code.h"

namespace onceflow {

// The consumer of `stream` (core/job.h); nullopt when nothing reads it.
inline std::optional<StreamConsumer> consumer_of(const PipelineSpec& spec, const std::string& stream) {
  for (const auto& c : spec.computations) {
    if (std::find(c.input_streams.begin(), c.input_streams.end(), stream) != c.input_streams.end()) {
      return StreamConsumer{JobKind::kComputation, c.name, c.partitions};
    }
  }
  for (const auto& s : spec.sinks) {
    if (s.input_stream == stream) return StreamConsumer{JobKind::kSink, s.name, s.partitions};
  }
  return std::nullopt;
}

// The jobs that write into `stream`: all partitions of its producer.
inline std::vector<JobId> producers(const PipelineSpec& spec, const std::string& stream) {
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

// Whether messages written into `stream` can come back into an input of `c` (a cycle through
// it, as the headline's StateKeeper and RequestProcessor): backpressure along such a stream
// could hold both ends of the cycle at once, so it presses only along the others.
inline bool feeds_back(const PipelineSpec& spec, const std::string& stream, const ComputationSpec& c) {
  std::vector<std::string> todo{stream};
  std::set<std::string> seen{stream};
  while (!todo.empty()) {
    const std::string s = std::move(todo.back());
    todo.pop_back();
    if (std::find(c.input_streams.begin(), c.input_streams.end(), s) != c.input_streams.end()) return true;
    for (const auto& d : spec.computations) {
      if (std::find(d.input_streams.begin(), d.input_streams.end(), s) == d.input_streams.end()) continue;
      for (const auto& out : d.output_streams) {
        if (seen.insert(out).second) todo.push_back(out);
      }
    }
  }
  return false;
}

inline constexpr Micros kNoWatermark = INT64_MAX;

// A queue or static table row: key, payload, event time, write time (the system time).
inline Message decode_source_row(std::string_view value) {
  Decoder in(value);
  Message m;
  m.key = in.u64();
  m.payload = in.string();
  m.event_ts = in.i64();
  m.system_ts = m.alignment_ts = in.i64();
  assert(in.done());
  return m;
}

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
  // Computations and sinks under backpressure (spec.max_in_flight), what their producers'
  // holds_back reads: every input of the partition older than `taken_below` was taken, and
  // the last epoch could take inputs older than `takes_below` (its producers' watermarks);
  // newer ones wait for a watermark, not for the job. INT64_MIN: not kept (and not written,
  // so that rows without backpressure stay as they were).
  Micros taken_below = INT64_MIN;
  Micros takes_below = INT64_MIN;

  std::string encode() const {
    Encoder out;
    out.u64(epoch).i64(last_output_ts).i64(low_watermark).i64(event_watermark);
    out.u64(next_seqno).u64(acked_seqno).u64(sink_offset).i64(replay_watermark).bytes(dedup_cursor);
    out.u64(progress.amo_pending).u64(progress.finished ? 1 : 0).i64(drain_cut);
    if (taken_below != INT64_MIN) out.i64(taken_below).i64(takes_below);
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
    if (!in.done()) {
      m.taken_below = in.i64();
      m.takes_below = in.i64();
    }
    assert(in.done());
    return m;
  }
};

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

  // A row read once answers the same for the rest of the epoch, even after another read failed
  // (the epoch is given up then, and a row not read yet answers "no such row").
  std::optional<std::string> read(const std::string& table, const std::string& key) {
    if (const auto* own = tx.buffered(table, key)) return *own;
    if (auto it = prefetched_.find(Transaction::TableKey{table, key}); it != prefetched_.end()) return it->second;
    if (const KnownRange* range = known(table, key)) {
      auto row = std::lower_bound(range->rows.begin(), range->rows.end(), key,
                                  [](const Row& r, const std::string& k) { return r.key < k; });
      if (row != range->rows.end() && row->key == key) return row->value;
      return std::nullopt;
    }
    if (!failed.is_ok()) return std::nullopt;
    auto r = store_.get(tx, table, key);
    if (!r) {
      failed = r.error();
      return std::nullopt;
    }
    prefetched_.emplace(std::pair<std::string, std::string>(table, key), *r);
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
  bool threw = false;  // `failed` says what the computation's function threw
  bool has_work = false;
  bool page_full = false;  // an input read returned a whole page: more may be waiting
  bool aligned = false;    // an input was left for later, newer than a producer's watermark
  Micros watermark_before = 0;  // the job's low watermark as the epoch began
  EngineObserver::Epoch record;
  bool observed = false;  // an observer reads `record`: state reads are recorded too
  std::map<uint32_t, uint32_t> buggify_calls;  // ONCEFLOW_BUGGIFY calls so far, per site (core/user_code.h)
  std::set<std::pair<std::string, uint64_t>> state_read;  // (table, key) in record.state_reads
  StreamWrites stream_out;                   // what the epoch emits into streams
  std::vector<StreamWrites::Written> streams_written;  // the stream rows it put
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

}  // namespace onceflow
