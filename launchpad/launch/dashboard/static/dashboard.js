// The dashboard's page: polls the program's status and draws it. Every value from the
// server reaches the page as text (textContent, never HTML), so names and tracebacks show
// as written, whatever they hold.
"use strict";

const TOKEN = new URLSearchParams(window.location.search).get("token") || "";
const REFRESH_MS = 1000;
const STATES = ["pending", "starting", "running", "restarting", "stopped", "failed", "stopping"];
let selected = null;  // the node whose details are shown ('label/index')
let latest = null;    // the last status read

function api(path) {
  return fetch(path, {headers: {Authorization: "Bearer " + TOKEN}, cache: "no-store"})
    .then((response) => {
      if (!response.ok) throw new Error(path + ": HTTP " + response.status);
      return response.json();
    });
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function statePill(state) {
  return el("span", state, "pill" + (STATES.includes(state) ? " state-" + state : ""));
}

function secs(value) {
  if (value === null || value === undefined) return "";
  if (value < 1e-3) return (value * 1e6).toFixed(0) + " µs";
  if (value < 1) return (value * 1e3).toFixed(value < 0.01 ? 2 : 1) + " ms";
  return value.toFixed(2) + " s";
}

function duration(value) {
  if (value === null || value === undefined) return "";
  const total = Math.floor(value);
  const h = Math.floor(total / 3600), m = Math.floor((total % 3600) / 60), s = total % 60;
  return h ? `${h}h ${m}m ${s}s` : m ? `${m}m ${s}s` : `${s}s`;
}

function bytes(value) {
  if (value === null || value === undefined) return "";
  return (value / (1024 * 1024)).toFixed(1) + " MiB";
}

function number(value, digits) {
  return value === null || value === undefined ? "" : value.toFixed(digits);
}

function nodeCallRate(node) {
  const rates = Object.values(node.methods).map((m) => m.calls_per_sec);
  return rates.length ? number(rates.reduce((a, b) => a + b, 0), 1) : "";
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const [value, className] of cells) {
    const td = el("td", null, className);
    if (value instanceof Node) td.appendChild(value); else td.textContent = value;
    tr.appendChild(td);
  }
  return tr;
}

function drawHeader(status) {
  document.getElementById("program").textContent = status.program;
  const state = document.getElementById("program-state");
  state.textContent = status.state;
  state.className = "pill state-" + (STATES.includes(status.state) ? status.state : "");
  const counts = {};
  for (const node of status.nodes) counts[node.state] = (counts[node.state] || 0) + 1;
  const summary = Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ");
  document.getElementById("summary").textContent =
    `${status.launch_type} · ${status.nodes.length} nodes: ${summary}`;
  document.getElementById("updated").textContent =
    "updated " + new Date(status.now * 1000).toLocaleTimeString();
  const banner = document.getElementById("failure");
  // Its first line: the failed node's traceback is in its details.
  const why = (status.failure || status.stop_reason ||
               (status.state === "pending" ? "pending: " + status.pending : "")).split("\n")[0];
  banner.hidden = !why;
  banner.textContent = why;
}

// The program's changes while it runs (a group scaled, a new version applied), newest first.
function drawChanges(status) {
  const changes = status.changes || [];
  document.getElementById("changes-section").hidden = changes.length === 0;
  document.getElementById("changes").replaceChildren(...changes.slice().reverse().map(
    (change) => el("li", new Date(change.at * 1000).toLocaleTimeString() + "  " + change.what)));
}

function drawNodes(status) {
  const body = document.querySelector("#nodes tbody");
  body.replaceChildren(...status.nodes.map((node) => {
    const tr = row([
      [node.name], [node.kind], [statePill(node.state)], [node.host], [node.pid || ""],
      [node.restarts, "num"], [duration(node.uptime_secs), "num"],
      [node.cpu_percent === null ? "" : number(node.cpu_percent, 0) + "%", "num"],
      [bytes(node.memory_bytes), "num"], [nodeCallRate(node), "num"],
    ]);
    tr.dataset.node = node.name;
    tr.dataset.state = node.state;
    if (node.name === selected) tr.classList.add("selected");
    tr.addEventListener("click", () => select(node.name));
    return tr;
  }));
}

function drawMethods(status) {
  const rows = [];
  for (const node of status.nodes) {
    for (const [name, m] of Object.entries(node.methods)) {
      const tr = row([
        [node.name], [name], [m.calls, "num"], [m.errors, "num"],
        [number(m.calls_per_sec, 1), "num"], [secs(m.p50_secs), "num"],
        [secs(m.p90_secs), "num"], [secs(m.p99_secs), "num"],
      ]);
      tr.dataset.node = node.name;
      tr.dataset.method = name;
      rows.push(tr);
    }
  }
  document.querySelector("#methods tbody").replaceChildren(...rows);
  document.getElementById("no-methods").hidden = rows.length > 0;
}

function fact(list, name, value) {
  list.append(el("dt", name), el("dd", value === "" || value === null ? "-" : value));
}

function drawDetail(status) {
  const section = document.getElementById("detail");
  const node = status.nodes.find((n) => n.name === selected);
  section.hidden = !node;
  if (!node) return;
  document.getElementById("detail-title").textContent = `${node.name} (${node.kind})`;
  const facts = document.getElementById("detail-facts");
  facts.replaceChildren();
  fact(facts, "state", node.state);
  fact(facts, "host / pid", node.host ? `${node.host} / ${node.pid}` : "");
  fact(facts, "addresses",
       Object.entries(node.addresses).map(([k, v]) => `${k}: ${v}`).join(", "));
  fact(facts, "restarts", String(node.restarts));
  fact(facts, "cpu time", node.cpu_secs === null ? "" : secs(node.cpu_secs));
  const failures = document.getElementById("failures");
  if (!node.failures.length) {
    failures.replaceChildren(el("p", "none", "none"));
    return;
  }
  failures.replaceChildren(...node.failures.slice().reverse().map((failure) => {
    const box = el("div", null, "failure");
    const reason = el("div", failure.reason, "reason");
    const when = new Date(failure.at * 1000).toLocaleTimeString();
    reason.appendChild(el("span", ` at ${when}${failure.restarted ? ", restarted" : ""}`,
                          "when"));
    box.appendChild(reason);
    if (failure.traceback) box.appendChild(el("pre", failure.traceback, "traceback"));
    return box;
  }));
}

function drawLog() {
  if (selected === null) return;
  const asked = selected;
  api("api/logs?node=" + encodeURIComponent(asked)).then((log) => {
    if (asked !== selected) return;
    const pre = document.getElementById("log");
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = log.kept ? (log.text || "(nothing written yet)")
      : "This launch keeps no logs (local_mp keeps them with terminal='output_to_files').";
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }).catch(() => {});
}

function select(name) {
  selected = name;
  document.getElementById("log").textContent = "";
  if (latest) draw(latest);
  drawLog();
}

function draw(status) {
  drawHeader(status);
  drawNodes(status);
  drawChanges(status);
  drawMethods(status);
  drawDetail(status);
}

function drawGraph() {
  api("api/graph").then((graph) => {
    if (graph.svg) {
      const image = document.getElementById("graph-image");
      image.src = "graph.svg?token=" + encodeURIComponent(TOKEN);
      image.hidden = false;
    } else {
      const text = document.getElementById("graph-text");
      text.textContent = graph.text;
      text.hidden = false;
      document.getElementById("graph-hint").hidden = false;
    }
  }).catch(() => setTimeout(drawGraph, REFRESH_MS));
}

function refresh() {
  api("api/status").then((status) => {
    latest = status;
    draw(status);
    drawLog();
  }).catch(() => {
    document.getElementById("updated").textContent = "the dashboard is not answering";
  }).finally(() => setTimeout(refresh, REFRESH_MS));
}

drawGraph();
refresh();
