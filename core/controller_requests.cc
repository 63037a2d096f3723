// The controller's services: repartition, reconfigure, respec and pipeline-state requests.
#include "core/controller_parts.h"

namespace onceflow {

namespace {

// A numbered request: "<number><separator><rest>" (a sequence number, a layout version), as
// (number, rest); `form` is the whole request's expected form, for the error.
Result<std::pair<uint64_t, std::string_view>> numbered_request(std::string_view request, char separator,
                                                                std::string_view form) {
  const auto at = request.find(separator);
  uint64_t version = 0;
  const std::string_view number = request.substr(0, at);
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), version);
  if (ec != std::errc() || ptr != number.data() + number.size() || at == std::string_view::npos) {
    return Status::invalid_argument(fmt::format("expected {}, got '{}'", form, request.substr(0, 64)));
  }
  return std::make_pair(version, request.substr(at + 1));
}

}  // namespace

struct Controller::Busy {
  Controller& controller;
  explicit Busy(Controller& c) : controller(c) { controller.busy_ = true; }
  ~Busy() { controller.end_busy(); }
};

// Request: "<layout version> NAME=COUNT ...".
Result<std::string> Controller::on_repartition(std::string_view request) {
  auto parts = numbered_request(request, ' ', "'<layout version> NAME=COUNT ...'");
  if (!parts) return parts.error();
  const uint64_t expected = parts->first;
  if (Status refused = take_turn(); !refused.is_ok()) return refused;
  Busy busy(*this);
  // Read against the spec in force once this request's turn came: the wait may have seen a
  // boot or a takeover replace it.
  auto changes = parse_repartition(spec_, parts->second);
  if (!changes) return changes.error();
  if (state_ == PipelineState::kCompleted) return Status::invalid_argument("the pipeline has completed");
  if (state_ == PipelineState::kPaused) {
    return Status::conflict("the pipeline is paused with work in flight: start or stop it first");
  }
  const uint64_t current = pending_ ? pending_->version : layout_.version;
  if (expected != current) {
    return Status::conflict(fmt::format("the layout is at version {}, not {}", current, expected));
  }
  Layout next = pending_ ? *pending_ : layout_;
  next.version = current + 1;
  for (const auto& [name, count] : *changes) next.partitions[name] = count;
  if (env_.bugs.repartition_without_drain) {
    // The bug: the new layout at once, rows moved while the old partitions still run.
    for (const auto& [owner, count] : next.partitions) {
      auto tx = env_.store.begin();
      if (!tx) return Status::unavailable("the store did not answer");
      std::vector<std::pair<std::string, std::string>> timers;
      if (!move_partition_rows(env_.store, *tx, spec_, owner, count, 1'000'000, &timers)) continue;
      if (env_.observer != nullptr) {
        for (const auto& [from, to] : timers) env_.observer->timer_moving(from, to, tx->id());
      }
      if (!commit_as_leader(*tx)) {
        return Status::unavailable("the rows could not be moved");
      }
    }
    if (!store_layout(next)) return Status::unavailable("the layout could not be stored");
    return std::to_string(layout_.version);
  }
  if (!begin_layout_change(next)) return Status::unavailable("the change could not be stored");
  return std::to_string(next.version);
}

// Request: "<layout version> SETTING=VALUE ...".
Result<std::string> Controller::on_reconfigure(std::string_view request) {
  auto parts = numbered_request(request, ' ', "'<layout version> SETTING=VALUE ...'");
  if (!parts) return parts.error();
  const uint64_t expected = parts->first;
  if (Status refused = take_turn(); !refused.is_ok()) return refused;
  Busy busy(*this);
  // From the layout in force once this request's turn came (a boot during the wait loads it).
  auto next = reconfigured_layout(layout_, parts->second);
  if (!next) return next.error();
  if (state_ == PipelineState::kCompleted) return Status::invalid_argument("the pipeline has completed");
  if (pending_) return Status::unavailable("a repartition is being made; ask again");
  if (expected != layout_.version) {
    return Status::conflict(fmt::format("the layout is at version {}, not {}", layout_.version, expected));
  }
  if (!store_layout(*next)) return Status::unavailable("the settings could not be stored");
  probe(env_, Probe::kControllerReconfigured);
  return std::to_string(layout_.version);
}

// Request: "<layout version>\n<spec YAML>".
Result<std::string> Controller::on_respec(std::string_view request) {
  auto parts = numbered_request(request, '\n', "'<layout version>' and a pipeline spec on the lines after it");
  if (!parts) return parts.error();
  const uint64_t expected = parts->first;
  if (Status refused = take_turn(); !refused.is_ok()) return refused;
  Busy busy(*this);
  if (state_ != PipelineState::kStopped || quiescing_) {
    return Status::invalid_argument(fmt::format("the pipeline is {}: its spec changes only while it is stopped",
                                                   pipeline_state_name(state_)));
  }
  if (pending_) return Status::unavailable("a repartition is being made; ask again");
  if (expected != layout_.version) {
    return Status::conflict(fmt::format("the layout is at version {}, not {}", layout_.version, expected));
  }
  auto next = respecified_layout(spec_, layout_, std::string(parts->second));
  if (!next) return next.error();
  const PipelineSpec next_spec = with_layout(env_.spec, *next);
  auto tx = env_.store.begin();
  if (!tx) return Status::unavailable("the store did not answer");
  if (!env_.bugs.source_swap_keeps_offsets && !forget_swapped_inputs(*tx, next_spec)) {
    env_.store.abort(*tx);
    return Status::unavailable("the store did not answer");
  }
  const Layout before = layout_;
  layout_ = *next;
  if (!put_state(*tx)) {
    layout_ = before;
    env_.store.abort(*tx);
    return Status::unavailable("the store did not answer");
  }
  if (env_.observer != nullptr) env_.observer->controller_committing(node_, lease_, tx->id(), std::nullopt);
  if (!commit_as_leader(*tx)) {
    layout_ = before;
    return Status::unavailable("the spec could not be stored");
  }
  spec_ = next_spec;
  probe(env_, Probe::kControllerRespecified);
  return std::to_string(layout_.version);
}

// Request: "<sequence number> <state>". Requests can be delayed and reordered on the way,
// so one older than the last applied is ignored.
Result<std::string> Controller::on_set_state(std::string_view request) {
  auto parts = numbered_request(request, ' ', "'<sequence> <state>'");
  std::string_view state_word = parts ? parts->second : std::string_view();
  constexpr std::string_view kNow = " now";
  const bool now = state_word.ends_with(kNow);
  if (now) state_word.remove_suffix(kNow.size());
  const auto parsed = parts ? parse_pipeline_state(state_word) : std::nullopt;
  if (!parsed || (now && *parsed != PipelineState::kStopped && *parsed != PipelineState::kDraining)) {
    return Status::invalid_argument(
        fmt::format("expected '<sequence> <state>' or '<sequence> stopped now', got '{}'", request.substr(0, 64)));
  }
  const uint64_t seq = parts->first;
  const PipelineState requested = *parsed;
  if (Status refused = take_turn(); !refused.is_ok()) return refused;
  Busy busy(*this);
  if (state_ == PipelineState::kCompleted) return Status::invalid_argument("the pipeline has completed");
  if (requested == PipelineState::kCompleted) {
    return Status::invalid_argument("a pipeline completes by itself, when its finite sources are read");
  }
  if (seq < state_seq_) return std::string(pipeline_state_name(state_));
  // A stop drains first (the bug: it stops at once, as a pause does); stopping a stopped
  // pipeline changes nothing.
  PipelineState next = requested;
  if (next == PipelineState::kDraining) next = PipelineState::kStopped;
  if (next == PipelineState::kStopped && state_ != PipelineState::kStopped && !env_.bugs.stop_without_drain) {
    next = PipelineState::kDraining;
  }
  // Acknowledge only what is durable: a restarted controller must not go back to the old state.
  const PipelineState before = state_;
  const uint64_t seq_before = state_seq_;
  state_seq_ = seq;
  state_ = next;
  const bool resume_before = resume_after_layout_;
  if (pending_) resume_after_layout_ = next == PipelineState::kWorking;  // a stop keeps it stopped after
  if (state_ != before) quiescing_.reset();
  const bool stop_now_before = stop_now_;
  stop_now_ = now;  // the cut of a drain this request begins
  if (!persist_state()) {
    stop_now_ = stop_now_before;
    resume_after_layout_ = resume_before;
    state_ = before;
    state_seq_ = seq_before;
    return Status::unavailable("the state could not be stored");
  }
  state_dirty_ = true;
  probe(env_, Probe::kControllerStateChanged);
  // What a pause or a stop did, where it landed (the simulator's fault effects count these).
  if (state_ != before && state_ == PipelineState::kPaused) probe(env_, Probe::kControllerPaused);
  if (state_ != before && (state_ == PipelineState::kDraining || state_ == PipelineState::kStopped)) {
    probe(env_, Probe::kControllerStopping);
  }
  return std::string(pipeline_state_name(state_));
}

}  // namespace onceflow
