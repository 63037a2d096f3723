#include "cli/explore.h"

#include <fmt/format.h>

#include <algorithm>

#include "checkers/verdict.h"
#include "cli/guided.h"
#include "core/probes.h"
#include "core/spec.h"

namespace onceflow::cli {

using json = nlohmann::json;

json summary_json(const simulated::RunOutcome& r) {
  json checks = json::array();
  std::string first_failure;
  for (const auto& v : r.verdicts) {
    checks.push_back({v.check, v.verdict_name()});
    if (!v.passed && first_failure.empty()) first_failure = v.check + ": " + v.detail;
  }
  // A function that is not what it committed fails delivery and state too, through what it
  // made: its re-execution is the failure to read first, as `run` says; or `state`, when it
  // says the function read another key's row (the cause, where re-execution shows an effect).
  std::string read_first;
  const std::string others = checkers::following_reexecution(r.verdicts);
  const std::string from_state = checkers::following_another_keys_row(r.verdicts);
  for (const auto& v : r.verdicts) {
    if (others.empty() || v.passed) continue;
    const std::string detail = v.detail.substr(0, v.detail.find(" — replay: "));
    if (!from_state.empty() && v.check == "state") {
      read_first = fmt::format("state: {}; the {} failures may follow from it", detail, from_state);
    } else if (from_state.empty() && v.check == "re-execution") {
      read_first = fmt::format("re-execution: {}; the {} failures may follow from it (a function that depends on more "
                               "than its input, state, timers, current_timestamp() and random(), or an engine that "
                               "named its outputs wrongly)",
                               detail, others);
    }
  }
  json effects = json::object();
  for (const auto& [kind, e] : r.effects) effects[kind] = {e.measure, e.count};
  json probes = json::array();
  for (const auto& [name, hits] : r.probes) probes.push_back(name);
  json sites = json::array();
  for (const auto& c : r.user_sites) sites.push_back({c.name, c.kind, c.evaluated, c.held});
  return json{{"seed", r.seed},
              {"passed", r.passed},
              {"assertions", sites},
              {"events", r.events},
              {"sim_time_us", r.sim_time_us},
              {"mix", r.fault_mix},
              {"checks", checks},
              {"first_failure", first_failure},
              {"read_first", read_first},
              {"drain_us", r.drain_us},
              {"effects", effects},
              {"probes", probes},
              {"features", run_features(r)},
              {"warnings", r.warnings}};
}

SeedSummary parse_summary(const json& j) {
  SeedSummary s;
  s.seed = j.at("seed").get<uint64_t>();
  s.passed = j.at("passed").get<bool>();
  s.events = j.at("events").get<uint64_t>();
  s.sim_time_us = j.at("sim_time_us").get<int64_t>();
  s.mix = j.at("mix").get<std::string>();
  for (const auto& c : j.at("checks")) s.checks.emplace_back(c[0].get<std::string>(), c[1].get<std::string>());
  s.first_failure = j.at("first_failure").get<std::string>();
  s.read_first = j.value("read_first", std::string());
  s.drain_us = j.at("drain_us").get<int64_t>();
  for (const auto& [kind, e] : j.at("effects").items()) {
    s.measures[kind] = e[0].get<std::string>();
    s.effects[kind] = e[1].get<uint64_t>();
  }
  for (const auto& p : j.at("probes")) s.probes.insert(p.get<std::string>());
  s.features = j.at("features").get<std::vector<std::string>>();
  s.warnings = j.value("warnings", std::vector<std::string>());
  for (const auto& c : j.at("assertions")) {
    s.user_sites.push_back({c[0].get<std::string>(), c[1].get<std::string>(), c[2].get<uint64_t>(), c[3].get<uint64_t>()});
  }
  return s;
}

json drain_percentiles(std::vector<int64_t> us) {
  if (us.empty()) return json{{"p50", nullptr}, {"p99", nullptr}, {"max", nullptr}, {"drained", 0}};
  std::sort(us.begin(), us.end());
  const auto rank = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  };
  return json{{"p50", rank(0.5)}, {"p99", rank(0.99)}, {"max", us.back()}, {"drained", us.size()}};
}

void ExploreTally::add(const SeedSummary& r) {
  events_ += r.events;
  sim_time_us_ += r.sim_time_us;
  for (const auto& [name, verdict] : r.checks) {
    if (by_check_.count(name) == 0) check_order_.push_back(name);
    ++by_check_[name][verdict];
  }
  if (r.drain_us >= 0) drains_us_.push_back(r.drain_us);
  for (const auto& [kind, count] : r.effects) {
    KindTally& k = kinds_[kind];
    k.measure = r.measures.at(kind);
    ++k.seeds;
    k.total += count;
  }
  for (const std::string& p : r.probes) ++probe_seeds_[p];
  for (const auto& c : r.user_sites) {
    SiteTally& t = sites_[{c.kind, c.name}];
    t.seeds += c.evaluated > 0 ? 1 : 0;
    t.evaluated += c.evaluated;
    t.held += c.held;
  }
  const std::pair<uint64_t, uint64_t> key{r.run, r.seed};
  if (keeps_coverage_) features_[key] = feature_hashes(r.features);
  SeedSummary& kept = results_[key];
  kept = r;
  kept.features.clear();  // kept apart, hashed
}

CoverageCurve ExploreTally::coverage() const {
  CoverageCurve out;
  for (const auto& [key, hashes] : features_) out.add(hashes);
  return out;
}

std::vector<const SeedSummary*> ExploreTally::failing() const {
  std::vector<const SeedSummary*> out;
  for (const auto& [seed, r] : results_) {
    if (!r.passed) out.push_back(&r);
  }
  return out;
}

std::vector<std::string> ExploreTally::kinds_without_effect() const {
  std::vector<std::string> out;
  for (const auto& [kind, k] : kinds_) {
    if (k.total == 0) out.push_back(kind);
  }
  return out;
}

std::vector<std::string> ExploreTally::probes_never_hit() const {
  std::vector<std::string> out;
  for (const ProbeInfo& p : kProbes) {
    const std::string name(p.name);
    if (probe_seeds_.count(name) == 0 && out_of_reach_.count(name) == 0) out.push_back(name);
  }
  return out;
}

std::vector<std::string> ExploreTally::assertions_never_met() const {
  std::vector<std::string> out;
  for (const auto& [site, t] : sites_) {
    if ((site.first == "sometimes" || site.first == "reachable") && t.held == 0) {
      out.push_back(fmt::format("{} \"{}\"", site.first, site.second));
    }
  }
  return out;
}

json ExploreTally::assertions_json() const {
  json out = json::array();
  for (const auto& [site, t] : sites_) {
    out.push_back({{"name", site.second}, {"kind", site.first}, {"seeds", t.seeds}, {"evaluated", t.evaluated},
                   {"held", t.held}});
  }
  return out;
}

json ExploreTally::checks_json() const {
  json checks = json::object();
  for (const auto& name : check_order_) {
    const auto& v = by_check_.at(name);
    const auto n = [&](const char* verdict) { return v.count(verdict) != 0 ? v.at(verdict) : 0; };
    checks[name] = {{"pass", n("pass")}, {"fail", n("fail")}, {"n/a", n("n/a")}};
  }
  return checks;
}

json ExploreTally::warnings_json() const {
  json out = json::object();
  for (const auto& [key, r] : results_) {
    std::set<std::string> named;  // a run's warnings of one name count it once
    for (const std::string& w : r.warnings) {
      const std::string name = w.substr(0, w.find(' '));
      if (!named.insert(name).second) continue;
      if (!out.contains(name)) out[name] = {{"runs", 0}, {"first_seed", r.seed}, {"first", w}};
      out[name]["runs"] = out[name]["runs"].get<uint64_t>() + 1;
    }
  }
  return out;
}

json ExploreTally::effects_json() const {
  json kinds = json::object();
  for (const auto& [kind, k] : kinds_) kinds[kind] = {{"measure", k.measure}, {"seeds", k.seeds}, {"total", k.total}};
  json probes = json::object();
  for (const auto& [name, n] : probe_seeds_) probes[name] = n;
  return json{{"faults", kinds}, {"probes_hit", probes}, {"probes_never_hit", probes_never_hit()},
              {"probes_out_of_reach", out_of_reach_},
              {"kinds_without_effect", kinds_without_effect()}};
}

void ExploreTally::print(uint64_t seeds, bool probes_apply) const {
  size_t width = 24;  // a program's own checks may have longer names
  for (const auto& name : check_order_) width = std::max(width, std::min<size_t>(name.size(), 64));
  fmt::print("  {:<{}} {:>8} {:>8} {:>8}\n", "check", width, "pass", "fail", "n/a");
  const json checks = checks_json();
  for (const auto& name : check_order_) {
    const json& c = checks[name];
    fmt::print("  {:<{}} {:>8} {:>8} {:>8}\n", name.substr(0, 64), width, c["pass"].get<uint64_t>(),
               c["fail"].get<uint64_t>(), c["n/a"].get<uint64_t>());
  }
  if (!drains_us_.empty()) {
    const json d = drains_json();
    fmt::print("\n  drained after the calm in {} of {} seeds: p50 {}, p99 {}, max {}\n", drains_us_.size(), seeds,
               format_time(d["p50"].get<int64_t>()), format_time(d["p99"].get<int64_t>()),
               format_time(d["max"].get<int64_t>()));
  }
  if (!kinds_.empty()) {
    fmt::print("\n  {:<24} {:>6}  {}\n", "fault kind", "seeds", "what it did (in all)");
    for (const auto& [kind, k] : kinds_) fmt::print("  {:<24} {:>6}  {} {}\n", kind, k.seeds, k.total, k.measure);
  }
  for (const std::string& kind : kinds_without_effect()) {
    fmt::print("  warning: fault kind {} was configured in {} seeds and had no effect in any: is its injector "
               "working?\n",
               kind, kinds_.at(kind).seeds);
  }
  const json warnings = warnings_json();
  for (const auto& [name, w] : warnings.items()) {
    fmt::print("  warning: {} in {} of {} seeds (first, seed {}: {})\n", name, w["runs"].get<uint64_t>(), seeds,
               w["first_seed"].get<uint64_t>(), w["first"].get<std::string>());
  }
  if (!sites_.empty()) {
    fmt::print("\n  {:<40} {:<12} {:>6} {:>10} {:>10}\n", "assertion (your code)", "kind", "seeds", "evaluated", "held");
    for (const auto& [site, t] : sites_) {
      fmt::print("  {:<40} {:<12} {:>6} {:>10} {:>10}\n", site.second.substr(0, 40), site.first, t.seeds, t.evaluated,
                 site.first == "unreachable" ? std::string("-") : std::to_string(t.held));
    }
    for (const std::string& never : assertions_never_met()) {
      fmt::print("  warning: {} was never {} in {} seeds: a coverage gap\n", never,
                 never.rfind("sometimes", 0) == 0 ? "true" : "reached", seeds);
    }
  }
  if (!probes_apply) return;
  fmt::print("\n  {}\n", coverage().line());
  const std::vector<std::string> never = probes_never_hit();
  const size_t reachable = kProbeCount - out_of_reach_.size();
  fmt::print("\n  probes reached: {} of the {} this scenario can reach", reachable - never.size(), reachable);
  if (!out_of_reach_.empty()) fmt::print(" ({} of {} are out of its reach)", out_of_reach_.size(), kProbeCount);
  if (!never.empty()) {
    std::string names;
    for (const std::string& n : never) names += (names.empty() ? "" : ", ") + n;
    fmt::print("; never: {}", names);
  }
  fmt::print("\n");
}

}  // namespace onceflow::cli
