// What every job that reads streams shares: reading its inputs, their dedup and its cleanup,
// the producers' watermarks, emitting.
#include "core/job_parts.h"

namespace onceflow {

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

void Job::publish_taken(EpochTx& etx, Micros taken_below, Micros takes_below) {
  if (env_.spec.max_in_flight <= 0) return;  // the row keeps its old bytes
  etx.meta.taken_below = taken_below;
  etx.meta.takes_below = takes_below;
}

// A consumer partition publishes, in its meta row, the time below which it has taken every
// input (Meta::taken_below): a row this job put with nothing as new as that was taken whole.
// The rest may still be there (in part, or whole), and the job is held while what of it the
// consumer could take reaches the bound. Not counted, as it waits for something else than
// the consumer:
// - what is as new as this job's own watermark: no consumer takes it before this job's next
//   epoch (a swift job's watermark is its oldest input not taken, which holding keeps);
// - for a job that stamps its outputs with its own clock (a computation, not swift; a source
//   outside the store: Kafka, a service log), what the consumer could not take at its last
//   epoch (Meta::takes_below): it waits for another partition's watermark, which follows
//   that one's clock, and holding this job would only slow it to the clocks' skew.
// A queue source's or a swift job's stamps are the input's times: what waits for another producer's
// watermark waits for that one to read on, and counts. So the count is close, not exact: a
// row taken in part counts whole, and a new incarnation starts with none.
// One meta row read per consumer partition at the bound (or once its ledger is long), none
// below it.
bool Job::holds_back(EpochTx& etx) {
  constexpr size_t kLongLedger = 4096;  // rows: past this the ledger is pruned below the bound too
  const int64_t bound = env_.spec.max_in_flight;
  if (bound <= 0) return false;
  const bool own_clock = computation_ != nullptr ? computation_->type != ComputationType::kSwiftMap
                                                 : source_ != nullptr && stamps_on_read(*source_);
  for (auto& [where, untaken] : untaken_) {
    if (untaken.rows.messages() < static_cast<uint64_t>(bound) && untaken.rows.rows() < kLongLedger) continue;
    const auto row = etx.read(tables::kJobMeta, untaken.consumer_meta);
    if (!etx.failed.is_ok()) return false;  // the epoch is abandoned anyway
    if (!row) continue;  // the consumer has not committed yet
    const Meta consumer = Meta::decode(*row);
    untaken.rows.taken_below(consumer.taken_below);
    // What waits for the consumer.
    const uint64_t waiting = untaken.rows.older_than(
        own_clock ? std::min(etx.watermark_before, consumer.takes_below) : etx.watermark_before);
    if (waiting >= static_cast<uint64_t>(bound)) {
      probe(env_, source_ != nullptr ? Probe::kSourceHeldBack : Probe::kComputationHeldBack);
      return true;
    }
  }
  return false;
}

}  // namespace onceflow
