#include "cli/guided.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <iterator>

#include "cli/runner.h"
#include "faults/points.h"

namespace onceflow::cli {

using json = nlohmann::json;

namespace {

// Fresh seeds of the scenario as written, against mutants of the corpus: one run in this
// many is fresh once the corpus holds something.
constexpr uint64_t kFreshEvery = 5;
// Mutants that keep their parent's seed (its schedule, up to what they change).
constexpr double kSameSchedule = 0.25;
// Mutations stacked on one child: 1 to this many.
constexpr int kMaxStacked = 4;

// The power-of-two range of a count: "x2^k" for n in [2^k, 2^(k+1)).
std::string bucket(uint64_t n) { return fmt::format("x2^{}", std::bit_width(n) - 1); }
// The power-of-four range: for what varies from run to run anyway (knobs, history sizes).
std::string coarse_bucket(uint64_t n) { return fmt::format("x4^{}", (std::bit_width(n) + 1) / 2); }

json fault_json(const faults::Fault& f) {
  return json{{"kind", std::string(faults::fault_kind_name(f.kind))},
              {"at", f.at_us},
              {"for", f.duration_us},
              {"node", f.node},
              {"peer", f.peer},
              {"intensity", f.intensity},
              {"amount", f.amount_us},
              {"point", f.point}};
}

faults::Fault parse_fault(const json& j) {
  faults::Fault f;
  f.kind = *faults::parse_fault_kind(j.at("kind").get<std::string>());
  f.at_us = j.at("at").get<Micros>();
  f.duration_us = j.at("for").get<Micros>();
  f.node = j.at("node").get<std::string>();
  f.peer = j.at("peer").get<std::string>();
  f.intensity = j.at("intensity").get<double>();
  f.amount_us = j.at("amount").get<Micros>();
  f.point = j.at("point").get<std::string>();
  return f;
}

void sort_plan(faults::FaultPlan& plan) {
  std::stable_sort(plan.faults.begin(), plan.faults.end(),
                   [](const faults::Fault& a, const faults::Fault& b) { return a.at_us < b.at_us; });
}

}  // namespace

std::vector<std::string> run_features(const simulated::RunOutcome& r) {
  std::vector<std::string> out;
  for (const auto& [name, hits] : r.probes) {
    out.push_back("probe " + name);
    out.push_back(fmt::format("probe {} {}", name, bucket(hits)));
  }
  for (const auto& [kind, e] : r.effects) {
    if (e.count > 0) {
      out.push_back("effect " + kind);
      out.push_back(fmt::format("effect {} {}", kind, bucket(e.count)));
    }
    for (const auto& [detail, n] : e.details) {
      if (n > 0) out.push_back(fmt::format("effect {}: {} {}", kind, detail, bucket(n)));
    }
  }
  std::map<std::string, uint64_t> crashes;
  for (const faults::PointHit& h : r.point_hits) ++crashes[h.point];
  for (const auto& [point, n] : crashes) {
    out.push_back("crash at " + point);
    out.push_back(fmt::format("crash at {} {}", point, bucket(n)));
  }
  for (const auto& [knob, value] : r.knobs) {
    out.push_back(fmt::format("knob {} {}", knob, coarse_bucket(static_cast<uint64_t>(std::max<int64_t>(value, 0)))));
  }
  for (const auto& [counter, n] : r.observed) {
    if (n > 0) out.push_back(fmt::format("history {} {}", counter, coarse_bucket(n)));
  }
  for (const auto& v : r.verdicts) {
    if (v.verdict_name() != std::string("pass")) out.push_back(fmt::format("check {} {}", v.check, v.verdict_name()));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

json guided_report_json(const simulated::RunOutcome& r, bool with_space) {
  json j = summary_json(r);
  json plan = json::array();
  for (const faults::Fault& f : r.plan.faults) plan.push_back(fault_json(f));
  json hits = json::array();
  for (const faults::PointHit& h : r.point_hits) hits.push_back({h.node, h.point, h.at_us});
  j["plan"] = json{{"faults", plan}, {"heal_at", r.plan.heal_at_us}};
  j["knobs"] = r.knobs;
  j["point_hits"] = hits;
  if (!with_space) return j;
  const faults::SwarmOptions& s = r.fault_space;
  json kinds = json::array();
  for (const faults::FaultKind k : s.kinds) kinds.push_back(std::string(faults::fault_kind_name(k)));
  j["space"] = json{{"start", s.start_us}, {"heal_at", s.heal_at_us}, {"nodes", s.nodes},    {"store", s.store_node},
                    {"kinds", kinds},      {"targets", s.sink_targets}, {"spares", s.spare_workers}};
  return j;
}

GuidedReport parse_guided_report(const json& j) {
  GuidedReport r;
  r.summary = parse_summary(j);
  for (const json& f : j.at("plan").at("faults")) r.plan.faults.push_back(parse_fault(f));
  r.plan.heal_at_us = j.at("plan").at("heal_at").get<Micros>();
  r.knobs = j.at("knobs").get<simulated::KnobValues>();
  for (const json& h : j.at("point_hits")) r.point_hits.push_back({h[0].get<std::string>(), h[1].get<std::string>(), h[2].get<Micros>()});
  if (!j.contains("space")) return r;
  const json& s = j.at("space");
  faults::SwarmOptions& space = r.space.emplace();
  space.start_us = s.at("start").get<Micros>();
  space.heal_at_us = s.at("heal_at").get<Micros>();
  space.nodes = s.at("nodes").get<std::vector<std::string>>();
  space.store_node = s.at("store").get<std::string>();
  for (const json& k : s.at("kinds")) space.kinds.push_back(*faults::parse_fault_kind(k.get<std::string>()));
  space.sink_targets = s.at("targets").get<std::vector<std::string>>();
  space.spare_workers = s.at("spares").get<std::vector<std::string>>();
  return r;
}

GuidedSearch::GuidedSearch(const Scenario& s, bool swarm, uint64_t first_seed)
    : s_(s), swarm_(swarm), next_fresh_(first_seed), rng_(Xoshiro256StarStar(mix64(first_seed)).fork("guided")) {}

Scenario GuidedSearch::scenario_for(const GuidedInput& input) const {
  if (input.fresh) return s_;
  Scenario out = scripted_copy(s_, input.plan, swarm_, &input.knobs);
  out.pipeline.workload = input.workload;
  return out;
}

std::vector<GuidedInput> GuidedSearch::next_batch(size_t n) {
  std::vector<GuidedInput> out;
  for (size_t i = 0; i < n; ++i) {
    // The first batch, and one run in kFreshEvery after, draws a fresh seed.
    const bool fresh = corpus_.empty() || !space_ || rng_.uniform(kFreshEvery) == 0;
    if (fresh && next_fresh_ <= kMaxSeed) {
      GuidedInput in;
      in.seed = next_fresh_++;
      in.workload = s_.pipeline.workload;
      out.push_back(std::move(in));
      continue;
    }
    if (corpus_.empty()) break;  // every fresh seed spent and nothing to mutate
    const size_t parent = pick_parent();
    ++corpus_[parent].picked;
    out.push_back(mutate(corpus_[parent], corpus_[parent].run));
  }
  return out;
}

// Whether a feature is one of what a run reached (a probe, a fault's effect, a fault point
// crashed at, a check that did not pass, and how often each), not a knob's or the history's
// range: runs join the corpus, and parents are picked, by these.
static bool reached_feature(const std::string& f) { return f.rfind("knob ", 0) != 0 && f.rfind("history ", 0) != 0; }

// A feature first, in proportion to how rare it is (one over the runs that reached it), among
// those the corpus reached at all; then a corpus run that reached it, less as it has been
// picked more often. A rare feature gets many mutants however few runs reached it, where
// summing over each run's features would let the many common ones drown it.
size_t GuidedSearch::pick_parent() {
  if (holders_.empty()) return rng_.uniform(corpus_.size());
  const auto weighted = [&](const std::vector<double>& weights) {
    double total = 0;
    for (const double w : weights) total += w;
    double x = rng_.unit() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;
  };
  std::vector<double> rarity;
  rarity.reserve(holders_.size());
  for (const auto& [f, runs] : holders_) rarity.push_back(1.0 / static_cast<double>(seen_.at(f)));
  auto chosen = holders_.begin();
  std::advance(chosen, static_cast<std::ptrdiff_t>(weighted(rarity)));
  std::vector<double> freshness;
  for (const size_t i : chosen->second) freshness.push_back(1.0 / (1.0 + static_cast<double>(corpus_[i].picked)));
  return chosen->second[weighted(freshness)];
}

GuidedInput GuidedSearch::mutate(const Entry& parent, uint64_t parent_run) {
  GuidedInput child = parent.input;
  child.fresh = false;
  child.parent = static_cast<int64_t>(parent_run);
  std::string what;
  // Most mutants run another schedule: a mutant that replays its parent's schedule is much
  // like its parent, and a run that did not fail says little about a near copy of it. The
  // parent's plan, knobs and workload (what got it to a rare feature) are kept.
  if (!rng_.bernoulli(kSameSchedule)) {
    child.seed = rng_.next_u64() % kMaxSeed + 1;
    what = fmt::format("seed {}", child.seed);
  }
  const int stacked = 1 + static_cast<int>(rng_.uniform(kMaxStacked));
  for (int done = 0, tries = 0; done < stacked && tries < 20; ++tries) {
    std::string one;
    if (!mutate_once(child, parent, one)) continue;
    if (!what.empty()) what += "; ";
    what += one;
    ++done;
  }
  sort_plan(child.plan);
  child.mutation = what;
  return child;
}

bool GuidedSearch::mutate_once(GuidedInput& in, const Entry& parent, std::string& what) {
  std::vector<faults::Fault>& faults = in.plan.faults;
  const Micros start = space_->start_us;
  const Micros heal = std::max(space_->heal_at_us, start + 1);
  const auto within = [&](faults::Fault& f) {
    f.at_us = std::clamp<Micros>(f.at_us, start, heal - 1);
    if (f.duration_us > 0) f.duration_us = std::clamp<Micros>(f.duration_us, 1, heal - f.at_us);
  };
  const auto some_fault = [&]() -> faults::Fault& { return faults[rng_.uniform(faults.size())]; };
  switch (rng_.uniform(12)) {
    case 0: {  // another seed: another schedule, other random fault points
      in.seed = rng_.next_u64() % kMaxSeed + 1;
      what = fmt::format("seed {}", in.seed);
      return true;
    }
    case 10:
    case 11: {
      // A branch: the same run up to a moment, another future after it. Packets from one
      // node reordered by up to 1 ms for 5 ms: each reorder draws one more number from the
      // network's generator, so every draw after it (latencies, drops) differs, while
      // nothing before it does.
      faults::Fault f;
      f.kind = faults::FaultKind::kReorder;
      if (space_->nodes.empty()) return false;
      f.node = space_->nodes[rng_.uniform(space_->nodes.size())];
      f.at_us = rng_.uniform_range(start, heal - 1);
      f.duration_us = 5 * kMillis;
      f.intensity = 0.5;
      f.amount_us = kMillis;
      within(f);
      what = "branched at " + format_time(f.at_us) + " (" + f.describe() + ")";
      faults.push_back(std::move(f));
      return true;
    }
    case 1: {  // one of the parent's faults again, elsewhere in the window: more of what it did
      if (faults.empty()) return false;
      faults::Fault f = some_fault();
      if (f.kind == faults::FaultKind::kPointCrash) return false;
      f.at_us = rng_.uniform_range(start, heal - 1);
      within(f);
      what = "repeated " + f.describe();
      faults.push_back(std::move(f));
      return true;
    }
    case 2: {  // a fault of a kind the scenario draws
      if (space_->kinds.empty()) return false;
      const faults::FaultKind kind = space_->kinds[rng_.uniform(space_->kinds.size())];
      faults::Fault f = faults::draw_fault(rng_, *space_, kind, 0.05 + 0.95 * rng_.unit());
      if (faults::lacks_target(f)) return false;
      what = "added " + f.describe();
      faults.push_back(std::move(f));
      return true;
    }
    case 3: {  // a crash at a fault point of the engine, or the parent's point crashes pinned
      std::vector<std::string> nodes;
      for (const std::string& node : space_->nodes) {
        if (node.rfind("worker", 0) == 0 || node.rfind("controller", 0) == 0) nodes.push_back(node);
      }
      if (!parent.point_hits.empty() && rng_.bernoulli(0.5)) {
        const faults::PointHit& h = parent.point_hits[rng_.uniform(parent.point_hits.size())];
        faults::Fault f;
        f.kind = faults::FaultKind::kPointCrash;
        f.node = h.node;
        f.point = h.point;
        f.at_us = std::max(start, h.at_us - 1);
        within(f);
        what = "pinned " + f.describe();
        faults.push_back(std::move(f));
        return true;
      }
      if (nodes.empty()) return false;
      faults::Fault f;
      f.kind = faults::FaultKind::kPointCrash;
      f.node = nodes[rng_.uniform(nodes.size())];
      f.point = std::string(std::begin(faults::kFaultPoints)[rng_.uniform(std::size(faults::kFaultPoints))].name);
      f.at_us = rng_.uniform_range(start, heal - 1);
      what = "added " + f.describe();
      faults.push_back(std::move(f));
      return true;
    }
    case 4: {
      if (faults.empty()) return false;
      const size_t i = rng_.uniform(faults.size());
      what = "removed " + faults[i].describe();
      faults.erase(faults.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
    case 5: {  // moved: by up to a quarter of the fault window either way
      if (faults.empty()) return false;
      faults::Fault& f = some_fault();
      const Micros reach = std::max<Micros>(1, (heal - start) / 4);
      f.at_us += rng_.uniform_range(-reach, reach);
      within(f);
      what = "moved to " + f.describe();
      return true;
    }
    case 6: {  // stretched or shortened
      if (faults.empty()) return false;
      faults::Fault& f = some_fault();
      if (f.duration_us <= 0) return false;
      f.duration_us = rng_.bernoulli(0.5) ? f.duration_us * 2 : std::max<Micros>(1, f.duration_us / 2);
      within(f);
      what = "stretched to " + f.describe();
      return true;
    }
    case 7:
    case 8: {  // a knob drawn again from its range
      const std::string knob(simulated::kKnobs[rng_.uniform(simulated::kKnobs.size())].name);
      const simulated::KnobValues drawn = simulated::draw_knobs(rng_.next_u64(), s_.pipeline.spec, EngineOptions{});
      const auto value = drawn.find(knob);
      const auto now = in.knobs.find(knob);
      if (value == drawn.end() || (now != in.knobs.end() && now->second == value->second)) return false;
      in.knobs[knob] = value->second;
      simulated::keep_knob_rules(in.knobs);  // a Lease still outlives the epochs, and so on
      what = fmt::format("knob {}={}", knob, in.knobs[knob]);
      return true;
    }
    default: {  // the workload: keys or the interval between inputs halved or doubled
      const PipelineWorkload& base = s_.pipeline.workload;
      if (rng_.bernoulli(0.5)) {
        const int keys = rng_.bernoulli(0.5) ? in.workload.keys * 2 : in.workload.keys / 2;
        if (keys < 1 || keys > base.keys * 4 || keys < base.keys / 4) return false;
        in.workload.keys = keys;
        what = fmt::format("keys {}", keys);
      } else {
        const Micros interval = rng_.bernoulli(0.5) ? in.workload.interval_us * 2 : in.workload.interval_us / 2;
        if (interval < 1 || interval > base.interval_us * 4 || interval < base.interval_us / 4) return false;
        in.workload.interval_us = interval;
        what = "interval " + format_time(interval);
      }
      return true;
    }
  }
}

void GuidedSearch::add(const GuidedInput& input, const GuidedReport& report) {
  const uint64_t run = inputs_.size();
  inputs_.push_back(input);
  fresh_ += input.fresh ? 1 : 0;
  if (!space_) space_ = report.space;
  // Knob and history ranges count for the coverage line, not for the corpus: nearly every run
  // has one of its own, and a corpus of nearly every run guides nothing.
  bool new_feature = false;
  for (const std::string& f : report.summary.features) new_feature |= seen_[f]++ == 0 && reached_feature(f);
  if (!new_feature) return;
  for (const std::string& f : report.summary.features) {
    if (reached_feature(f)) holders_[f].push_back(corpus_.size());
  }
  Entry e{run, input, report.point_hits, report.summary.features};
  // A fresh run is kept as it ran: its drawn plan and knobs become explicit.
  if (input.fresh) {
    e.input.plan = report.plan;
    e.input.knobs = report.knobs;
  }
  corpus_.push_back(std::move(e));
}

std::vector<uint64_t> feature_hashes(const std::vector<std::string>& features) {
  std::vector<uint64_t> out;
  out.reserve(features.size());
  for (const std::string& f : features) out.push_back(hash_bytes(f));
  return out;
}

void CoverageCurve::add(const std::vector<uint64_t>& feature_hashes) {
  for (const uint64_t f : feature_hashes) seen_.insert(f);
  after_.push_back(seen_.size());
}

std::vector<std::pair<uint64_t, size_t>> CoverageCurve::curve(size_t points) const {
  std::vector<std::pair<uint64_t, size_t>> out;
  const uint64_t runs = after_.size();
  if (runs == 0) return out;
  for (size_t k = 1; k <= points; ++k) {
    const uint64_t at = std::max<uint64_t>(1, (k * runs + points - 1) / points);
    if (!out.empty() && out.back().first == at) continue;
    out.emplace_back(at, after_[at - 1]);
  }
  return out;
}

std::vector<size_t> CoverageCurve::new_per_share(size_t parts) const {
  std::vector<size_t> out;
  size_t before = 0;
  for (const auto& [runs, features] : curve(parts)) {
    out.push_back(features - before);
    before = features;
  }
  return out;
}

json CoverageCurve::json() const {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& [runs, features] : curve(10)) points.push_back({{"runs", runs}, {"features", features}});
  return nlohmann::json{{"features", seen_.size()}, {"curve", points}, {"new_per_tenth", new_per_share(10)}};
}

std::string CoverageCurve::line() const {
  const std::vector<size_t> shares = new_per_share(10);
  if (shares.empty()) return "";
  static constexpr const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  const size_t top = *std::max_element(shares.begin(), shares.end());
  std::string bars, counts;
  for (const size_t n : shares) {
    bars += n == 0 ? "·" : kBars[std::min<size_t>(7, (n * 8 - 1) / std::max<size_t>(top, 1))];
    if (!counts.empty()) counts += ' ';
    counts += std::to_string(n);
  }
  const std::string part = shares.size() == 10 ? "tenth" : "share";
  return fmt::format("coverage: {} features after {} runs; new ones in each {} of the runs: {} ({}){}", seen_.size(),
                     after_.size(), part, bars, counts,
                     shares.size() > 1 && shares.back() == 0 ? "; the last found nothing new" : "");
}

}  // namespace onceflow::cli
