#include "scheduler/status_page.h"

#include "nlohmann/json.hpp"
#include "proto/conversions.h"

namespace gangrun::scheduler {
namespace {

constexpr char kPage[] = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gangrun</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em}
table{border-collapse:collapse;margin:.6em 0 1.2em}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
th{background:#f0f0f0}
.phase{font-weight:bold}
.straggler{background:#fff3c4}
.failed{color:#b00}
#error{color:#b00}
.bar{display:flex;width:480px;height:14px;border:1px solid #999}
.bar span{display:block;height:100%}
.p-forming{background:#9ab}.p-starting{background:#fc6}.p-training{background:#4a4}
.p-stalled{background:#c33}.p-detecting{background:#e74}.p-stopping{background:#a6c}
.p-backoff{background:#888}.p-health_checks{background:#cb4}.p-reforming{background:#69d}
</style></head>
<body>
<h1 id="title">gangrun</h1>
<div id="summary"></div>
<div id="error"></div>
<div id="content"></div>
<script>
"use strict";
function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null || text === "" ? "-" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
}
function table(id, headers, rows) {
  const t = document.createElement("table");
  t.id = id;
  const head = t.insertRow();
  for (const h of headers) {
    const th = document.createElement("th");
    th.textContent = h;
    head.appendChild(th);
  }
  for (const r of rows) {
    const tr = t.insertRow();
    if (r.cls) tr.className = r.cls;
    for (const c of r.cells) cell(tr, c);
  }
  return t;
}
// The ledger's phases in its order (scheduler/ledger.h), and seconds as people read them.
const PHASES = ["queued", "forming", "starting", "training", "stalled", "detecting", "stopping", "backoff",
                "health_checks", "reforming"];
function seconds(v) {
  v = Number(v) || 0;
  if (v < 10) return v.toFixed(1) + " s";
  v = Math.round(v);
  return v < 60 ? v + " s" : Math.floor(v / 60) + " m " + (v % 60) + " s";
}
// Each generation's phases as a bar (width by seconds) and in words.
function ledgerTable(ledger) {
  const t = table("ledger", ["generation", "where its time went", "seconds by phase"], []);
  for (const g of ledger.generations || []) {
    const by = g.seconds || {};
    const total = PHASES.reduce((sum, p) => sum + (Number(by[p]) || 0), 0);
    if (total <= 0) continue;
    const tr = t.insertRow();
    cell(tr, Number(g.generation || 0) === 0 ? "before the first" : g.generation);
    const td = document.createElement("td");
    const bar = document.createElement("div");
    bar.className = "bar";
    for (const p of PHASES) {
      const v = Number(by[p]) || 0;
      if (v <= 0) continue;
      const span = document.createElement("span");
      span.className = "p-" + p;
      span.style.width = (100 * v / total) + "%";
      span.title = p + " " + seconds(v);
      bar.appendChild(span);
    }
    td.appendChild(bar);
    tr.appendChild(td);
    cell(tr, PHASES.filter(p => Number(by[p]) > 0).map(p => p + " " + seconds(by[p])).join(", "));
  }
  return t;
}
function short(name) { return String(name || "").replace(/^[A-Z]+_STATE_|^JOB_PHASE_|^KIND_/, "").toLowerCase(); }
function showJob(s, events) {
  document.getElementById("title").textContent = "gangrun job " + (s.job_id || "");
  const summary = document.getElementById("summary");
  summary.innerHTML = "";
  const p = document.createElement("span");
  p.className = "phase";
  p.id = "phase";
  p.textContent = short(s.phase);
  summary.appendChild(p);
  summary.appendChild(document.createTextNode(
    "  generation " + s.generation + "  restarts " + s.restarts + "/" + s.max_restarts +
    "  workers " + s.world_size + (s.spare_nodes ? "  spares " + s.spare_nodes : "")));
  if (s.last_generation_end) {
    const last = document.createElement("p");
    last.id = "last";
    last.textContent = "last: " + s.last_generation_end;
    summary.appendChild(last);
  }
  if (s.ledger) {
    const time = document.createElement("p");
    time.id = "time";
    time.textContent = "time: " + seconds(s.ledger.wall_seconds) + " in all, ETTR " +
      Math.round(100 * (Number(s.ledger.ettr) || 0)) + "% (training " +
      seconds((s.ledger.seconds || {}).training) +
      (Number(s.ledger.lost_work_seconds) > 0
         ? ", " + seconds(s.ledger.lost_work_seconds) + " of it redone after restarts" : "") +
      (s.ledger.checkpoint_step >= 0 ? "; last checkpoint: step " + s.ledger.checkpoint_step : "") +
      "), now " + s.ledger.phase;
    summary.appendChild(time);
  }
  const content = document.getElementById("content");
  content.innerHTML = "";
  if (s.ledger) content.appendChild(ledgerTable(s.ledger));
  content.appendChild(table("nodes", ["node", "address", "node rank", "launcher pid", "state"],
    (s.nodes || []).map(n => ({cells: [n.node_name, n.host_address,
      n.node_rank < 0 ? "-" : n.node_rank, n.launcher_pid, short(n.state)]}))));
  const workers = [];
  for (const n of s.nodes || []) for (const w of n.workers || []) {
    const reported = Number(w.reports) > 0;
    workers.push({cls: w.straggler ? "straggler" : (short(w.state) === "failed" ? "failed" : ""),
      cells: [w.rank, n.node_name, w.pid, short(w.state), reported ? w.step : "-",
              reported ? Number(w.progress_age_seconds).toFixed(1) + " s" : "-",
              w.step_seconds > 0 ? Number(w.step_seconds).toFixed(3) : "-",
              w.straggler ? "straggler" : ""]});
  }
  workers.sort((a, b) => a.cells[0] - b.cells[0]);
  content.appendChild(table("workers", ["rank", "node", "pid", "state", "step", "progress age",
    "s/step", ""], workers));
  content.appendChild(table("events", ["from", "to", "why"],
    (events || []).slice().reverse().map(e => ({cells: [e.from, e.to, e.why]}))));
}
function showDaemon(d) {
  document.getElementById("title").textContent = "gangrun scheduler (daemon)";
  document.getElementById("summary").textContent =
    (d.agents || []).length + " agent(s), " + (d.jobs || []).length + " job(s) running or waiting, " +
    (d.jobs_submitted || 0) + " submitted";
  const content = document.getElementById("content");
  content.innerHTML = "";
  content.appendChild(table("agents", ["agent", "name", "address", "pid", "slots", "used", "jobs"],
    (d.agents || []).map(a => ({cells: [a.agent_id, a.name, a.address, a.pid, a.slots,
      a.used_slots, (a.jobs || []).join(", ")]}))));
  content.appendChild(table("jobs", ["job", "phase", "generation", "workers", "last"],
    (d.jobs || []).map(j => ({cells: [j.job_id, short(j.phase), j.generation, j.world_size,
                                      j.last_generation_end || "-"]}))));
  content.appendChild(table("finished", ["job", "outcome", "restarts", "wall", "ETTR", "command"],
    (d.finished || []).map(f => ({
      cls: short(f.outcome && f.outcome.kind) === "succeeded" ? "" : "failed",
      cells: [f.job_id, short(f.outcome && f.outcome.kind), f.restarts || 0,
              f.submitted_unix > 0 && f.ended_unix >= f.submitted_unix
                  ? (f.ended_unix - f.submitted_unix).toFixed(1) + " s" : "-",
              f.outcome && f.outcome.ledger
                  ? Math.round(100 * (Number(f.outcome.ledger.ettr) || 0)) + "%" : "-",
              f.command]}))));
}
async function refresh() {
  try {
    const r = await fetch("status.json", {cache: "no-store"});
    const data = await r.json();
    document.getElementById("error").textContent = "";
    if (data.status) showJob(data.status, data.events); else showDaemon(data);
  } catch (e) {
    document.getElementById("error").textContent = "cannot reach gangrun: " + e;
  }
  setTimeout(refresh, 2000);
}
refresh();
</script>
</body></html>
)html";

}  // namespace

const std::string& StatusPageHtml() {
  static const std::string page = kPage;
  return page;
}

std::string JobStatusJson(const Scheduler& scheduler, const Telemetry& telemetry) {
  const std::string status = proto::ToJson(scheduler.Status());
  nlohmann::json events = nlohmann::json::array();
  for (const auto& t : telemetry.transitions()) {
    events.push_back({{"from", t.from}, {"to", t.to}, {"why", t.why}});
  }
  return "{\"status\": " + status + ", \"events\": " + events.dump() + "}";
}

}  // namespace gangrun::scheduler
