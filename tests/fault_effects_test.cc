// Every fault kind's effect is counted where the fault lands, apart from every other kind's:
// a kind made inert (scheduled, doing nothing) shows no effect, so `explore --require-effects`
// fails, while the same seeds with the kind active show one. A count taken where the fault
// is planned, or shared with another kind, would credit an inert injector.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "cli/explore.h"
#include "cli/runner.h"
#include "core/builtin.h"
#include "faults/fault.h"

namespace onceflow {
namespace {

using faults::FaultKind;

struct KindCase {
  FaultKind kind;
  const char* scenario;  // one whose pipeline gives the kind something to act on
};

// Every kind: those swarm runs draw, dedup eviction (scripted or drawn when asked for) and
// point crashes (scripted only), each in a scenario that gives it something to act on:
// sink-target kinds need a target that can fail or forget (rebalance's spare worker is in
// every pipeline world), and swift_backlog scripts point crashes.
std::vector<KindCase> every_kind() {
  const std::map<FaultKind, const char*> scenario_for = {{FaultKind::kSinkErrors, "clickhouse_exactly_once.yaml"},
                                                         {FaultKind::kSinkRejects, "kafka_at_least_once.yaml"},
                                                         {FaultKind::kDedupEviction, "controller_turmoil.yaml"},
                                                         {FaultKind::kPointCrash, "swift_backlog.yaml"}};
  std::vector<FaultKind> kinds(std::begin(faults::kAllPipelineSwarmKinds), std::end(faults::kAllPipelineSwarmKinds));
  kinds.push_back(FaultKind::kDedupEviction);
  kinds.push_back(FaultKind::kPointCrash);
  std::vector<KindCase> out;
  for (const FaultKind kind : kinds) {
    auto it = scenario_for.find(kind);
    out.push_back({kind, it == scenario_for.end() ? "keyed_aggregation.yaml" : it->second});
  }
  return out;
}

void PrintTo(const KindCase& c, std::ostream* os) { *os << faults::fault_kind_name(c.kind) << " in " << c.scenario; }

class FaultEffectsTest : public ::testing::TestWithParam<KindCase> {};

// What --require-effects looks at: the kinds an exploration of `seeds` found without effect.
std::vector<std::string> without_effect(const cli::Invocation& inv, const cli::Scenario& s, bool swarm,
                                        const std::vector<uint64_t>& seeds) {
  cli::ExploreTally tally;
  for (uint64_t seed : seeds) tally.add(cli::parse_summary(cli::summary_json(cli::run_seed_once(inv, s, seed, swarm, 0))));
  return tally.kinds_without_effect();
}

TEST_P(FaultEffectsTest, AnInertKindShowsNoEffectAndTheSameSeedsActiveShowOne) {
  const KindCase c = GetParam();
  const std::string name(faults::fault_kind_name(c.kind));
  ComputationRegistry registry;
  builtin::register_all(registry);
  cli::Scenario s = cli::load_or_fail(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/" + c.scenario);
  const bool swarm = c.kind != FaultKind::kPointCrash;
  if (swarm) s.pipeline.swarm_kinds = {c.kind};
  cli::Invocation active{registry, {}, "", {}};
  // The first seeds whose run holds a fault of the kind and shows its effect.
  std::vector<uint64_t> seeds;
  for (uint64_t seed = 1; seed <= 24 && seeds.size() < 2; ++seed) {
    const simulated::RunOutcome r = cli::run_seed_once(active, s, seed, swarm, 0);
    auto e = r.effects.find(name);
    if (e != r.effects.end() && e->second.count > 0) seeds.push_back(seed);
  }
  ASSERT_FALSE(seeds.empty()) << name << " had no effect in 24 seeds of " << c.scenario << ": nothing to compare with";
  for (const std::string& kind : without_effect(active, s, swarm, seeds)) EXPECT_NE(kind, name);
  // Inert among every other kind (a count shared with one of them would credit it), over the
  // seeds above and a few more.
  if (swarm) {
    s.pipeline.swarm_kinds.assign(std::begin(faults::kAllPipelineSwarmKinds), std::end(faults::kAllPipelineSwarmKinds));
    if (c.kind == FaultKind::kDedupEviction) s.pipeline.swarm_kinds.push_back(c.kind);
  }
  for (uint64_t seed = 101; seed <= 106; ++seed) seeds.push_back(seed);
  cli::Invocation inert{registry, {}, "", {c.kind}};
  const std::vector<std::string> idle = without_effect(inert, s, swarm, seeds);
  EXPECT_NE(std::find(idle.begin(), idle.end(), name), idle.end())
      << "with " << name << " inert, --require-effects would still pass: its effect is counted where it is "
      << "planned or shared with another kind";
}

INSTANTIATE_TEST_SUITE_P(EveryKind, FaultEffectsTest, ::testing::ValuesIn(every_kind()),
                         [](const ::testing::TestParamInfo<KindCase>& info) {
                           return std::string(faults::fault_kind_name(info.param.kind));
                         });

}  // namespace
}  // namespace onceflow
