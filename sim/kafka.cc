#include "sim/kafka.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <charconv>

#include "core/engine.h"
#include "core/env/codec.h"

namespace onceflow::sim {

namespace {

constexpr const char* kInitProducerService = "kafka.init_producer";
constexpr const char* kProduceService = "kafka.produce";
constexpr const char* kEndTxnService = "kafka.end_txn";
constexpr const char* kFetchService = "kafka.fetch";
constexpr Micros kTimeoutCheckUs = 500 * kMillis;
constexpr int kProduceAttempts = 3;  // a timed-out batch is retried under the same sequence

using TopicPartition = std::pair<std::string, int>;

void encode_record(Encoder& out, const KafkaRecord& r) {
  out.bytes(r.key).bytes(r.value).i64(r.timestamp).bytes(r.writer).u64(r.lease);
}

KafkaRecord decode_record(Decoder& in) {
  KafkaRecord r;
  r.key = in.string();
  r.value = in.string();
  r.timestamp = in.i64();
  r.writer = in.string();
  r.lease = in.u64();
  return r;
}

}  // namespace

// --- The brokers' state --------------------------------------------------------------------------

void KafkaData::create_topic(const std::string& topic, int partitions) {
  auto& parts = topics[topic];
  if (parts.size() < static_cast<size_t>(partitions)) parts.resize(static_cast<size_t>(partitions));
}

bool KafkaData::has_partition(const std::string& topic, int partition) const {
  auto it = topics.find(topic);
  return it != topics.end() && partition >= 0 && static_cast<size_t>(partition) < it->second.size();
}

int64_t KafkaData::append(const std::string& topic, int partition, KafkaRecord record, Micros now) {
  assert(has_partition(topic, partition));
  auto& log = topics[topic][static_cast<size_t>(partition)].log;
  const auto offset = static_cast<int64_t>(log.size());
  log.push_back(std::move(record));
  if (log.back().state == KafkaRecord::State::kPlain && on_visible) on_visible(topic, partition, offset, log.back(), now);
  return offset;
}

void KafkaData::end_transaction(uint64_t producer, bool commit, Micros now, uint64_t txn) {
  auto it = producers.find(producer);
  if (it == producers.end()) return;
  Producer& p = it->second;
  for (const auto& [tp, offset] : p.open) {
    KafkaRecord& r = topics[tp.first][static_cast<size_t>(tp.second)].log[static_cast<size_t>(offset)];
    r.state = commit ? KafkaRecord::State::kCommitted : KafkaRecord::State::kAborted;
    if (commit) {
      r.committed_epoch = p.epoch;
      r.committed_txn = txn;
    }
    if (commit && on_visible) on_visible(tp.first, tp.second, offset, r, now);
  }
  p.open.clear();
  p.transaction_started_at = -1;
}

int KafkaData::abort_expired_transactions(Micros now) {
  int aborted = 0;
  for (auto& [id, p] : producers) {
    if (p.transaction_started_at < 0 || now - p.transaction_started_at < transaction_timeout_us) continue;
    end_transaction(id, false, now);
    // As the coordinator does: the epoch moves on, so the producer that let it time out is
    // fenced and cannot carry on as if its aborted records were still there.
    ++p.epoch;
    p.next_sequence.clear();
    ++aborted;
  }
  return aborted;
}

void KafkaData::forget_idempotent_state() {
  for (auto& [id, p] : producers) {
    if (p.transactional_id.empty()) p.next_sequence.clear();
  }
}

void KafkaData::delete_records(const std::string& topic) {
  for (Partition& p : topics[topic]) p.start = static_cast<int64_t>(p.log.size());
}

KafkaData::Fetched KafkaData::fetch(const std::string& topic, int partition, int64_t offset, size_t limit,
                                    bool read_committed) const {
  Fetched out;
  const Partition& part = topics.at(topic)[static_cast<size_t>(partition)];
  int64_t at = std::max(offset, part.start);
  const auto end = static_cast<int64_t>(part.log.size());
  for (; at < end && out.records.size() < limit; ++at) {
    const KafkaRecord& r = part.log[static_cast<size_t>(at)];
    if (read_committed && r.state == KafkaRecord::State::kOpen) break;  // the last stable offset
    if (read_committed && r.state == KafkaRecord::State::kAborted) continue;
    out.records.emplace_back(at, &r);
  }
  out.next_offset = at;
  out.caught_up = at == end || (read_committed && part.log[static_cast<size_t>(at)].state == KafkaRecord::State::kOpen);
  return out;
}

// --- The broker node -----------------------------------------------------------------------------

namespace {

// Validates a producer's id and epoch; kAborted when it was fenced.
Result<KafkaData::Producer*> current_producer(KafkaData& data, uint64_t id, uint32_t epoch, bool check_epoch = true) {
  auto it = data.producers.find(id);
  if (it == data.producers.end()) return Status::aborted("UNKNOWN_PRODUCER_ID");
  if (check_epoch && epoch < it->second.epoch) return Status::aborted("PRODUCER_FENCED: a newer producer has the transactional.id");
  return &it->second;
}

Result<std::string> init_producer(KafkaData& data, World& world, NodeIndex self, std::string_view request) {
  Decoder in(request);
  const std::string transactional_id = in.string();
  if (!in.done()) return Status::invalid_argument("malformed InitProducerId");
  uint64_t id = 0;
  if (!transactional_id.empty()) {
    auto [it, fresh] = data.transactional_ids.try_emplace(transactional_id, data.next_producer_id);
    if (fresh) ++data.next_producer_id;
    id = it->second;
    KafkaData::Producer& p = data.producers[id];
    if (!fresh) {
      if (!p.open.empty()) {
        world.detail(self, fmt::format("fences {} (epoch {}): aborts its open transaction", transactional_id, p.epoch));
      }
      data.end_transaction(id, false, world.now());
      if (!data.init_keeps_epoch) ++p.epoch;
    }
    p.transactional_id = transactional_id;
    p.next_sequence.clear();
  } else {
    id = data.next_producer_id++;
    data.producers[id];
  }
  Encoder out;
  out.u64(id).u64(data.producers[id].epoch);
  return out.take();
}

Result<std::string> produce(KafkaData& data, World& world, NodeIndex self, std::string_view request) {
  Decoder in(request);
  const uint64_t id = in.u64();
  const auto epoch = static_cast<uint32_t>(in.u64());
  const bool transactional = in.u64() != 0;
  const std::string topic = in.string();
  const int partition = static_cast<int>(in.i64());
  const int64_t base_sequence = in.i64();
  const uint64_t txn = in.u64();  // ghost
  const uint64_t count = in.u64();
  std::vector<KafkaRecord> records;
  for (uint64_t i = 0; i < count; ++i) records.push_back(decode_record(in));
  if (!in.done()) return Status::invalid_argument("malformed Produce");
  if (!data.has_partition(topic, partition)) {
    return Status::invalid_argument(fmt::format("UNKNOWN_TOPIC_OR_PARTITION {}/{}", topic, partition));
  }
  const TopicPartition tp{topic, partition};
  auto producer = current_producer(data, id, epoch, !data.fence_by_partition);
  if (!producer) return producer.error();
  KafkaData::Producer& p = **producer;
  if (data.fence_by_partition) {  // the bug: only a partition a newer epoch wrote is fenced
    uint32_t& newest = p.partition_epoch[tp];
    if (epoch < newest) return Status::aborted("PRODUCER_FENCED: a newer producer wrote this partition");
    if (epoch < p.epoch) {
      world.detail(self, fmt::format("appends a fenced producer's records (epoch {} < {}) to {}/{}", epoch, p.epoch,
                                     topic, partition));
    }
    if (epoch > newest) p.next_sequence.erase(tp);  // a partition's sequences are per epoch
    newest = epoch;
  }
  if (transactional && p.transactional_id.empty()) return Status::invalid_argument("not a transactional producer");
  auto [next, fresh] = p.next_sequence.try_emplace(tp, 0);
  if (fresh && base_sequence != 0 && p.transactional_id.empty()) {
    // The broker forgot this producer's sequence state: it cannot tell a retry from a gap.
    return Status::aborted("UNKNOWN_PRODUCER_ID: sequence state expired");
  }
  if (base_sequence + static_cast<int64_t>(count) <= next->second) {
    world.detail(self, fmt::format("acknowledges a retried batch of producer {} on {}/{} (seq {})", id, topic,
                                   partition, base_sequence));
    return std::string("duplicate");
  }
  if (base_sequence != next->second) {
    return Status::aborted(fmt::format("OUT_OF_ORDER_SEQUENCE_NUMBER: expected {}, got {}", next->second, base_sequence));
  }
  next->second += static_cast<int64_t>(count);
  if (transactional && p.transaction_started_at < 0) p.transaction_started_at = world.now();
  // The MessageIds of the records a onceflow sink wrote (their values are encoded messages),
  // decoded only for a trace that keeps its lines.
  if (world.trace().keeping()) {
    std::string ids;
    for (const KafkaRecord& r : records) {
      if (r.writer.empty()) continue;
      if (auto m = decode_message(r.value)) {
        if (!ids.empty()) ids.push_back(' ');
        append_id(ids, m->id);
      }
    }
    if (!ids.empty()) {
      world.detail(self, fmt::format("appends to {}/{} from producer {} epoch {}{}: [{}]", topic, partition, id, epoch,
                                     transactional ? " (in its open transaction)" : "", ids));
    }
  }
  for (KafkaRecord& r : records) {
    r.producer_id = id;
    r.epoch = epoch;
    r.txn = txn;
    r.state = transactional ? KafkaRecord::State::kOpen : KafkaRecord::State::kPlain;
    const int64_t offset = data.append(topic, partition, std::move(r), world.now());
    if (transactional) p.open.emplace_back(tp, offset);
  }
  return std::string("appended");
}

Result<std::string> end_txn(KafkaData& data, World& world, NodeIndex self, std::string_view request) {
  Decoder in(request);
  const uint64_t id = in.u64();
  const auto epoch = static_cast<uint32_t>(in.u64());
  const bool commit = in.u64() != 0;
  const uint64_t txn = in.u64();  // ghost: which transaction the client means
  if (!in.done()) return Status::invalid_argument("malformed EndTxn");
  auto producer = current_producer(data, id, epoch);
  if (!producer) {
    // KIP-890: a retry of the EndTxn that ended the last transaction gets the same answer.
    auto it = data.producers.find(id);
    if (data.epoch_per_transaction && it != data.producers.end() && it->second.last_end &&
        *it->second.last_end == std::make_pair(epoch, commit)) {
      Encoder out;
      out.u64(it->second.epoch);
      return out.take();
    }
    return producer.error();
  }
  KafkaData::Producer& p = **producer;
  if (p.transaction_started_at < 0 && commit) {
    return Status::aborted("INVALID_TXN_STATE: no open transaction (it timed out or was aborted)");
  }
  world.detail(self, fmt::format("{} the transaction of {} ({} records)", commit ? "commits" : "aborts",
                                 p.transactional_id, p.open.size()));
  data.end_transaction(id, commit, world.now(), txn);
  if (!commit) data.aborted_by_writer.emplace(id, txn);  // the writer is told its transaction aborted
  if (data.epoch_per_transaction) {
    p.last_end = std::make_pair(epoch, commit);
    ++p.epoch;
    p.next_sequence.clear();
  }
  Encoder out;
  out.u64(p.epoch);
  return out.take();
}

Result<std::string> fetch(const KafkaData& data, std::string_view request) {
  Decoder in(request);
  const std::string topic = in.string();
  const int partition = static_cast<int>(in.i64());
  const int64_t offset = in.i64();
  const uint64_t limit = in.u64();
  const bool read_committed = in.u64() != 0;
  if (!in.done()) return Status::invalid_argument("malformed Fetch");
  if (!data.has_partition(topic, partition)) {
    return Status::invalid_argument(fmt::format("UNKNOWN_TOPIC_OR_PARTITION {}/{}", topic, partition));
  }
  const KafkaData::Fetched f = data.fetch(topic, partition, offset, limit, read_committed);
  Encoder out;
  out.i64(f.next_offset).u64(f.caught_up ? 1 : 0).u64(f.records.size());
  for (const auto& [at, r] : f.records) {
    out.i64(at);
    encode_record(out, *r);
  }
  return out.take();
}

}  // namespace

BootFn kafka_broker_boot(KafkaData& data, TargetFaults& faults) {
  return [&data, &faults](NodeContext& node) -> std::shared_ptr<void> {
    World& world = node.world;
    const NodeIndex self = node.index;
    Random& random = node.fault_random;
    auto serve = [&](const char* service, auto handler) {
      node.network.serve(service, [&data, &faults, &world, self, &random, handler](
                                      const std::string&, std::string_view request) -> Result<std::string> {
        if (auto failure = faults.injected_failure(random)) return *failure;
        return handler(data, world, self, request);
      });
    };
    serve(kInitProducerService, init_producer);
    serve(kProduceService, produce);
    serve(kEndTxnService, end_txn);
    serve(kFetchService, [](KafkaData& d, World&, NodeIndex, std::string_view r) { return fetch(d, r); });
    Runtime& runtime = node.runtime;
    runtime.spawn("txn-timeouts", [&data, &world, self, &runtime] {
      for (;;) {
        runtime.sleep_for(kTimeoutCheckUs);
        if (const int n = data.abort_expired_transactions(world.now()); n > 0) {
          world.record(self, fmt::format("aborts {} timed-out transaction(s)", n));
        }
      }
    });
    return nullptr;
  };
}

// --- The client ---------------------------------------------------------------------------------

Result<SimKafkaClient::Producer> SimKafkaClient::init_producer(const std::string& transactional_id) {
  Encoder req;
  req.bytes(transactional_id);
  auto reply = network_.call(kKafkaNode, kInitProducerService, req.take(), timeout_us_);
  if (!reply) return reply.error();
  Decoder in(*reply);
  Producer p;
  p.id = in.u64();
  p.epoch = static_cast<uint32_t>(in.u64());
  p.transactional = !transactional_id.empty();
  p.txn = (static_cast<uint64_t>(p.epoch) << 32) | 1;  // unique per InitProducerId of the id
  return p;
}

Status SimKafkaClient::produce(Producer& producer, const std::string& topic, int partition,
                               const std::vector<KafkaRecord>& records) {
  if (records.empty()) return Status::ok();
  int64_t& next = producer.next_sequence[{topic, partition}];
  Encoder req;
  req.u64(producer.id).u64(producer.epoch).u64(producer.transactional ? 1 : 0).bytes(topic).i64(partition).i64(next);
  req.u64(producer.txn).u64(records.size());
  for (const KafkaRecord& r : records) encode_record(req, r);
  const std::string request = req.take();
  Status status;
  for (int attempt = 0; attempt < kProduceAttempts; ++attempt) {
    auto reply = network_.call(kKafkaNode, kProduceService, request, timeout_us_);
    if (reply) {
      next += static_cast<int64_t>(records.size());
      return Status::ok();
    }
    status = reply.error();
    if (!status.is_timeout()) break;  // only a lost answer is worth the same request again
  }
  return status;
}

Status SimKafkaClient::end_transaction(Producer& producer, bool commit) {
  Encoder req;
  req.u64(producer.id).u64(producer.epoch).u64(commit ? 1 : 0).u64(producer.txn);
  const std::string request = req.take();
  Status status;
  for (int attempt = 0; attempt < kProduceAttempts; ++attempt) {
    auto reply = network_.call(kKafkaNode, kEndTxnService, request, timeout_us_);
    if (reply) {
      Decoder in(*reply);
      const auto epoch = static_cast<uint32_t>(in.u64());
      if (!in.done()) return Status::corruption("malformed EndTxn reply");
      if (epoch != producer.epoch) {  // KIP-890: the next transaction runs under a new epoch
        producer.epoch = epoch;
        producer.next_sequence.clear();
      }
      ++producer.txn;
      return Status::ok();
    }
    status = reply.error();
    if (!status.is_timeout()) break;  // a lost answer: the same EndTxn again, as clients do
  }
  return status;
}

Result<KafkaData::Fetched> SimKafkaClient::fetch(const std::string& topic, int partition, int64_t offset, size_t limit,
                                                 bool read_committed, std::vector<KafkaRecord>* records) {
  Encoder req;
  req.bytes(topic).i64(partition).i64(offset).u64(limit).u64(read_committed ? 1 : 0);
  auto reply = network_.call(kKafkaNode, kFetchService, req.take(), timeout_us_);
  if (!reply) return reply.error();
  Decoder in(*reply);
  KafkaData::Fetched f;
  f.next_offset = in.i64();
  f.caught_up = in.u64() != 0;
  const uint64_t n = in.u64();
  records->clear();
  records->reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t at = in.i64();
    records->push_back(decode_record(in));
    f.records.emplace_back(at, nullptr);
  }
  for (size_t i = 0; i < records->size(); ++i) f.records[i].second = &(*records)[i];
  if (!in.done()) return Status::corruption("malformed fetch reply");
  return f;
}

// --- Source ---------------------------------------------------------------------------------------

Result<std::vector<ExternalSource::Record>> SimKafkaSource::read(int partition, uint64_t offset, size_t limit,
                                                                 bool* caught_up) {
  std::vector<KafkaRecord> records;
  auto f = client_.fetch(topic_, partition, static_cast<int64_t>(offset), limit, true, &records);
  if (!f) return f.error();
  std::vector<Record> out;
  for (const auto& [at, r] : f->records) {
    out.push_back({static_cast<uint64_t>(at), kafka_key(r->key), r->value, r->timestamp});
  }
  *caught_up = f->caught_up;
  return out;
}

// --- Sink -----------------------------------------------------------------------------------------

namespace {

int job_partition(const std::string& job) {
  auto id = JobId::parse(job);
  return id ? id->partition : 0;
}

KafkaRecord record_of(const Message& m, const std::string& job, LeaseId lease) {
  return {std::to_string(m.key), encode_message(m), m.event_ts, KafkaRecord::State::kPlain, 0, job, lease};
}

}  // namespace

std::string SimKafkaSink::arkflow_transactional_id(const std::string& job) const {
  if (spec_.partitions == 1) return spec_.transactional_id;
  return fmt::format("{}-{}", spec_.transactional_id, job_partition(job));  // unique per producer
}

Result<std::shared_ptr<SimKafkaSink::JobProducer>> SimKafkaSink::producer_for(const std::string& job, LeaseId lease,
                                                                              const std::string& transactional_id) {
  LeaseId& newest = newest_lease_[job];
  if (lease < newest) {
    return Status::invalid_argument(fmt::format("{}: lease {} was replaced by {}", job, lease, newest));
  }
  newest = lease;
  auto it = producers_.find(job);
  if (it != producers_.end() && it->second->lease == lease) return it->second;
  producers_.erase(job);
  auto producer = client_.init_producer(transactional_id);
  if (!producer) return producer.error();
  if (newest_lease_[job] > lease) {  // a newer incarnation came while this one waited
    return Status::invalid_argument(fmt::format("{}: lease {} was replaced by {}", job, lease, newest_lease_[job]));
  }
  auto p = std::make_shared<JobProducer>();
  p->lease = lease;
  p->producer = std::move(*producer);
  producers_[job] = p;  // may replace one another fiber made meanwhile: the newer init wins
  return p;
}

void SimKafkaSink::forget(const std::string& job, const JobProducer& p) {
  auto it = producers_.find(job);
  if (it != producers_.end() && it->second.get() == &p) producers_.erase(it);
}

// The last marker this job committed to its partition of the progress topic (read_committed).
// Hands every committed record of one partition to `visit`, in offset order, until it
// returns false or the partition's end (read_committed).
Status SimKafkaSink::read_committed(const std::string& topic, int partition,
                                    const std::function<bool(const KafkaRecord&)>& visit) {
  std::vector<KafkaRecord> records;
  for (int64_t offset = 0;;) {
    auto f = client_.fetch(topic, partition, offset, 1024, true, &records);
    if (!f) return f.error();
    for (const KafkaRecord& r : records) {
      if (!visit(r)) return Status::ok();
    }
    if (f->caught_up) return Status::ok();
    offset = f->next_offset;
  }
}

Result<std::optional<uint64_t>> SimKafkaSink::read_marker(const std::string& job, int partition) {
  std::optional<uint64_t> marker;
  const Status read = read_committed(progress_topic(kafka_topic(spec_)), partition, [&](const KafkaRecord& r) {
    if (r.key != job) return true;
    uint64_t seqno = 0;
    std::from_chars(r.value.data(), r.value.data() + r.value.size(), seqno);
    marker = seqno;  // the last one counts
    return true;
  });
  if (!read.is_ok()) return read;
  return marker;
}

// Whether the sink's topic holds a committed record this job wrote (every partition).
Result<bool> SimKafkaSink::wrote_to_topic(const std::string& job) {
  bool wrote = false;
  for (int partition = 0; partition < spec_.partitions && !wrote; ++partition) {
    const Status read = read_committed(kafka_topic(spec_), partition, [&](const KafkaRecord& r) {
      wrote = r.writer == job;
      return !wrote;
    });
    if (!read.is_ok()) return read;
  }
  return wrote;
}

Result<uint64_t> SimKafkaSink::deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) {
  const bool exactly_once = spec_.delivery_guarantee == SinkDelivery::kExactlyOnce;
  auto p = producer_for(job, lease, exactly_once ? "onceflow/" + job : "");
  if (!p) return p.error();
  if (exactly_once) return deliver_transactional(**p, job, lease, rows);
  std::vector<Message> messages;
  for (const OutboxRow& row : rows) {
    auto m = decode_message(row.message);
    if (!m) return Status::corruption("an outbox row does not decode");
    messages.push_back(std::move(*m));
  }
  const Status sent = produce_messages(**p, job, lease, messages);
  if (!sent.is_ok()) return sent;
  return rows.empty() ? 0 : rows.back().seqno;
}

Result<uint64_t> SimKafkaSink::deliver_transactional(JobProducer& p, const std::string& job, LeaseId lease,
                                                     const std::vector<OutboxRow>& rows) {
  const int partition = job_partition(job);
  if (!p.marker) {
    auto marker = read_marker(job, partition);
    if (!marker) return marker.error();
    const std::string& topic = kafka_topic(spec_);
    if (Status lost = check_progress_marker(job, *marker, rows, topic, progress_topic(topic)); !lost.is_ok()) {
      return lost;
    }
    if (!*marker) {
      // No marker and nothing acknowledged: still, an earlier incarnation may have committed a
      // transaction and died before its acknowledgement; then the marker is lost, not absent.
      auto wrote = wrote_to_topic(job);
      if (!wrote) return wrote.error();
      if (*wrote) {
          return Status::invalid_argument(fmt::format(
            "{}: {} holds committed records of this job but {} has no marker for it: stopping rather than "
            "writing duplicates",
            job, topic, progress_topic(topic)));
      }
    }
    p.marker = marker->value_or(0);
  }
  std::vector<Message> batch;
  uint64_t last = *p.marker;
  if (!rows.empty() && rows.front().seqno <= *p.marker) report(Probe::kKafkaMarkerSkip);
  for (const OutboxRow& row : rows) {
    if (row.seqno <= *p.marker || batch.size() >= static_cast<size_t>(spec_.transaction_messages)) continue;
    auto m = decode_message(row.message);
    if (!m) return Status::corruption("an outbox row does not decode");
    batch.push_back(std::move(*m));
    last = row.seqno;
  }
  if (batch.empty()) return *p.marker;
  Status status = produce_messages(p, job, lease, batch);
  if (status.is_ok()) {
    KafkaRecord marker{job, std::to_string(last), 0, KafkaRecord::State::kPlain, 0, job, lease};
    status = client_.produce(p.producer, progress_topic(kafka_topic(spec_)), partition, {marker});
  }
  if (status.is_ok()) status = client_.end_transaction(p.producer, true);
  if (!status.is_ok()) {
    // Abort if we still can; either way start over with a new producer, which re-reads the
    // marker (a commit whose answer was lost may have landed).
    (void)client_.end_transaction(p.producer, false);
    forget(job, p);
    if (status.is_aborted()) {
      return Status::invalid_argument(fmt::format("{}: {}", job, status.message()));  // fenced: stop this job
    }
    return status;
  }
  p.marker = last;
  return last;
}

// Produces `messages` to their partitions, in order, under `p`'s producer (inside its open
// transaction when it is transactional).
Status SimKafkaSink::produce_messages(JobProducer& p, const std::string& job, LeaseId lease,
                                      const std::vector<Message>& messages) {
  const std::string topic = kafka_topic(spec_);
  std::map<int, std::vector<KafkaRecord>> by_partition;
  for (const Message& m : messages) by_partition[partition_of(m.key, spec_.partitions)].push_back(record_of(m, job, lease));
  for (const auto& [partition, records] : by_partition) {
    const Status status = client_.produce(p.producer, topic, partition, records);
    if (!status.is_ok()) {
      if (!p.producer.transactional) forget(job, p);  // the next attempt starts a new producer
      return status;
    }
  }
  return Status::ok();
}

Status SimKafkaSink::write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) {
  const bool transactional = spec_.type == SinkType::kArkflowKafka && spec_.exactly_once;
  auto p = producer_for(job, lease, transactional ? arkflow_transactional_id(job) : "");
  if (!p) return p.error();
  // ArkFlow: begin, send every message of the acknowledged batch, commit.
  Status status = produce_messages(**p, job, lease, messages);
  if (transactional) {
    if (status.is_ok()) status = client_.end_transaction((*p)->producer, true);
    if (!status.is_ok()) {
      (void)client_.end_transaction((*p)->producer, false);
      forget(job, **p);
    }
  }
  return status;
}

}  // namespace onceflow::sim
