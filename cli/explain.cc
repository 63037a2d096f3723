#include "cli/explain.h"
#include "cli/explore.h"
#include "cli/replay_filter.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "checkers/verdict.h"
#include "core/message.h"
#include "core/spec.h"

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
  #timeline-box { display: flex; border: 1px solid #ccc; margin: 8px 0; }
  #scroll { overflow-x: auto; flex: 1; }
  #labels { flex: none; border-right: 1px solid #ccc; }
  svg text { font: 11px system-ui, sans-serif; }
  .row-label { fill: #333; }
  .row-label.job { fill: #555; font-size: 10px; }
  .row-band { fill: #f6f6f6; }
  .node-band { fill: #e8eaf6; }
  .lease { fill-opacity: 0.35; stroke-width: 1; }
  .epoch { stroke: #333; stroke-width: 1; }
  .epoch.violating { stroke: #ff6d00; stroke-width: 3; }
  .fault { fill-opacity: 0.28; stroke-dasharray: 3 2; }
  .fault-label { font-size: 10px; }
  .crash { stroke: #b00020; stroke-width: 2; }
  .rejected { fill: #6a1b9a; }
  .delivery { fill: #1565c0; fill-opacity: 0.6; }
  .delivery.violating { fill: #d50000; fill-opacity: 1; stroke: #000; stroke-width: 1; }
  .decided { stroke: #90a4ae; stroke-width: 1; }
  .decided.early { stroke: #d50000; stroke-width: 2; stroke-dasharray: 4 2; }
  .answer { stroke: #d50000; stroke-width: 2.5; }
  .sent { stroke: #d50000; stroke-width: 1; stroke-dasharray: 2 2; }
  .missing-decided { fill: none; stroke: #d50000; stroke-width: 2; }
  .heal { stroke: #2e7d32; stroke-dasharray: 4 3; }
  .axis { stroke: #999; }
  #legend span { display: inline-block; margin-right: 14px; white-space: nowrap; }
  #legend svg { vertical-align: -2px; margin-right: 4px; }
  #violating td, #violating th { padding: 1px 10px 1px 0; text-align: left; font-family: monospace; }
</style>
</head>
<body>
<h1>onceflow explain</h1>
<div id="summary"></div>
<table id="checks"></table>
<div>zoom <input id="zoom" type="range" min="1" max="400" value="1"> <span id="zoom-label">1×</span>
  <span id="focus"></span></div>
<div id="legend"></div>
<div id="timeline-box"><svg id="labels" xmlns="http://www.w3.org/2000/svg"></svg>
<div id="scroll"><svg id="timeline" xmlns="http://www.w3.org/2000/svg"></svg></div></div>
<div id="named" hidden>
<h2 style="font-size:15px">Messages named by failing checks</h2>
<table id="violating"><thead><tr><th>time</th><th>where</th><th>what</th><th>id</th><th>key</th><th>payload</th></tr></thead><tbody></tbody></table>
</div>
<script id="run-data" type="application/json">@DATA@</script>
<script>
"use strict";
const run = JSON.parse(document.getElementById("run-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const ROW = 26, JOB_ROW = 18, LABELS = 210, TOP = 24, MARGIN = 10;
// Fault kinds, each its own colour.
const FAULT_COLOURS = {
  crash: "#e53935", pause: "#8e24aa", partition: "#fb8c00", one_way_partition: "#f57c00", isolate: "#f4511e",
  drop: "#fbc02d", duplicate: "#afb42b", delay: "#00acc1", reorder: "#26a69a", lost_replies: "#5e35b1",
  store_unavailable: "#6d4c41", clock_skew: "#546e7a", clock_jump: "#37474f", lease_ping_loss: "#ec407a",
  lease_expiry: "#d81b60", sink_errors: "#ff7043", dedup_eviction: "#795548", pipeline_pause: "#9e9e9e",
  pipeline_stop: "#616161", sink_rejects: "#bf360c", rebalance: "#43a047", point_crash: "#880e4f"};

function el(name, attrs, parent, title) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (title) { const t = document.createElementNS(NS, "title"); t.textContent = title; e.appendChild(t); }
  parent.appendChild(e);
  return e;
}
// One unit throughout: milliseconds of simulated time.
// Instants and durations as every onceflow output writes them (format_time): "3.788572s".
function at_(us) {
  us = Math.round(us);
  const a = Math.abs(us);
  return (us < 0 ? "-" : "") + Math.floor(a / 1e6) + "." + String(a % 1e6).padStart(6, "0") + "s";
}
function colour(s) {
  let h = 0;
  for (const c of s) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return "hsl(" + (h % 360) + ",55%,50%)";
}
function faultColour(kind) { return FAULT_COLOURS[kind] || colour(kind); }
function cell(tr, text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); }
// A delivery made visible before the commit that decided it (or with none): a fencing violation.
function early(d) { return d.producer !== "" && (d.commit === null || d.commit.t > d.t); }

function header() {
  const s = document.getElementById("summary");
  s.innerHTML = "";
  const verdict = document.createElement("span");
  verdict.className = run.verdict === "pass" ? "pass" : "fail";
  verdict.textContent = run.verdict.toUpperCase();
  s.append("scenario " + run.scenario + ", seed " + run.seed + ": ", verdict,
           " — simulated " + at_(run.sim_time_us) + ", faults: " + run.fault_mix + ", replay: ");
  const code = document.createElement("code"); code.textContent = run.replay; s.append(code);
  const checks = document.getElementById("checks");
  for (const c of run.checks) {
    const tr = document.createElement("tr");
    cell(tr, c.name); cell(tr, c.verdict === "fail" ? "FAIL" : c.verdict, c.verdict === "fail" ? "fail" : "pass");
    cell(tr, c.detail);
    checks.appendChild(tr);
  }
}

// The rows: each node, then one row per job that held a Lease or committed on it.
const rows = [];
for (const n of run.nodes) {
  rows.push({key: n, label: n, job: false});
  const jobs = new Set();
  for (const l of run.leases) if (l.node === n) jobs.add(l.job);
  for (const e of run.epochs) if (e.node === n) jobs.add(e.job);
  for (const j of [...jobs].sort()) rows.push({key: n + "|" + j, label: j, job: true});
}
let nextY = TOP;
for (const r of rows) { r.y = nextY; r.h = r.job ? JOB_ROW : ROW; nextY += r.h; }
const rowOf = new Map(rows.map(r => [r.key, r]));
const BOTTOM = nextY;
const rowY = key => (rowOf.get(key) || {y: BOTTOM}).y;
const rowH = key => (rowOf.get(key) || {h: ROW}).h;

// The first violation: where the page opens.
// In order: a delivery before the commit that decided it, a named message delivered again, a
// named output that was committed and never made visible (at the target's first answer to
// it), a delivery of a named message, an
// epoch that consumed or produced one (the context of a violation rather than the violation).
function firstViolation() {
  if (run.verdict !== "fail") return null;
  const earliest = (items, when, what) => {
    let best = null;
    for (const i of items) if (best === null || when(i) < when(best)) best = i;
    return best === null ? null : {t: when(best), what: what(best)};
  };
  return earliest(run.deliveries.filter(d => d.violating && early(d)), d => d.t,
                  d => d.sink + " made " + d.id + " visible before the commit that decided it") ||
         earliest(run.deliveries.filter(d => d.violating && d.again), d => d.t,
                  d => d.sink + " made " + d.id + " visible again") ||
         earliest(run.missing, m => m.answers.length > 0 ? m.answers[0].t : m.decided.t,
                  m => m.sink + " never made " + m.id + " (key " + m.key + ") visible: " +
                       (m.answers.length > 0 ? "the target answered \"" + m.answers[0].text + "\"" : "no send reached the target")) ||
         earliest(run.deliveries.filter(d => d.violating), d => d.t, d => d.sink + " made " + d.id + " visible") ||
         earliest(run.epochs.filter(e => e.violating), e => e.t, e => e.job + " committed a named message");
}

function legend(present) {
  const box = document.getElementById("legend");
  box.innerHTML = "";
  const item = (draw, text) => {
    const span = document.createElement("span");
    const sw = document.createElementNS(NS, "svg");
    sw.setAttribute("width", 16); sw.setAttribute("height", 12);
    draw(sw);
    span.appendChild(sw); span.append(text); box.appendChild(span);
  };
  item(g => el("rect", {x: 0, y: 2, width: 16, height: 8, fill: "#7986cb", "fill-opacity": 0.5}, g), "Lease held by a job (row per job)");
  item(g => el("line", {class: "epoch", x1: 8, x2: 8, y1: 0, y2: 12}, g), "epoch committed");
  if (present.violatingEpoch) item(g => el("line", {class: "epoch violating", x1: 8, x2: 8, y1: 0, y2: 12}, g), "epoch that consumed or produced a message a failing check names");
  for (const kind of [...present.faults].sort()) {
    item(g => el("rect", {class: "fault", x: 0, y: 1, width: 16, height: 10, fill: faultColour(kind), stroke: faultColour(kind)}, g), "fault: " + kind);
  }
  if (present.crash) item(g => el("path", {class: "crash", d: "M3,1L13,11M3,11L13,1"}, g), "node crashed");
  if (present.rejected) item(g => el("rect", {class: "rejected", x: 5, y: 3, width: 6, height: 6}, g), "commit refused (fenced)");
  item(g => el("circle", {class: "delivery", cx: 8, cy: 6, r: 3}, g), "delivery (made visible by the target)");
  if (present.violating) item(g => el("circle", {class: "delivery violating", cx: 8, cy: 6, r: 5}, g), "delivery of a message a failing check names");
  item(g => el("line", {class: "decided", x1: 0, x2: 16, y1: 6, y2: 6}, g), "delivery — the commit that decided it");
  if (present.early) item(g => el("line", {class: "decided early", x1: 0, x2: 16, y1: 6, y2: 6}, g), "delivered before that commit");
  if (present.missing) {
    item(g => el("circle", {class: "missing-decided", cx: 8, cy: 6, r: 5}, g), "commit that decided an output never made visible");
    item(g => el("path", {class: "answer", d: "M4,2L12,10M4,10L12,2"}, g), "the target's answer to a send of it (refused, dropped as a repeat)");
  }
}

function draw(zoom, focusAt) {
  const svg = document.getElementById("timeline");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const end = Math.max(run.sim_time_us, 1);
  const scroll = document.getElementById("scroll");
  const width = Math.max(700, scroll.clientWidth - 4) * zoom;
  const plot = width - 2 * MARGIN;
  const x = us => MARGIN + plot * Math.min(Math.max(us, 0), end) / end;
  const height = BOTTOM + 10;
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  // The row labels stay in view while the timeline scrolls.
  const labels = document.getElementById("labels");
  while (labels.firstChild) labels.removeChild(labels.firstChild);
  labels.setAttribute("width", LABELS);
  labels.setAttribute("height", height);
  const counts = {};
  const count = k => { counts[k] = (counts[k] || 0) + 1; };
  const present = {faults: new Set()};

  rows.forEach((r, i) => {
    for (const [g, w] of [[svg, width], [labels, LABELS]]) {
      if (!r.job) el("rect", {class: "node-band", x: 0, y: r.y, width: w, height: r.h}, g);
      else if (i % 2 === 0) el("rect", {class: "row-band", x: 0, y: r.y, width: w, height: r.h}, g);
    }
    el("text", {class: "row-label" + (r.job ? " job" : ""), x: r.job ? 16 : 4, y: r.y + r.h - (r.job ? 5 : 8)}, labels).textContent = r.label;
  });
  const ticks = 10 * zoom;
  for (let i = 0; i <= ticks; ++i) {
    const t = end * i / ticks;
    el("line", {class: "axis", x1: x(t), x2: x(t), y1: TOP - 4, y2: TOP}, svg);
    const label = el("text", {x: x(t) + (i === ticks ? -2 : 2), y: TOP - 8}, svg);
    if (i === ticks) label.setAttribute("text-anchor", "end");  // the last label inside the picture
    label.textContent = at_(Math.round(t));
  }
  if (run.heal_at_us > 0) {
    el("line", {class: "heal", x1: x(run.heal_at_us), x2: x(run.heal_at_us), y1: TOP, y2: height - 10}, svg,
       "heal: every fault lifted at " + at_(run.heal_at_us));
  }
  for (const f of run.faults) {
    const targets = f.node ? [f.node] : run.nodes.filter(n => n === "store");
    if (f.peer) targets.push(f.peer);
    const c = faultColour(f.kind);
    for (const node of targets) {
      const w = Math.max(2, x(f.at + f.dur) - x(f.at));
      el("rect", {class: "fault", x: x(f.at), y: rowY(node) + 2, width: w, height: rowH(node) - 4, fill: c, stroke: c}, svg,
         f.text);
      el("text", {class: "fault-label", x: x(f.at) + 2, y: rowY(node) + rowH(node) - 5, fill: c}, svg).textContent = f.kind;
      count("fault");
      present.faults.add(f.kind);
    }
  }
  for (const l of run.leases) {
    const c = colour(l.job), key = l.node + "|" + l.job;
    el("rect", {class: "lease", x: x(l.start), y: rowY(key) + 3, width: Math.max(1, x(l.end) - x(l.start)), height: rowH(key) - 6,
                fill: c, stroke: c}, svg,
       "Lease " + l.id + " of " + l.job + " on " + l.node + ": " + at_(l.start) + " to " + (l.open ? "the end" : at_(l.end)));
    count("lease");
  }
  for (const e of run.epochs) {
    const key = e.node + "|" + e.job;
    el("line", {class: "epoch" + (e.violating ? " violating" : ""), x1: x(e.t), x2: x(e.t), y1: rowY(key) + 2, y2: rowY(key) + rowH(key) - 2}, svg,
       e.job + " committed version " + e.version + " at " + at_(e.t) + " under Lease " + e.lease + ": consumed " +
       e.consumed + ", produced " + e.produced + (e.ids.length ? " [" + e.ids.join(" ") + "]" : ""));
    count("epoch");
    if (e.violating) present.violatingEpoch = true;
  }
  for (const ev of run.events) {
    const cy = rowY(ev.node) + rowH(ev.node) / 2;
    if (ev.what === "crash") {
      const cx = x(ev.at);
      el("path", {class: "crash", d: `M${cx - 5},${cy - 5}L${cx + 5},${cy + 5}M${cx - 5},${cy + 5}L${cx + 5},${cy - 5}`}, svg,
         ev.node + " crashed at " + at_(ev.at));
      count("crash");
      present.crash = true;
    } else {
      el("rect", {class: "rejected", x: x(ev.at) - 3, y: cy - 3, width: 6, height: 6}, svg,
         ev.node + ": " + ev.what + " at " + at_(ev.at) + " — " + ev.detail);
      count("rejected");
      present.rejected = true;
    }
  }
  const tbody = document.querySelector("#violating tbody");
  tbody.innerHTML = "";
  for (const d of run.deliveries) {
    const cy = rowY(d.node) + rowH(d.node) / 2;
    // Linked to the commit that decided it, on its job's row; dashed red when it came first.
    if (d.commit !== null) {
      const key = d.commit.node + "|" + d.commit.job;
      const isEarly = early(d);
      el("line", {class: "decided" + (isEarly ? " early" : ""), x1: x(d.t), y1: cy, x2: x(d.commit.t), y2: rowY(key) + rowH(key) / 2}, svg,
         d.id + " delivered at " + at_(d.t) + "; decided by " + d.commit.job + " version " + d.commit.version + " committed at " +
         at_(d.commit.t) + (isEarly ? " — AFTER the delivery" : ""));
      if (isEarly) { count("early"); present.early = true; }
    }
  }
  // Outputs committed and never made visible: the commit that decided each, and every answer
  // the target gave to a send of it, linked.
  for (const m of run.missing) {
    const key = m.decided.node + "|" + m.decided.job;
    const dy = rowY(key) + rowH(key) / 2;
    el("circle", {class: "missing-decided", cx: x(m.decided.t), cy: dy, r: 6}, svg,
       m.decided.job + " version " + m.decided.version + " committed " + m.id + " (key " + m.key + ", payload " + m.payload +
       ") for " + m.sink + " at " + at_(m.decided.t) + "; it was never made visible");
    count("missing");
    present.missing = true;
    const rows = [[at_(m.produced.t), m.produced.node, m.produced.job + " version " + m.produced.version + " committed it"],
                  [at_(m.decided.t), m.decided.node, m.decided.job + " version " + m.decided.version + " committed its delivery"]];
    for (const a of m.answers) {
      const ay = rowY(a.node) + rowH(a.node) / 2;
      el("line", {class: "sent", x1: x(m.decided.t), y1: dy, x2: x(a.t), y2: ay}, svg);
      el("path", {class: "answer", d: "M" + (x(a.t) - 4) + "," + (ay - 4) + "L" + (x(a.t) + 4) + "," + (ay + 4) +
                  "M" + (x(a.t) - 4) + "," + (ay + 4) + "L" + (x(a.t) + 4) + "," + (ay - 4)}, svg,
         a.node + " at " + at_(a.t) + ": " + a.text);
      count("answer");
      rows.push([at_(a.t), a.node, a.text]);
    }
    if (m.answers.length === 0) rows.push(["", m.sink, "no send of it reached the target"]);
    for (const [t, where, what] of rows) {
      const tr = document.createElement("tr");
      cell(tr, t); cell(tr, where); cell(tr, what); cell(tr, m.id); cell(tr, m.key); cell(tr, m.payload);
      tbody.appendChild(tr);
    }
  }
  // Named messages drawn last, on top of the others.
  for (const d of [...run.deliveries.filter(d => !d.violating), ...run.deliveries.filter(d => d.violating)]) {
    el("circle", {class: "delivery" + (d.violating ? " violating" : ""), cx: x(d.t), cy: rowY(d.node) + rowH(d.node) / 2,
                  r: d.violating ? 5 : 3}, svg,
       d.sink + " made " + d.id + " visible at " + at_(d.t) + " (key " + d.key + ", payload " + d.payload + ", from " +
       (d.producer || "a send without producer id") + (d.commit ? ", decided by the commit at " + at_(d.commit.t) : "") + ")");
    count(d.violating ? "violating" : "delivery");
    if (d.violating) {
      present.violating = true;
      const tr = document.createElement("tr");
      cell(tr, at_(d.t)); cell(tr, d.node);
      cell(tr, (d.again ? "delivered again" : "delivered") + (d.commit ? "; its commit at " + at_(d.commit.t) : "; no commit decided it"));
      cell(tr, d.id); cell(tr, d.key); cell(tr, d.payload);
      tbody.appendChild(tr);
    }
  }
  for (const e of run.epochs) {
    if (!e.violating) continue;
    const tr = document.createElement("tr");
    cell(tr, at_(e.t)); cell(tr, e.node); cell(tr, e.job + " epoch v" + e.version); cell(tr, e.ids.join(" ")); cell(tr, ""); cell(tr, "");
    tbody.appendChild(tr);
  }
  // No table of named messages when no check failed.
  document.getElementById("named").hidden = tbody.children.length === 0;
  legend(present);
  if (focusAt !== undefined) scroll.scrollLeft = Math.max(0, x(focusAt) - scroll.clientWidth / 2);
  document.body.dataset.rendered = Object.entries(counts).map(([k, v]) => k + ":" + v).sort().join(" ");
}

header();
const zoom = document.getElementById("zoom");
const first = firstViolation();
let initial = 1;
if (first !== null) {
  // Opened on the first violation: 50 ms of simulated time across the view.
  initial = Math.min(400, Math.max(1, Math.round(Math.max(run.sim_time_us, 1) / 50000)));
  zoom.value = initial;
  document.getElementById("focus").textContent = "— opened at the first violation: " + first.what + " at " + at_(first.t);
}
document.getElementById("zoom-label").textContent = initial + "×";
zoom.addEventListener("input", () => {
  document.getElementById("zoom-label").textContent = zoom.value + "×";
  draw(+zoom.value, first !== null ? first.t : undefined);
});
draw(initial, first !== null ? first.t : undefined);
if (first !== null) document.body.dataset.focus = String(first.t);
</script>
</body>
</html>
)PAGE";


json epoch_json(const checkers::EpochRecord& e) {
  return {{"t", e.commit_time}, {"node", e.node}, {"job", e.job}, {"version", e.version}};
}

// The outputs of a failed run that a sink's epoch committed and its target never made visible
// (for an at-most-once sink, only those a failing check names: it may drop), the first 20 in
// the order they were decided: where each was produced, the sink epoch that decided its
// delivery, and each answer the target gave to a send of it (its trace lines: refused,
// dropped as a repeat).
template <typename IsNamed>
json missing_outputs(const checkers::PipelineHistory& h, const simulated::RunOutcome& r, const IsNamed& is_named) {
  constexpr size_t kMissingShown = 20, kAnswersShown = 20;
  if (r.passed) return json::array();
  std::set<std::pair<std::string, uint64_t>> visible;
  for (const auto& d : h.deliveries) visible.insert({d.sink, d.message.id});
  std::set<std::string> may_drop;
  for (const auto& s : h.sinks) {
    if (s.guarantee == checkers::Guarantee::kAtMostOnce) may_drop.insert(s.sink);
  }
  std::map<uint64_t, const checkers::EpochRecord*> produced_by;
  std::map<std::pair<std::string, uint64_t>, std::pair<const checkers::EpochRecord*, const checkers::MessageRecord*>> decided;
  for (const auto& e : h.epochs) {
    if (e.commit_time < 0) continue;
    for (const auto& m : e.produced) {
      auto [it, fresh] = produced_by.try_emplace(m.id, &e);
      if (!fresh && e.commit_time < it->second->commit_time) it->second = &e;
    }
    if (!e.job.starts_with("sink/")) continue;
    for (const auto& m : e.consumed) {
      if ((may_drop.count(e.computation) > 0 && !is_named(m.id)) || visible.count({e.computation, m.id}) > 0) continue;
      auto [it, fresh] = decided.try_emplace({e.computation, m.id}, &e, &m);
      if (!fresh && e.commit_time < it->second.first->commit_time) it->second = {&e, &m};
    }
  }
  std::vector<std::tuple<int64_t, std::string, const checkers::EpochRecord*, const checkers::MessageRecord*>> order;
  for (const auto& [sink_id, by] : decided) order.emplace_back(by.first->commit_time, sink_id.first, by.first, by.second);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a), std::get<3>(a)->id) < std::tie(std::get<0>(b), std::get<1>(b), std::get<3>(b)->id);
  });
  json out = json::array();
  for (const auto& [when, sink, e, m] : order) {
    if (out.size() == kMissingShown) break;
    const std::string id = format_id(m->id);
    json answers = json::array();
    for (const std::string& line : r.trace) {
      if (answers.size() == kAnswersShown) break;
      const TraceLine fields = split_trace_line(line);
      if (!fields.node.starts_with("target-") || fields.text.find(id) == std::string_view::npos) continue;
      answers.push_back({{"t", parse_duration(fields.time).value_or(0)}, {"node", fields.node}, {"text", fields.text}});
    }
    const auto producer = produced_by.find(m->id);
    out.push_back({{"sink", sink},
                   {"id", id},
                   {"key", std::to_string(m->key)},
                   {"payload", m->payload.substr(0, 80)},
                   {"produced", producer == produced_by.end() ? epoch_json(*e) : epoch_json(*producer->second)},
                   {"decided", epoch_json(*e)},
                   {"answers", answers}});
  }
  return out;
}

}  // namespace

std::string render_explain_html(const ExplainInput& input) {
  const simulated::PipelineRun& run = *input.run;
  const checkers::PipelineHistory& h = run.history;
  const simulated::RunOutcome& r = run.outcome;
  // Failing checks name MessageIds and keys; when they name ids of messages this run
  // committed, those are what the checks are about (a key names every message of it).
  const std::set<std::string> named = checkers::ids_named_by_failures(r.verdicts);
  const std::set<uint64_t> named_keys = checkers::keys_named_by_failures(r.verdicts);
  const auto is_named = [&](uint64_t v) { return named.count(format_id(v)) > 0; };
  bool names_ids = false;
  for (const auto& e : h.epochs) {
    for (const auto& m : e.produced) names_ids = names_ids || is_named(m.id);
  }
  const auto is_named_message = [&](const checkers::MessageRecord& m) {
    return is_named(m.id) || (!names_ids && named_keys.count(m.key) > 0);
  };

  json nodes = json::array();
  for (const auto& n : run.nodes) nodes.push_back(n);
  json leases = json::array();
  for (const auto& [id, span] : h.leases) {
    auto owner = run.lease_owners.find(id);
    if (owner == run.lease_owners.end()) continue;  // a Lease no job ever tried to commit under
    // Leases alive at the end of the run are drawn to the end.
    const bool open = span.ended_at < 0 || span.ended_at > r.sim_time_us;
    leases.push_back({{"id", std::to_string(id)},
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
        violating = violating || is_named_message(m);
        if (ids.size() < 20) ids.push_back(format_id(m.id));
      }
    }
    epochs.push_back({{"job", e.job},
                      {"node", e.node},
                      {"lease", std::to_string(e.lease)},
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
  // The commit that decided each delivery: the first committed epoch of the delivering job
  // that consumed the message (its outbox row, or its synchronous write, was made there).
  std::map<std::pair<std::string, uint64_t>, const checkers::EpochRecord*> decided_by;
  for (const auto& e : h.epochs) {
    for (const auto& m : e.consumed) {
      auto [it, fresh] = decided_by.try_emplace({e.job, m.id}, &e);
      if (!fresh && e.commit_time < it->second->commit_time) it->second = &e;
    }
  }
  json deliveries = json::array();
  std::set<std::pair<std::string, uint64_t>> delivered;  // (sink, id) seen so far
  for (const auto& d : h.deliveries) {
    const bool again = !delivered.insert({d.sink, d.message.id}).second;
    const auto decided = decided_by.find({d.producer_job, d.message.id});
    json commit = nullptr;
    if (decided != decided_by.end()) {
      const checkers::EpochRecord& e = *decided->second;
      commit = {{"t", e.commit_time}, {"node", e.node}, {"job", e.job}, {"version", e.version}};
    }
    deliveries.push_back({{"sink", d.sink},
                          {"commit", commit},
                          {"node", sink_target_node(d.sink)},
                          {"t", d.time},
                          {"id", format_id(d.message.id)},
                          {"key", std::to_string(d.message.key)},
                          {"payload", d.message.payload.substr(0, 80)},
                          {"producer", d.producer_job},
                          {"again", again},
                          {"violating", is_named_message(d.message)}});
  }
  json missing = missing_outputs(h, r, is_named);
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
                  {"missing", missing},
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
