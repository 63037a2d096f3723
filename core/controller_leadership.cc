// The controller's leadership: its Lease, taking over, stepping down, booting from the store,
// committing as leader.
#include "core/controller_parts.h"

namespace onceflow {

bool Controller::lead() {
  if (lease_ == 0) return take_over();
  const Status pinged = env_.store.ping_lease(lease_);
  if (env_.bugs.controller_without_lease) return true;  // the bug: it never checks its Lease
  if (pinged.is_prerequisite_failed()) {
    step_down("its Lease ended");
    return false;
  }
  // A ping that got no answer proves nothing either way: go on, every commit names the Lease.
  return true;
}

// Takes the lead under a new Lease when the leader row names none that is still active.
bool Controller::take_over() {
  auto lease = env_.store.start_lease(env_.spec.lease_ttl_us);
  if (!lease) return false;
  auto tx = env_.store.begin();
  if (!tx) {
    (void)env_.store.abort_lease(*lease);
    return false;
  }
  auto leader_bytes = env_.store.get(*tx, tables::kController, kLeaderKey);
  bool free = leader_bytes.has_value();
  if (free && leader_bytes->has_value()) {
    const auto leader = decode_leader(**leader_bytes);
    assert(leader.has_value());
    const auto state = env_.store.lease_state(leader->lease);
    free = state.has_value() && *state != LeaseState::kActive;
  }
  if (!free) {  // another controller leads (or the store did not answer): stand by
    probe(env_, Probe::kControllerStandby);
    env_.store.abort(*tx);
    (void)env_.store.abort_lease(*lease);
    return false;
  }
  tx->put(tables::kController, kLeaderKey, encode_leader({*lease, node_}));
  lease_ = *lease;
  booted_ = false;
  if (!commit_as_leader(*tx)) {
    const LeaseId lost = lease_;
    lease_ = 0;
    (void)env_.store.abort_lease(lost);
    return false;
  }
  probe(env_, Probe::kControllerTakeOver);
  if (env_.observer != nullptr) env_.observer->controller_leads(node_, lease_);
  return true;
}

void Controller::step_down(const char* why) {
  probe(env_, Probe::kControllerStepDown);
  if (env_.observer != nullptr) env_.observer->controller_steps_down(node_, lease_, why);
  lease_ = 0;
  booted_ = false;
  quiescing_.reset();
  assignments_.clear();  // the next leader aborts their Leases when it takes over
}

bool Controller::boot() {
  auto tx = env_.store.begin();
  if (!tx) return false;
  auto state = env_.store.get(*tx, tables::kController, kStateKey);
  auto seq = env_.store.get(*tx, tables::kController, kStateSeqKey);
  auto cut = env_.store.get(*tx, tables::kController, tables::kDrainCutKey);
  auto layout = env_.store.get(*tx, tables::kController, kLayoutKey);
  auto pending = env_.store.get(*tx, tables::kController, kLayoutPendingKey);
  // The bug: one page of assignments, as if a boot never found more than 16 jobs.
  const size_t limit = env_.bugs.boot_scan_one_page ? 16 : kMaxJobs;
  auto rows = env_.store.scan(*tx, tables::kController, kJobPrefix, kJobPrefix + "~", limit);
  env_.store.abort(*tx);
  if (!state || !seq || !cut || !layout || !pending || !rows) return false;
  layout_ = layout->has_value() ? decode_layout(**layout).value() : Layout{};
  complete_layout();
  spec_ = with_layout(env_.spec, layout_);
  pending_.reset();
  if (pending->has_value()) {
    PendingLayout stored = decode_pending_layout(**pending).value();
    resume_after_layout_ = stored.resume;
    pending_ = std::move(stored.layout);
  }
  drain_cut_.reset();
  if (cut->has_value()) {
    Decoder in(**cut);
    drain_cut_ = in.i64();
  }
  if (state->has_value()) state_ = parse_pipeline_state(**state).value_or(PipelineState::kWorking);
  quiescing_.reset();
  if (seq->has_value()) state_seq_ = std::stoull(**seq);
  if (!rows->empty()) probe(env_, Probe::kControllerBootAborted);
  for (const Row& row : *rows) {
    const auto a = decode_assignment(row.value);
    assert(a.has_value());
    const Status aborted = env_.store.abort_lease(a->lease);
    if (!aborted.is_ok() && !aborted.is_prerequisite_failed()) return false;
    if (env_.observer != nullptr) env_.observer->job_lease_aborted(row.key.substr(kJobPrefix.size()), a->lease, "aborted by a controller taking over");
  }
  assignments_.clear();
  if (!persist(assignments_)) return false;
  booted_ = true;
  return true;
}

// Commits `tx` with this controller's Lease as prerequisite; steps down when it has ended.
bool Controller::commit_as_leader(const Transaction& tx, bool* conflicted) {
  std::vector<LeaseId> prerequisites;
  if (!env_.bugs.controller_without_lease) prerequisites.push_back(lease_);
  auto result = env_.store.commit(tx, prerequisites);
  if (result) return true;
  if (conflicted != nullptr) *conflicted = result.error().is_conflict();
  if (result.error().is_prerequisite_failed()) {
    step_down("its Lease ended");
    return false;
  }
  if (!result.error().is_ambiguous()) return false;
  probe(env_, Probe::kControllerCommitAmbiguous);
  // Ask until the store answers; resolve() also fences the transaction if it did not apply.
  while (true) {
    auto outcome = env_.store.resolve(tx.id());
    if (outcome) return *outcome == TxOutcome::kCommitted;
    env_.runtime.sleep_for(env_.spec.scheduling_period_us);
  }
}

}  // namespace onceflow
