#include "cli/explain.h"
#include "cli/explore.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "checkers/verdict.h"
#include "core/message.h"

namespace onceflow::cli {
namespace {

using json = nlohmann::json;

// The page. The script reads the JSON in #run-data and draws the SVG timeline; when it has
// drawn, it sets data-rendered on <body> (the browser test waits for that).
constexpr const char* kPage = R"PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>onceflow explain: @TITLE@</title>
<style>
  body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
  h1 { font-size: 18px; margin: 0 0 4px; }
  .pass { color: #17702a; } .fail { color: #b00020; font-weight: bold; }
  #checks td { padding: 1px 8px 1px 0; vertical-align: top; }
  #scroll { overflow-x: auto; border: 1px solid #ccc; margin: 8px 0; }
  svg text { font: 11px system-ui, sans-serif; }
  .row-label { fill: #333; }
  .row-band { fill: #f6f6f6; }
  .lease { fill-opacity: 0.35; stroke-width: 1; }
  .epoch { stroke: #333; stroke-width: 1; }
  .epoch.violating { stroke: #b00020; stroke-width: 2.5; }
  .fault { fill: #ff9800; fill-opacity: 0.25; stroke: #e65100; stroke-dasharray: 3 2; }
  .crash { stroke: #b00020; stroke-width: 2; }
  .rejected { fill: #6a1b9a; }
  .delivery { fill: #1565c0; fill-opacity: 0.6; }
  .delivery.violating { fill: #d50000; fill-opacity: 1; stroke: #000; stroke-width: 1; }
  .heal { stroke: #2e7d32; stroke-dasharray: 4 3; }
  .axis { stroke: #999; }
  #legend span { display: inline-block; margin-right: 14px; }
  #legend i { display: inline-block; width: 12px; height: 12px; vertical-align: -2px; margin-right: 4px; }
  #violating td, #violating th { padding: 1px 10px 1px 0; text-align: left; font-family: monospace; }
</style>
</head>
<body>
<h1>onceflow explain</h1>
<div id="summary"></div>
<table id="checks"></table>
<div>zoom <input id="zoom" type="range" min="1" max="40" value="1"> <span id="zoom-label">1×</span></div>
<div id="legend">
  <span><i style="background:#7986cb;opacity:.5"></i>Lease held by a job</span>
  <span><i style="background:#333;width:2px"></i>epoch committed</span>
  <span><i style="background:#ff9800;opacity:.4"></i>fault</span>
  <span><i style="background:#b00020;width:3px"></i>crash</span>
  <span><i style="background:#6a1b9a"></i>commit refused (fenced)</span>
  <span><i style="background:#1565c0;border-radius:6px"></i>delivery</span>
  <span><i style="background:#d50000;border-radius:6px"></i>message named by a failing check</span>
</div>
<div id="scroll"><svg id="timeline" xmlns="http://www.w3.org/2000/svg"></svg></div>
<h2 style="font-size:15px">Messages named by failing checks</h2>
<table id="violating"><thead><tr><th>time</th><th>where</th><th>what</th><th>id</th><th>key</th><th>payload</th></tr></thead><tbody></tbody></table>
<script id="run-data" type="application/json">@DATA@</script>
<script>
"use strict";
const run = JSON.parse(document.getElementById("run-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const ROW = 30, LEFT = 170, TOP = 24;

function el(name, attrs, parent, title) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (title) { const t = document.createElementNS(NS, "title"); t.textContent = title; e.appendChild(t); }
  parent.appendChild(e);
  return e;
}
function secs(us) { return (us / 1e6).toFixed(6).replace(/0+$/, "").replace(/\.$/, "") + "s"; }
function colour(s) {
  let h = 0;
  for (const c of s) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return "hsl(" + (h % 360) + ",55%,50%)";
}
function cell(tr, text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); }

function header() {
  const s = document.getElementById("summary");
  s.innerHTML = "";
  const verdict = document.createElement("span");
  verdict.className = run.verdict === "pass" ? "pass" : "fail";
  verdict.textContent = run.verdict.toUpperCase();
  s.append("scenario " + run.scenario + ", seed " + run.seed + ": ", verdict,
           " — simulated " + secs(run.sim_time_us) + ", faults: " + run.fault_mix + ", replay: ");
  const code = document.createElement("code"); code.textContent = run.replay; s.append(code);
  const checks = document.getElementById("checks");
  for (const c of run.checks) {
    const tr = document.createElement("tr");
    cell(tr, c.name); cell(tr, c.verdict === "fail" ? "FAIL" : c.verdict, c.verdict === "fail" ? "fail" : "pass"); cell(tr, c.detail);
    checks.appendChild(tr);
  }
}

function draw(zoom) {
  const svg = document.getElementById("timeline");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const end = Math.max(run.sim_time_us, 1);
  const width = Math.max(900, document.getElementById("scroll").clientWidth - 4) * zoom;
  const plot = width - LEFT - 10;
  const x = us => LEFT + plot * Math.min(Math.max(us, 0), end) / end;
  const rowOf = new Map(run.nodes.map((n, i) => [n, i]));
  const y = node => TOP + ROW * (rowOf.has(node) ? rowOf.get(node) : run.nodes.length);
  const height = TOP + ROW * (run.nodes.length + 1) + 10;
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const counts = {};
  const count = k => { counts[k] = (counts[k] || 0) + 1; };

  run.nodes.forEach((n, i) => {
    if (i % 2 === 0) el("rect", {class: "row-band", x: 0, y: TOP + ROW * i, width: width, height: ROW}, svg);
    el("text", {class: "row-label", x: 4, y: TOP + ROW * i + 19}, svg).textContent = n;
  });
  const ticks = 10;
  for (let i = 0; i <= ticks * zoom; ++i) {
    const t = end * i / (ticks * zoom);
    el("line", {class: "axis", x1: x(t), x2: x(t), y1: TOP - 4, y2: TOP}, svg);
    el("text", {x: x(t) + 2, y: TOP - 8}, svg).textContent = secs(Math.round(t));
  }
  if (run.heal_at_us > 0) {
    el("line", {class: "heal", x1: x(run.heal_at_us), x2: x(run.heal_at_us), y1: TOP, y2: height - 10}, svg,
       "heal: every fault lifted at " + secs(run.heal_at_us));
  }
  for (const f of run.faults) {
    const rows = f.node ? [f.node] : run.nodes.filter(n => n === "store");
    if (f.peer) rows.push(f.peer);
    for (const node of rows) {
      el("rect", {class: "fault", x: x(f.at), y: y(node) + 2, width: Math.max(2, x(f.at + f.dur) - x(f.at)), height: ROW - 4},
         svg, f.text);
      count("fault");
    }
  }
  for (const l of run.leases) {
    const c = colour(l.job);
    el("rect", {class: "lease", x: x(l.start), y: y(l.node) + 6, width: Math.max(1, x(l.end) - x(l.start)), height: ROW - 12,
                fill: c, stroke: c}, svg,
       "Lease " + l.id + " of " + l.job + " on " + l.node + ": " + secs(l.start) + " to " + (l.open ? "the end" : secs(l.end)));
    count("lease");
  }
  for (const e of run.epochs) {
    const cls = "epoch" + (e.violating ? " violating" : "");
    el("line", {class: cls, x1: x(e.t), x2: x(e.t), y1: y(e.node) + 4, y2: y(e.node) + ROW - 4}, svg,
       e.job + " committed version " + e.version + " at " + secs(e.t) + " under Lease " + e.lease + ": consumed " +
       e.consumed + ", produced " + e.produced + (e.ids.length ? " [" + e.ids.join(" ") + "]" : ""));
    count("epoch");
  }
  for (const ev of run.events) {
    if (ev.what === "crash") {
      const cx = x(ev.at), cy = y(ev.node) + ROW / 2;
      el("path", {class: "crash", d: `M${cx - 5},${cy - 5}L${cx + 5},${cy + 5}M${cx - 5},${cy + 5}L${cx + 5},${cy - 5}`}, svg,
         ev.node + " crashed at " + secs(ev.at));
      count("crash");
    } else {
      el("rect", {class: "rejected", x: x(ev.at) - 3, y: y(ev.node) + ROW / 2 - 3, width: 6, height: 6}, svg,
         ev.node + ": " + ev.what + " at " + secs(ev.at) + " — " + ev.detail);
      count("rejected");
    }
  }
  const tbody = document.querySelector("#violating tbody");
  tbody.innerHTML = "";
  for (const d of run.deliveries) {
    el("circle", {class: "delivery" + (d.violating ? " violating" : ""), cx: x(d.t), cy: y(d.node) + ROW / 2,
                  r: d.violating ? 5 : 3}, svg,
       d.sink + " made " + d.id + " visible at " + secs(d.t) + " (key " + d.key + ", payload " + d.payload + ", from " +
       (d.producer || "at-most-once send") + ")");
    count(d.violating ? "violating" : "delivery");
    if (d.violating) {
      const tr = document.createElement("tr");
      cell(tr, secs(d.t)); cell(tr, d.node); cell(tr, "delivered"); cell(tr, d.id); cell(tr, d.key); cell(tr, d.payload);
      tbody.appendChild(tr);
    }
  }
  for (const e of run.epochs) {
    if (!e.violating) continue;
    const tr = document.createElement("tr");
    cell(tr, secs(e.t)); cell(tr, e.node); cell(tr, e.job + " epoch v" + e.version); cell(tr, e.ids.join(" ")); cell(tr, ""); cell(tr, "");
    tbody.appendChild(tr);
  }
  document.body.dataset.rendered = Object.entries(counts).map(([k, v]) => k + ":" + v).sort().join(" ");
}

header();
const zoom = document.getElementById("zoom");
zoom.addEventListener("input", () => { document.getElementById("zoom-label").textContent = zoom.value + "×"; draw(+zoom.value); });
draw(1);
</script>
</body>
</html>
)PAGE";


}  // namespace

std::string render_explain_html(const ExplainInput& input) {
  const faults::PipelineRun& run = *input.run;
  const checkers::PipelineHistory& h = run.history;
  const faults::RunOutcome& r = run.outcome;
  const std::set<std::string> named = checkers::ids_named_by_failures(r.verdicts);
  const auto is_named = [&](uint64_t v) { return named.count(format_id(v)) > 0; };

  json nodes = json::array();
  for (const auto& n : run.nodes) nodes.push_back(n);
  json leases = json::array();
  for (const auto& [id, span] : h.leases) {
    auto owner = run.lease_owners.find(id);
    if (owner == run.lease_owners.end()) continue;  // a Lease no job ever tried to commit under
    // Leases alive at the end of the run are drawn to the end.
    const bool open = span.ended_at < 0 || span.ended_at > r.sim_time_us;
    leases.push_back({{"id", fmt::format("{:x}", id)},
                      {"node", owner->second.first},
                      {"job", owner->second.second},
                      {"start", span.started_at},
                      {"end", open ? r.sim_time_us : span.ended_at},
                      {"open", open}});
  }
  json epochs = json::array();
  for (const auto& e : h.epochs) {
    if (e.consumed.empty() && e.produced.empty()) continue;  // idle epochs only clutter the picture
    bool violating = false;
    json ids = json::array();
    for (const auto* list : {&e.consumed, &e.produced}) {
      for (const auto& m : *list) {
        violating = violating || is_named(m.id) || is_named(m.key);
        if (ids.size() < 20) ids.push_back(format_id(m.id));
      }
    }
    epochs.push_back({{"job", e.job},
                      {"node", e.node},
                      {"lease", fmt::format("{:x}", e.lease)},
                      {"version", e.version},
                      {"t", e.commit_time},
                      {"consumed", e.consumed.size()},
                      {"produced", e.produced.size()},
                      {"ids", ids},
                      {"violating", violating}});
  }
  json faults = json::array();
  for (const auto& f : r.plan.faults) {
    faults.push_back({{"kind", std::string(faults::fault_kind_name(f.kind))},
                      {"node", f.node},
                      {"peer", f.peer},
                      {"at", f.at_us},
                      {"dur", f.duration_us},
                      {"text", f.describe()}});
  }
  json events = json::array();
  for (const auto& e : run.node_events) {
    events.push_back({{"node", e.node}, {"at", e.at_us}, {"what", e.what}, {"detail", e.detail}});
  }
  json deliveries = json::array();
  for (const auto& d : h.deliveries) {
    deliveries.push_back({{"sink", d.sink},
                          {"node", sink_target_node(d.sink)},
                          {"t", d.time},
                          {"id", format_id(d.message.id)},
                          {"key", format_id(d.message.key)},
                          {"payload", d.message.payload.substr(0, 80)},
                          {"producer", d.producer_job},
                          {"violating", is_named(d.message.id) || is_named(d.message.key)}});
  }
  json checks = json::array();
  for (const auto& v : r.verdicts) {
    checks.push_back({{"name", v.check}, {"verdict", v.verdict_name()}, {"detail", v.detail}});
  }

  const json data{{"scenario", input.scenario},
                  {"seed", std::to_string(r.seed)},  // 64 bits do not fit a JS number
                  {"replay", input.replay},
                  {"verdict", r.passed ? "pass" : "fail"},
                  {"sim_time_us", r.sim_time_us},
                  {"heal_at_us", h.heal_at},
                  {"fault_mix", r.fault_mix},
                  {"nodes", nodes},
                  {"leases", leases},
                  {"epochs", epochs},
                  {"faults", faults},
                  {"events", events},
                  {"deliveries", deliveries},
                  {"checks", checks}};
  // Inside <script> no '<', '>' or '&' may appear ("</script>", "<!--" change how the page
  // parses); JSON strings may spell them as \u escapes.
  const std::string dumped = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string payload;
  for (const char c : dumped) {
    if (c == '<') {
      payload += "\\u003c";
    } else if (c == '>') {
      payload += "\\u003e";
    } else if (c == '&') {
      payload += "\\u0026";
    } else {
      payload += c;
    }
  }
  // One pass over the template, so that neither substitution can see the other's text.
  const std::string_view page = kPage;
  const size_t title_at = page.find("@TITLE@");
  const size_t data_at = page.find("@DATA@");
  std::string out(page.substr(0, title_at));
  out += xml_escape(fmt::format("{} seed {}", input.scenario, r.seed));
  out += page.substr(title_at + 7, data_at - title_at - 7);
  out += payload;
  out += page.substr(data_at + 6);
  return out;
}

}  // namespace onceflow::cli
