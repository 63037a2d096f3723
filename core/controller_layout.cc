// Layouts: a new layout (a repartition, a reconfiguration, a new spec, resharded targets)
// applied once the pipeline has drained, and what it leaves behind removed.
#include "core/controller_parts.h"

namespace onceflow {

void Controller::complete_layout() {
  const PipelineSpec in_force = with_layout(env_.spec, layout_);
  for (const auto& c : in_force.computations) layout_.partitions.try_emplace(c.name, c.partitions);
  for (const auto& s : in_force.sinks) {
    if (s.type == SinkType::kAsyncQueue || s.type == SinkType::kSyncQueue) layout_.partitions.try_emplace(s.name, s.partitions);
  }
  // Workers run their deployment's spec until an assignment names another layout version: a
  // version-0 layout with other counts is stored as version 1 by the boot's commit, before any
  // job is assigned. (A stored spec comes with a version above 0.)
  if (layout_.version != 0) return;
  const auto other = [&](const std::string& name, int partitions) {
    auto it = layout_.partitions.find(name);
    return it != layout_.partitions.end() && it->second != partitions;
  };
  bool differs = false;
  for (const auto& c : env_.spec.computations) differs = differs || other(c.name, c.partitions);
  for (const auto& s : env_.spec.sinks) differs = differs || other(s.name, s.partitions);
  if (differs) layout_.version = 1;
}

bool Controller::follow_resharded_targets() {
  std::vector<const SinkSpec*> sharded;
  for (const SinkSpec& s : spec_.sinks) {
    if (s.type == SinkType::kAsyncQueue && s.target_tablets > 0) sharded.push_back(&s);
  }
  if (env_.bugs.reshard_watches_widest && sharded.size() > 1) {  // the bug: the others go unwatched
    const auto widest = std::max_element(sharded.begin(), sharded.end(), [](const SinkSpec* a, const SinkSpec* b) {
      return a->partitions < b->partitions;
    });
    sharded = {*widest};
  }
  Layout next = layout_;
  bool resharded = false;
  for (const SinkSpec* sink : sharded) {
    auto reply = env_.network.call(sink_target_node(sink->name), kSinkDescribeService, "", env_.options.rpc_timeout_us);
    if (!reply) continue;  // asked again next cycle
    int tablets = 0;
    const auto [ptr, ec] = std::from_chars(reply->data(), reply->data() + reply->size(), tablets);
    if (ec != std::errc() || ptr != reply->data() + reply->size() || tablets < 1 || tablets > kMaxPartitions) continue;
    if (tablets == sink->target_tablets) continue;
    next.target_tablets[sink->name] = tablets;
    next.partitions[sink->name] = tablets;
    ++next.producer_generations[sink->name];
    resharded = true;
  }
  if (!resharded) return false;
  next.version = layout_.version + 1;
  if (!begin_layout_change(next)) return false;
  probe(env_, Probe::kControllerTargetResharded);
  return true;
}

void Controller::remove_stale_layout_jobs() {
  if (env_.bugs.reconfigure_keeps_jobs) return;  // the bug: they run on with the old settings
  std::vector<std::string> stale;
  for (const auto& [job, a] : assignments_) {
    if (!a.retiring && a.row.layout_version != layout_.version) stale.push_back(job);
  }
  for (const auto& job : stale) (void)remove(job, "layout changed");
}

void Controller::apply_pending_layout() {
  constexpr size_t kPage = 512;
  constexpr int kPagesPerCycle = 16;
  bool in_place = false;  // a page found nothing left to move
  for (int page = 0; page < kPagesPerCycle; ++page) {
    auto tx = env_.store.begin();
    if (!tx) return;
    size_t moved = 0;
    std::vector<std::pair<std::string, std::string>> timers;
    for (const auto& [owner, count] : pending_->partitions) {
      const size_t moved_before = timers.size();
      auto n = move_partition_rows(env_.store, *tx, spec_, owner, count, kPage - moved, &timers);
      const ComputationSpec* c = spec_.computation(owner);
      if (!n || (c != nullptr && !keep_moved_timers_due(*tx, *c, std::span(timers).subspan(moved_before)))) {
        env_.store.abort(*tx);
        return;
      }
      moved += *n;
      if (moved >= kPage) break;
    }
    if (moved == 0) {
      env_.store.abort(*tx);
      in_place = true;
      break;
    }
    if (env_.observer != nullptr) {
      for (const auto& [from, to] : timers) env_.observer->timer_moving(from, to, tx->id());
      env_.observer->controller_committing(node_, lease_, tx->id(), std::nullopt);
    }
    if (!commit_as_leader(*tx)) return;  // the next cycle goes on from what is stored
  }
  // This cycle's pages ran out before every row was in place: the next cycle goes on.
  if (!in_place || lease_ == 0) return;
  // Each new owner of a key stamps its outputs above every old owner's, in the commit that
  // stores the layout.
  auto tx = env_.store.begin();
  if (!tx) return;
  for (const auto& [owner, count] : pending_->partitions) {
    const ComputationSpec* c = spec_.computation(owner);
    if (c == nullptr) continue;
    std::vector<std::string> keys;
    for (int p = 0; p < std::max(count, c->partitions); ++p) keys.push_back(JobId{JobKind::kComputation, owner, p}.str());
    auto rows = env_.store.get_many(*tx, tables::kJobMeta, keys);
    if (!rows) {
      env_.store.abort(*tx);
      return;
    }
    Micros floor = INT64_MIN;
    for (const auto& row : *rows) {
      if (row) floor = std::max(floor, job_progress(*row).last_output_ts);
    }
    for (int p = 0; p < count; ++p) {
      const auto& row = (*rows)[static_cast<size_t>(p)];
      tx->put(tables::kJobMeta, keys[static_cast<size_t>(p)],
              with_output_floor(row ? std::optional<std::string_view>(*row) : std::nullopt, floor));
    }
  }
  // Sinks recreated for a resharded target: their partitions are new producers, numbering
  // from 1 (their outboxes are empty: the drain delivered everything).
  for (const auto& [sink, generation] : pending_->producer_generations) {
    const auto was = layout_.producer_generations.find(sink);
    if (was != layout_.producer_generations.end() && was->second == generation) continue;
    const std::string prefix = JobId{JobKind::kSink, sink, 0}.str();
    const std::string from = prefix.substr(0, prefix.size() - 1);  // "sink/<name>/"
    auto metas = env_.store.scan(*tx, tables::kJobMeta, from, from + "~", kMaxJobs);
    if (!metas) {
      env_.store.abort(*tx);
      return;
    }
    for (const Row& row : *metas) tx->put(tables::kJobMeta, row.key, with_new_producer(row.value));
  }
  const Layout before = layout_;
  const std::optional<Layout> pending = pending_;
  const PipelineState state_before = state_;
  layout_ = *pending_;
  pending_.reset();
  state_ = resume_after_layout_ ? PipelineState::kWorking : PipelineState::kStopped;
  bool stored = put_state(*tx);
  if (stored) {
    if (env_.observer != nullptr) env_.observer->controller_committing(node_, lease_, tx->id(), std::nullopt);
    stored = commit_as_leader(*tx);
    if (stored) drain_cut_ = cut_written_;
  } else {
    env_.store.abort(*tx);
  }
  if (!stored) {
    layout_ = before;
    pending_ = pending;
    state_ = state_before;
    return;
  }
  spec_ = with_layout(env_.spec, layout_);
  state_dirty_ = true;
  probe(env_, Probe::kControllerRepartitioned);
}

// No timer fires while a pipeline drains, so a repartition moves due timers too; the
// partition a key moves to may have taken only older events than the one it leaves (or none,
// a partition new to the layout), and a finite pipeline brings no newer one: the timer would
// never fire. A partition that takes a timer due where it was gets that timer's trigger as a
// floor of its event watermark, move by move in the order moved (as the checkers follow them).
bool Controller::keep_moved_timers_due(Transaction& tx, const ComputationSpec& c,
                                       std::span<const std::pair<std::string, std::string>> moved) {
  const auto event_time = [&](const std::string& stream) {
    return std::any_of(c.timer_streams.begin(), c.timer_streams.end(), [&](const TimerStreamSpec& s) {
      return s.name == stream && s.watermark == Watermark::kEventTime;
    });
  };
  // "<table>:<partition>/<row>": the partition and the timer its row names.
  const auto parse = [](const std::string& where) -> std::optional<std::pair<size_t, Timer>> {
    const size_t colon = where.find(':');
    const auto stored = colon == std::string::npos ? std::nullopt
                                                   : stored_timer(std::string_view(where).substr(colon + 1), TimerValue{});
    if (!stored || stored->first >= kMaxPartitions) return std::nullopt;
    return std::pair{static_cast<size_t>(stored->first), stored->second};
  };
  // The event-time timers moved (from, to partition; trigger), and the partitions they name:
  // any, not only the old and new layouts' (a change replaced while half applied moves rows
  // out of partitions of the one it replaced).
  struct Move {
    size_t from = 0, to = 0;
    Micros trigger = 0;
  };
  std::vector<Move> moves;
  size_t span = 0;
  for (const auto& [from, to] : moved) {
    const auto a = parse(from);
    const auto b = parse(to);
    if (!a || !b || !event_time(a->second.timer_stream)) continue;
    moves.push_back({a->first, b->first, a->second.trigger_ts});
    span = std::max({span, a->first + 1, b->first + 1});
  }
  if (moves.empty()) return true;
  std::vector<std::string> keys;
  for (size_t p = 0; p < span; ++p) keys.push_back(JobId{JobKind::kComputation, c.name, static_cast<int>(p)}.str());
  auto rows = env_.store.get_many(tx, tables::kJobMeta, keys);
  if (!rows) return false;
  std::vector<Micros> watermark;
  for (const auto& row : *rows) watermark.push_back(row ? job_progress(*row).event_watermark : INT64_MIN);
  std::set<size_t> raised;
  for (const Move& m : moves) {
    if (m.trigger > watermark[m.from] || m.trigger <= watermark[m.to]) continue;
    watermark[m.to] = m.trigger;
    raised.insert(m.to);
  }
  for (size_t p : raised) tx.put(tables::kJobMeta, keys[p], with_event_watermark_floor((*rows)[p], watermark[p]));
  return true;
}

bool Controller::store_layout(const Layout& next) {
  const Layout before = layout_;
  layout_ = next;
  if (!persist_state()) {
    layout_ = before;
    return false;
  }
  spec_ = with_layout(env_.spec, layout_);
  return true;
}

bool Controller::begin_layout_change(const Layout& next) {
  const std::optional<Layout> before = pending_;
  const bool resume_before = resume_after_layout_;
  const PipelineState state_before = state_;
  pending_ = next;
  if (state_ == PipelineState::kWorking) {
    state_ = PipelineState::kDraining;
    resume_after_layout_ = true;
  } else if (!before) {
    // Stopped or draining with no change pending: the operator stopped it, and it stays
    // stopped. With a change pending, the pipeline drains or stopped for that change (or the
    // operator's stop since, which on_set_state recorded), and resumes as that one would have.
    resume_after_layout_ = false;
  }
  if (!persist_state()) {
    pending_ = before;
    resume_after_layout_ = resume_before;
    state_ = state_before;
    return false;
  }
  if (state_ != state_before) quiescing_.reset();
  probe(env_, Probe::kControllerStateChanged);
  return true;
}

bool Controller::forget_swapped_inputs(Transaction& tx, const PipelineSpec& next) {
  for (const SourceSpec& source : spec_.sources) {
    const SourceSpec* kept = next.source(source.name);
    if (kept != nullptr && kept->generation == source.generation) continue;
    const std::string prefix = source_origin(source) + "/";
    auto offsets = env_.store.scan(tx, tables::kSourceOffsets, prefix, prefix + "~", kMaxJobs);
    if (!offsets) return false;
    for (const Row& row : *offsets) tx.erase(tables::kSourceOffsets, row.key);
    std::vector<std::string> metas;
    for (int p = 0; p < source.partitions; ++p) metas.push_back(JobId{JobKind::kSource, source.name, p}.str());
    auto rows = env_.store.get_many(tx, tables::kJobMeta, metas);
    if (!rows) return false;
    Micros newest = INT64_MIN;
    for (const auto& row : *rows) {
      if (row) newest = std::max(newest, job_progress(*row).last_output_ts);
    }
    for (size_t i = 0; i < metas.size(); ++i) {
      if ((*rows)[i]) {
        tx.put(tables::kJobMeta, metas[i], with_input_swapped(*(*rows)[i], newest));
      } else if (newest != INT64_MIN) {
        tx.put(tables::kJobMeta, metas[i], with_output_floor(std::nullopt, newest));  // never ran: a floor too
      }
    }
  }
  return true;
}

}  // namespace onceflow
