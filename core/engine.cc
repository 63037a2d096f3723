#include "core/engine.h"

#include "core/env/random.h"

#include <fmt/format.h>

#include <charconv>

namespace onceflow {

namespace {
constexpr std::string_view kKindNames[] = {"source", "computation", "sink"};
}  // namespace

std::string JobId::str() const {
  std::string out(kKindNames[static_cast<int>(kind)]);
  out.append("/").append(name).append("/").append(std::to_string(partition));
  return out;
}

std::optional<JobId> JobId::parse(std::string_view text) {
  const auto first = text.find('/');
  const auto last = text.rfind('/');
  if (first == std::string_view::npos || first == last) return std::nullopt;
  JobId id;
  const std::string_view kind = text.substr(0, first);
  bool known = false;
  for (int k = 0; k < 3; ++k) {
    if (kind == kKindNames[k]) {
      id.kind = static_cast<JobKind>(k);
      known = true;
    }
  }
  if (!known) return std::nullopt;
  id.name = std::string(text.substr(first + 1, last - first - 1));
  const std::string_view number = text.substr(last + 1);
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), id.partition);
  if (ec != std::errc() || ptr != number.data() + number.size()) return std::nullopt;
  return id;
}

std::vector<JobId> all_jobs(const PipelineSpec& spec) {
  std::vector<JobId> jobs;
  for (const auto& s : spec.sources) {
    for (int p = 0; p < s.partitions; ++p) jobs.push_back({JobKind::kSource, s.name, p});
  }
  for (const auto& c : spec.computations) {
    for (int p = 0; p < c.partitions; ++p) jobs.push_back({JobKind::kComputation, c.name, p});
  }
  for (const auto& s : spec.sinks) {
    for (int p = 0; p < s.partitions; ++p) jobs.push_back({JobKind::kSink, s.name, p});
  }
  return jobs;
}

namespace tables {
std::string queue(std::string_view source) { return "queue/" + std::string(source); }
std::string stream(std::string_view stream) { return "stream/" + std::string(stream); }
std::string input_messages(std::string_view c) { return "input_messages/" + std::string(c); }
std::string compact_input_messages(std::string_view c) {
  return "compact_input_messages/" + std::string(c);
}
std::string timers(std::string_view c, std::string_view timer_stream) {
  return "timers/" + std::string(c) + "/" + std::string(timer_stream);
}
std::vector<std::string> timers(const ComputationSpec& c) {
  std::vector<std::string> out;
  for (const TimerStreamSpec& t : c.timer_streams) out.push_back(timers(c.name, t.name));
  return out;
}
std::string history(std::string_view c) { return "history/" + std::string(c); }
std::string outbox(std::string_view sink) { return "output_messages/" + std::string(sink); }
std::string static_table(std::string_view table) { return "static/" + std::string(table); }
std::string sync_sink(std::string_view sink) { return "sink/" + std::string(sink); }
// Fixed-width lower-case hex, written by hand: these keys are built for every row an epoch
// touches, and fmt's general machinery showed in profiles.
std::string hex16(uint64_t v) { return format_id(v); }
uint64_t parse_hex16(std::string_view digits) {
  uint64_t v = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  return v;
}
std::string partition_prefix(int partition) {
  if (partition < 0 || partition > 0xffff) return fmt::format("{:04x}/", partition);
  std::string prefix;
  append_hex(prefix, static_cast<uint64_t>(partition), 4);
  prefix += '/';
  return prefix;
}
}  // namespace tables

namespace {
struct BugName {
  std::string_view name;
  bool BugSwitches::*flag;
  // The checks that must catch it, space-separated: a run it fails in another way only is
  // no catch (`onceflow mutants`), so a check that lost the clause for it shows.
  std::string_view catchers;
  std::string_view mistake;  // what the switch gets wrong, as docs/guarantees.md's table says
};
constexpr BugName kBugNames[] = {
    {"no-lease-prerequisite", &BugSwitches::no_lease_prerequisite, "fencing",
     "epochs commit without the Lease as prerequisite"},
    {"no-input-dedup", &BugSwitches::no_input_dedup, "consumption delivery",
     "exactly-once computations skip `input_messages`"},
    {"ambiguous-as-success", &BugSwitches::ambiguous_as_success, "delivery-callback delivery consumption",
     "an ambiguous commit is taken as applied"},
    {"ambiguous-as-failure", &BugSwitches::ambiguous_as_failure, "delivery consumption",
     "an ambiguous commit is taken as not applied"},
    {"new-seqno-on-resend", &BugSwitches::new_seqno_on_resend, "delivery",
     "the outbox resends under a fresh seqNo"},
    {"batch-ack-whole", &BugSwitches::batch_ack_whole, "delivery",
     "a batch the target answered counts as delivered whole, though the target took only its first part"},
    {"outbox-erase-held-in-part", &BugSwitches::outbox_erase_held_in_part, "delivery",
     "an acknowledgement erases every outbox row the target holds any of, though it may hold only the first part of one"},
    {"deliver-before-commit", &BugSwitches::deliver_before_commit, "fencing delivery",
     "the sink sends the epoch's outbox rows before committing"},
    {"timer-delete-apart", &BugSwitches::timer_delete_apart, "timers re-execution",
     "a fired timer is deleted in a transaction of its own"},
    {"dedup-cleanup-early", &BugSwitches::dedup_cleanup_early, "consumption delivery",
     "`input_messages` rows dropped without the watermark"},
    {"no-idle-heartbeat", &BugSwitches::no_idle_heartbeat, "liveness",
     "an idle job commits nothing"},
    {"no-abort-on-rebalance", &BugSwitches::no_abort_on_rebalance, "controller fencing",
     "the controller moves a job without aborting its Lease"},
    {"offsets-before-commit", &BugSwitches::offsets_before_commit, "consumption delivery",
     "source offsets commit before the epoch's stream rows"},
    {"callback-before-commit", &BugSwitches::callback_before_commit, "delivery-callback",
     "an async sink's delivery callback fires when the target answers, before the acknowledging commit"},
    {"uncounted-send-failure", &BugSwitches::uncounted_send_failure, "delivery",
     "the at-most-once queue's sender counts a failed send neither as a drop nor in doubt"},
    {"amo-silent-loss", &BugSwitches::amo_silent_loss, "delivery",
     "after a send whose answer was lost, the at-most-once sender discards the next message without a word"},
    {"amo-retry-in-doubt", &BugSwitches::amo_retry_in_doubt, "delivery",
     "the at-most-once sender sends again a message whose send got no answer, which the target may hold already"},
    {"random-per-process", &BugSwitches::random_per_process, "re-execution",
     "computations draw from the process's generator, which a restarted process seeds as before, so \"random\" request ids repeat across lives"},
    {"assign-before-persist", &BugSwitches::assign_before_persist, "controller",
     "workers hear of new assignments before the controller stored them"},
    {"lease-abort-not-retried", &BugSwitches::lease_abort_not_retried, "controller fencing",
     "a Lease abort is sent once and its answer ignored; the job is replaced at once"},
    {"controller-without-lease", &BugSwitches::controller_without_lease, "controller",
     "the controller commits without its own Lease and never checks it"},
    {"timer-fires-after-watermark", &BugSwitches::timer_fires_after_watermark, "liveness delivery",
     "a timer is due only once the watermark is past its trigger, not at it"},
    {"event-watermark-from-system-time", &BugSwitches::event_watermark_from_system_time, "timers",
     "a job's event-time watermark follows its inputs' system times, not their event times, so event-time timers fire before their trigger"},
    {"event-watermark-not-kept", &BugSwitches::event_watermark_not_kept, "timers",
     "a job's event-time watermark starts from none in each life, so timers its stored watermark had made due wait for newer events, and at the end of the input never fire"},
    {"timer-output-id-by-event-time", &BugSwitches::timer_output_id_by_event_time, "re-execution delivery consumption",
     "a timer's outputs are named by its event time, not its trigger: a re-armed timer repeats its first firing's MessageIds"},
    {"epoch-time-ahead", &BugSwitches::epoch_time_ahead, "re-execution timers",
     "an epoch's system time is its deadline, the clock's reading plus an epoch period, so system-time timers fire early"},
    {"timer-dropped-with-message", &BugSwitches::timer_dropped_with_message, "timers",
     "a due timer of a key the epoch also took a message of is deleted as fired without its function running"},
    {"swift-replay-own-watermark", &BugSwitches::swift_replay_own_watermark, "consumption delivery",
     "a swift job's replay watermark ignores the replays of a swift stage above it"},
    {"dedup-cleanup-ignores-backlog", &BugSwitches::dedup_cleanup_ignores_backlog, "consumption delivery",
     "input dedup cleanup forgets repeats already re-emitted into the job's own inputs behind a full page (the bug below, put back)"},
    {"boot-scan-one-page", &BugSwitches::boot_scan_one_page, "controller",
     "a new controller leader reads one page (16) of stored assignments and aborts only their Leases"},
    {"replace-on-another-worker", &BugSwitches::replace_on_another_worker, "consumption delivery liveness",
     "a job whose Lease ended, that never ran or whose worker was lost is never placed on that worker again, even the only one"},
    {"stop-without-drain", &BugSwitches::stop_without_drain, "lifecycle",
     "\"stop\" acts as a pause: the pipeline is stopped with messages in flight"},
    {"completion-leaves-leases", &BugSwitches::completion_leaves_leases, "lifecycle",
     "a completed pipeline leaves its job Leases to expire instead of ending them"},
    {"repartition-without-drain", &BugSwitches::repartition_without_drain, "ordering",
     "a repartition is stored at once: new partitions run while the old ones still do"},
    {"source-swap-keeps-offsets", &BugSwitches::source_swap_keeps_offsets, "consumption delivery",
     "a swapped source reads its new input from the old one's offsets (Flow's \"backlog skip\")"},
    {"reconfigure-keeps-jobs", &BugSwitches::reconfigure_keeps_jobs, "layout",
     "settings changed live are stored, but running jobs go on with the old ones"},
    {"reshard-keeps-producer-ids", &BugSwitches::reshard_keeps_producer_ids, "delivery",
     "sink partitions recreated for a resharded target number from 1 under their old producer ids"},
    {"reshard-watches-widest", &BugSwitches::reshard_watches_widest, "layout",
     "the controller follows a reshard only of the sink with the most partitions"},
    {"drain-waits-for-sources", &BugSwitches::drain_waits_for_sources, "lifecycle",
     "draining, a job that stamps its outputs with its own clock still waits for the sources at the cut, so the headline's StateKeeper (a source and RequestProcessor's responses) never drains"},
    {"store-resolve-without-fence", &BugSwitches::store_resolve_without_fence, "ambiguous-resolution",
     "the store answers \"not committed\" for a transaction still open without fencing it"},
    {"store-delete-not-a-write", &BugSwitches::store_delete_not_a_write, "conservation",
     "the store's conflict check ignores deletes"},
    {"store-forgets-ended-leases", &BugSwitches::store_forgets_ended_leases, "fencing",
     "the store prunes Leases ended two TTLs ago and lets an unknown prerequisite pass"},
    {"kafka-init-keeps-epoch", &BugSwitches::kafka_init_keeps_epoch, "delivery",
     "the simulated Kafka broker's InitProducerId aborts the open transaction but does not bump the epoch, so a paused producer is not fenced by its successor"},
    {"alo-write-after-commit", &BugSwitches::alo_write_after_commit, "delivery",
     "an at-least-once async queue sink appends an epoch's messages after the epoch commits (its inputs erased), so a crash in between loses them"},
    {"worker-takes-row-before-lease", &BugSwitches::worker_takes_row_before_lease, "controller",
     "a worker runs each job under the Lease of the assignment row read just before the job's own, which another job holds: a replaced job's zombie still commits under it"},
};
}  // namespace

bool BugSwitches::enable(std::string_view name) {
  for (const auto& b : kBugNames) {
    if (b.name == name) {
      this->*b.flag = true;
      return true;
    }
  }
  return false;
}

std::vector<std::string> BugSwitches::catchers(std::string_view name) {
  std::vector<std::string> out;
  for (const auto& b : kBugNames) {
    if (b.name != name) continue;
    for (size_t at = 0; at < b.catchers.size();) {
      const size_t end = std::min(b.catchers.find(' ', at), b.catchers.size());
      out.emplace_back(b.catchers.substr(at, end - at));
      at = end + 1;
    }
  }
  return out;
}

std::string_view BugSwitches::mistake(std::string_view name) {
  for (const auto& b : kBugNames) {
    if (b.name == name) return b.mistake;
  }
  return {};
}

std::vector<std::string> BugSwitches::names() {
  std::vector<std::string> out;
  for (const auto& b : kBugNames) out.emplace_back(b.name);
  return out;
}

bool BugSwitches::any() const {
  for (const auto& b : kBugNames) {
    if (this->*b.flag) return true;
  }
  return false;
}

void fault_point(const EngineEnv& env, std::string_view point) {
  if (env.fault_points == nullptr || !env.fault_points->crash_here(point)) return;
  while (true) env.runtime.sleep_for(kSeconds);  // the crash unwinds this fiber
}

int key_partition(uint64_t key, int partitions) {
  const auto range = (static_cast<unsigned __int128>(mix64(key)) * static_cast<uint64_t>(partitions)) >> 64;
  return static_cast<int>(range);
}

std::string sink_target_node(std::string_view sink) { return "target-" + std::string(sink); }

std::string producer_id(const JobId& job, const SinkSpec& sink, const BugSwitches& bugs) {
  if (sink.producer_generation == 0 || bugs.reshard_keeps_producer_ids) return job.str();
  return fmt::format("{}#{}", job.str(), sink.producer_generation);
}

}  // namespace onceflow
