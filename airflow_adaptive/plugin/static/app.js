// airflow-adaptive UI: reads the plugin's JSON endpoints (same origin, the user's own session) and
// draws tables and uPlot charts. Read-only: it only ever sends GET requests.
"use strict";

const view = document.getElementById("view");
const GIB = 1024 ** 3;
// source "": the server's default (live when there is any, else imported); then the one it chose.
const state = { sort: "attempts", order: "desc", page: 1, search: "", start: "", end: "", source: "" };

function alignHeads() {  // each header takes its column's alignment (text left, numbers right)
  for (const table of view.querySelectorAll("table")) {
    const first = table.querySelector("tbody tr");
    if (!first) continue;
    table.querySelectorAll("thead th").forEach((th, i) => {
      const cell = first.children[i];
      if (cell) th.style.textAlign = getComputedStyle(cell).textAlign;
    });
  }
}
function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

async function api(path) {
  const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  const detail = body.detail ? (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)) : response.statusText;
  if (endsSession(response.status, detail)) throw new SessionEnded(detail);
  if (!response.ok) throw new Error(detail);
  return body;
}
const SOURCE_NOTES = {
  live: "Live: the attempts Airflow ran, sized by the provider (or only observed, at the users' requests).",
  imported: "Imported: attempts read from trace files by <code>airflow-adaptive history import</code>. They ran at the requests their traces record, so they save nothing against them; they warm-start the decisions.",
  all: "All: live and imported attempts together. The saving is shown for each source apart: over both, imported attempts would pull the live saving towards 0.",
};
function savingCards(data) {  // one source's saving, or each source's apart: never one over both
  const good = (fraction) => (fraction > 0 ? "good" : "");  // an imported trace's 0 % is no success
  if (!data.saving_by_source) return card("Saved vs users' requests", pct(data.saving_fraction), "saving_fraction", good(data.saving_fraction));
  return Object.entries(data.saving_by_source).map(([source, s]) => card(`Saved vs users' requests, ${source}`,
    s.attempts ? pct(s.saving_fraction) : "–", `saving_fraction_${source}`, good(s.saving_fraction))).join("");
}
function card(label, value, key, cls = "") {
  return `<div class="card" data-key="${key}"><div class="label">${label}</div><div class="value ${cls}">${value}</div></div>`;
}
function chart(el, title, xs, series, opts = {}) {
  const width = chartWidth(el);
  const format = opts.format || ((v) => num(v, 2));
  const plot = new uPlot({
    title, width, height: 260,
    axes: [{ stroke: css("--muted"), grid: { stroke: css("--line") }, space: 90, ...(opts.xIncrs && { incrs: opts.xIncrs }) },
           { stroke: css("--muted"), grid: { stroke: css("--line") }, size: 70, splits: opts.ySplits,
             values: (u, ticks) => ticks.map(format) }],
    series: [{}, ...series.map((s) => ({ spanGaps: false, value: (u, v) => (v === null || v === undefined ? "–" : format(v)), ...s }))],
    // attempts that all ended in one second (a trace without times): half a day each side, not the
    // 1,000 days uPlot gives one time (it pads before the range function sees min === max)
    scales: { x: { time: true, range: (u, min, max) => (oneTime(u.data[0]) ? [u.data[0][0] - DAY_S / 2, u.data[0][0] + DAY_S / 2] : [min, max]) } },
    hooks: { ready: [legendShowsNewest], setCursor: [legendShowsNewest] },
  }, [xs, ...series.map((s) => s.data)], el);
  followWidth(el, plot);
  el.uplot = plot;  // for the browser test: the data and axes as drawn
  return plot;
}

async function overview() {
  const data = await api(`api/overview?${range()}`);
  state.source = data.source;
  view.innerHTML = `<h2>Allocation overview</h2>
    <div class="toolbar">${rangeInputs()}</div>
    <p class="muted" id="source-note">${SOURCE_NOTES[data.source] || ""}</p>
    <div class="cards">
      ${card("Task families sized", num(data.families, 0), "families")}
      ${card("Attempts", num(data.attempts, 0), "attempts")}
      ${card("OOM kills / 100", num(data.oom_per_100, 2), "oom_per_100", data.oom_per_100 > 5 ? "bad" : "")}
      ${card("Retries / 100", num(data.retries_per_100, 2), "retries_per_100")}
      ${card("Requested GB·h", num(data.requested_gb_h, 2), "requested_gb_h")}
      ${card("Used GB·h", num(data.used_gb_h, 2), "used_gb_h")}
      ${card("Wasted GB·h", num(data.wasted_gb_h, 2), "wasted_gb_h")}
      ${card("Users asked GB·h", num(data.user_requested_gb_h, 2), "user_requested_gb_h")}
      ${savingCards(data)}
    </div>
    <div class="chart" id="trend"></div>`;
  bindRange(overview);
  const { xs, rows } = dailySeries(data.days);
  if (!xs.length) {
    const none = data.source === "all" ? "" : ` ${data.source}`;
    document.getElementById("trend").outerHTML = `<p class="muted" id="trend-caption">No${none} attempts in these days.</p>`;
    return;
  }
  const dots = { show: true, size: 5 };  // a day between empty ones is a dot, not lost
  const line = (label, color, key) => ({ label, stroke: css(color), points: dots, data: rows.map((d) => (d ? d[key] : null)) });
  chart(document.getElementById("trend"), "GB·h per day", xs, [
    line("users asked", "--muted", "user_requested_gb_h"), line("requested", "--accent", "requested_gb_h"),
    line("used", "--good", "used_gb_h"), line("wasted", "--bad", "wasted_gb_h"),
  ], { format: gbh, xIncrs: DAY_TICKS });
  const first = dayStart(data.days[0].day), last = dayStart(data.days[data.days.length - 1].day);
  const empty = Math.round((last - first) / DAY_S) + 1 - data.days.length;
  document.getElementById("trend").insertAdjacentHTML("afterend", `<p class="muted" id="trend-caption">${data.days.length} days
    with attempts from ${esc(data.days[0].day)} to ${esc(data.days[data.days.length - 1].day)}${empty ? `; the ${empty} days
    without any are gaps` : ""}. Drag across the chart to zoom in, double-click to zoom out, or choose the days above.</p>`);
}

const NO_REQUEST = "no memory request was recorded for these attempts: nothing to measure waste against";
// Ticks of the per-day chart: whole days (a few days chosen drew 6-hourly ticks), weeks, months, years.
const DAY_TICKS = [1, 2, 7, 14, 30, 91, 182, 365, 730].map((days) => days * DAY_S);
const REPLAYED = "the rule replayed on this family's past peaks, each sized from those before it: kills it would have caused, not kills that happened (OOM column)";
function decisionCell(d) {  // the list shows the rule in a line; the whole explanation on hover and on the family's page
  if (!d) return `<td class="why" data-col="decision"><div class="decision">user's request</div></td>`;
  const summary = d.rule
    ? `${d.rule} · ${pct(d.rule_oom_rate)} OOM-killed in replay${d.small_sample_bound_bytes ? ` · small-sample bound ${bytes(d.small_sample_bound_bytes)}` : ""}`
    : d.explanation;
  return `<td class="why" data-col="decision" title="${esc(d.explanation)}"><div class="decision"><b>${bytes(d.memory_request_bytes)}</b>
    ${esc(d.strategy)}<span class="clip">${esc(summary)}</span></div></td>`;
}

const COLUMNS = [
  ["task_family", "Task family"], ["attempts", "Attempts"], ["completed", "Completed"], ["oom_killed", "OOM kills"],
  [null, "P50 peak"], [null, "P95 peak"], [null, "Decision"], ["requested_byte_seconds", "Requested GB·h"],
  [null, "Wasted GB·h"], [null, "Saving"], ["last_day", "Last run"],
];
const HEAD_TITLES = {
  "OOM kills": "attempts that were really OOM-killed, as recorded",
  Decision: `the next request and its rule; the rule's OOM-killed share is ${REPLAYED}`,
  Saving: "against the users' own requests, of live or of imported attempts: with All chosen, none (choose one)",
};
async function families() {
  const q = range();
  q.set("sort", state.sort); q.set("order", state.order); q.set("page", state.page); q.set("search", state.search);
  const data = await api(`api/families?${q}`);
  state.source = data.source;
  const pages = Math.max(1, Math.ceil(data.total / data.limit));
  const head = COLUMNS.map(([key, label]) => {
    const arrow = key === state.sort ? (state.order === "desc" ? " ▾" : " ▴") : "";
    const title = HEAD_TITLES[label] ? ` title="${esc(HEAD_TITLES[label])}"` : "";
    return key ? `<th data-sort="${key}"${title}>${label}${arrow}</th>` : `<th${title}>${label}</th>`;
  }).join("");
  const rows = data.families.map((f) => `<tr data-family="${esc(f.task_family)}">
      <td class="family"><div><a href="${familyHash(f.task_family)}" title="${esc(f.task_family)}">${breakable(f.task_family)}</a>${
        f.history_hidden ? ` <span class="muted" title="${esc(f.hidden_note)}">(part hidden)</span>` : ""}</div></td>
      <td data-col="attempts">${num(f.attempts, 0)}</td><td>${num(f.completed, 0)}</td>
      <td data-col="oom_killed" class="${f.oom_killed ? "bad" : ""}">${num(f.oom_killed, 0)}</td>
      <td>${bytes(f.p50_peak_bytes)}</td><td>${bytes(f.p95_peak_bytes)}</td>
      ${decisionCell(f.decision)}
      ${f.requested_gb_h ? `<td>${gbh(f.requested_gb_h)}</td><td>${gbh(f.wasted_gb_h)}</td>`
        : `<td title="${NO_REQUEST}">–</td><td title="${NO_REQUEST}">–</td>`}<td data-col="saving">${pct(f.saving_fraction)}</td><td class="text">${esc(f.last_day)}</td></tr>`).join("");
  view.innerHTML = `<h2>Task families</h2>
    <div class="toolbar"><input id="search" placeholder="Search task families" value="${esc(state.search)}">
      ${rangeInputs()}<span class="muted" id="count">${num(data.total, 0)} families</span></div>
    <div class="scroll"><table id="families-table"><thead><tr>${head}</tr></thead><tbody>${rows}</tbody></table></div>
    ${data.total ? "" : `<p class="muted" id="no-families">No task family ${state.search ? `matches “${esc(state.search)}”` : "has attempts"} in these days.</p>`}
    <div class="toolbar"><button id="prev" ${state.page <= 1 ? "disabled" : ""}>Previous</button>
      <span>page ${state.page} of ${pages}</span><button id="next" ${state.page >= pages ? "disabled" : ""}>Next</button></div>`;
  bindRange(families);
  document.getElementById("search").addEventListener("change", (e) => { state.search = e.target.value; state.page = 1; refresh(families); });
  document.getElementById("prev").addEventListener("click", () => { state.page--; refresh(families); });
  document.getElementById("next").addEventListener("click", () => { state.page++; refresh(families); });
  for (const th of view.querySelectorAll("th[data-sort]")) {
    th.addEventListener("click", () => {
      const key = th.dataset.sort;
      state.order = state.sort === key && state.order === "desc" ? "asc" : "desc";
      state.sort = key; state.page = 1; refresh(families);
    });
  }
}

function peakText(a) {  // an OOM kill's true peak is unknown: at least the limit it was killed at
  if (a.oom_killed) return a.memory_limit_bytes ? `≥ ${bytes(a.memory_limit_bytes)} (OOM-killed at limit)` : "unknown (OOM-killed, no limit)";
  if (a.peak_is_lower_bound && a.peak_memory_bytes) return `≥ ${bytes(a.peak_memory_bytes)} (sampled)`;
  return bytes(a.peak_memory_bytes);
}
function labelText(labels) {
  const pairs = Object.entries(labels || {});
  return pairs.length ? pairs.map(([k, v]) => `${k}=${v}`).join(", ") : "none";
}
function budgetText(d, attempts, oom) {  // the rule's replayed kill rate, never to be read as real kills
  if (!d.rule) return "";
  const level = d.small_sample_bound_level, own = d.small_sample_bound_own_spread;
  const calibrated = level && level !== d.oom_target ? `at P${num(100 * (1 - level), 1)}: on the store's
    ${own != null ? "steady " : ""}families, a bound at that level over each family's earlier peaks let
    ${num(100 * d.oom_target, 1)} % of their next peaks through` : "";
  const at = own != null ? ` (on their own spread of log peaks, ${num(own, 3)}: far below the prior's${
    calibrated ? `; ${calibrated}` : ""})` : calibrated ? ` (${calibrated})` : "";
  const few = d.small_sample_bound_bytes ? ` Too few peaks to judge it yet (fewer than ${Math.ceil(1 / d.oom_target)}): at least
    ${bytes(d.small_sample_bound_bytes)}, ${d.small_sample_bound_kind === "gap" ? `their gap bound over the two largest
    peaks${calibrated ? ` (${calibrated})` : ""}` : `their log-normal prediction bound${at}`}, at most the request.` : "";
  return `<p id="budget">Rule <b>${esc(d.rule)}</b>: replayed on this family's past peaks, each task sized from the peaks before
    it (recent ones weigh more), it would have OOM-killed ${num(100 * d.rule_oom_rate, 1)} % of them. Budget
    <code>max_oom_rate</code> ${num(100 * d.max_oom_rate, 1)} %, so rules aim at ${num(100 * d.oom_target, 1)} %.${few}
    Recorded: ${oom} of the ${attempts} attempts shown were really OOM-killed. The what-if below is a third number: each whole
    strategy replayed attempt by attempt.</p>`;
}
// A family's name is any text ('/', ':', newlines): the API takes it as a query parameter, the
// address as one percent-encoded segment.
function familyHash(name) { return `#/family/${encodeURIComponent(name)}`; }
function familyApi(path, name) { return `${path}?${new URLSearchParams({ name })}`; }
async function family(name) {
  const data = await api(familyApi("api/family", name));
  if (!Array.isArray(data.attempts)) throw new Error(`no attempts in the answer for task family ${name}`);
  const attempts = data.attempts;
  const xs = attempts.map((a, i) => (a.finished_at ? Date.parse(a.finished_at) / 1000 : i));
  const oom = attempts.filter((a) => a.oom_killed).length;
  const otherwise = attempts.filter((a) => !a.oom_killed && a.exit_reason !== "Completed"), other = otherwise.length;
  const rows = attempts.slice().reverse().map((a) => `<tr class="${a.oom_killed ? "bad" : ""}" data-exit="${esc(a.exit_reason)}">
      <td class="text">${esc(when(a.finished_at))}</td><td class="text">${esc(a.dag_id)} / ${esc(a.run_id)} / ${a.try_number}</td>
      <td class="text">${esc(a.exit_reason)}</td><td>${bytes(a.user_request_bytes)}</td><td>${bytes(a.memory_request_bytes)}</td>
      <td>${bytes(a.memory_limit_bytes)}</td><td data-col="peak">${peakText(a)}</td>
      <td class="text">${esc(a.node || "–")}${a.group ? ` (group ${a.group})` : ""}</td><td class="why">${esc(a.explanation || "")}</td></tr>`).join("");
  view.innerHTML = `<h2>${breakable(data.task_family)}</h2>
    <p class="muted">DAGs: ${data.dags.map(esc).join(", ")}${data.image || data.program ? `<span id="tool">; runs
      ${data.image ? `image <code>${esc(data.image)}</code>` : ""}${data.image && data.program ? ", " : ""}${data.program ? `program <code>${esc(data.program)}</code>` : ""}</span>` : ""}</p>
    <div class="chart" id="family-chart" data-points="${attempts.length}" data-oom="${oom}"></div>
    <p class="muted" id="chart-caption">${attempts.length === data.attempts_limit ? "The newest " : ""}${attempts.length} attempts plotted; ${oom} OOM-killed (large red dots, at their limit);${
      other ? ` ${other} ended otherwise (${[...new Set(otherwise.map((a) => a.exit_reason))].map(esc).join(", ")}: the table says which);` : ""}
      hollow peaks are lower bounds (sampled).</p>
    ${data.history_hidden ? `<p class="error" id="hidden-note">${esc(data.hidden_note)}</p>` : ""}
    <h2>${data.modes?.recommending ? "Recommendation" : "Next decision"}</h2><p id="decision"><b>${bytes(data.decision.memory_request_bytes)}</b> (${esc(data.decision.strategy)}):
      ${esc(data.decision.explanation)}</p>
    ${budgetText(data.decision, attempts.length, oom)}
    <p id="placement">Task labels: ${esc(data.labels === null ? "not shown" : labelText(data.labels))}. Placement: ${esc(data.placement)}</p>
    ${runtimeSection(data.runtime_by_group)}
    ${modesText(data.modes)}
    <h2>What if: every strategy on this family's history</h2><div id="whatif" class="muted">Replaying…</div>
    <h2>Attempts</h2><div class="scroll"><table id="attempts-table"><thead><tr><th>Finished</th><th>DAG / run / try</th><th>Exit</th>
      <th>User asked</th><th>Request</th><th>Limit</th><th>Peak</th><th>Node</th><th>Why</th></tr></thead><tbody>${rows}</tbody></table></div>`;
  const peaks = attempts.map((a) => (a.oom_killed || a.peak_is_lower_bound ? null : a.peak_memory_bytes));
  const lower = attempts.map((a) => (a.peak_is_lower_bound && !a.oom_killed ? a.peak_memory_bytes : null));
  const killed = attempts.map((a) => (a.oom_killed ? a.memory_limit_bytes : null));
  const dots = (stroke, fill, size) => ({ show: true, size, stroke, fill, width: 2 });
  chart(document.getElementById("family-chart"), "Memory per attempt", xs, [
    { label: "user asked", stroke: css("--muted"), data: attempts.map((a) => a.user_request_bytes), dash: [6, 4] },
    { label: "decided request", stroke: css("--accent"), data: attempts.map((a) => a.memory_request_bytes) },
    { label: "peak", stroke: css("--good"), paths: () => null, points: dots(css("--good"), css("--good"), 7), data: peaks },
    { label: "peak ≥ (sampled)", stroke: css("--good"), paths: () => null, points: dots(css("--good"), css("--bg"), 7), data: lower },
    { label: "OOM-killed", stroke: css("--bad"), paths: () => null, points: dots(css("--bad"), css("--bad"), 10), data: killed },
  ], { format: bytes, ySplits: binarySplits });
  whatif(name);
}

// Which mode this family's pods get in each of its DAGs; where some keep the user's resources
// (observe, recommend), the what-if below says what enforcing the recommendation would have done.
function modesText(m) {
  if (!m || !m.dags.length) return "";
  const rows = m.dags.map((d) => `<tr data-dag="${esc(d.dag_id)}"><td class="text">${esc(d.dag_id)}</td>
      <td class="text">${esc(d.pods)}</td><td class="text">${esc(d.operator_pods)}</td></tr>`).join("");
  return `<h2>Mode</h2><p class="muted">Observe and recommend keep the user's resources and record the attempt;
      enforce applies the decision. The most specific setting wins: <code>family_modes</code>, the DAG's tag
      <code>adaptive:&lt;mode&gt;</code>, the task's own, the default (<a href="#/modes">Modes</a>).</p>
    <div class="scroll"><table id="modes-table"><thead><tr><th>DAG</th><th>Plain KPO and executor pods</th>
      <th>The operator's pods</th></tr></thead><tbody>${rows}</tbody></table></div>
    ${m.recommending ? `<p id="enforcing" class="muted">What enforcing the recommendation would have done: replaying…</p>` : ""}`;
}
async function nodes() {
  const data = await api("api/nodes");
  if (!data.groups.length) { view.innerHTML = `<h2>Node groups</h2><p>No nodes profiled yet: run the <code>adaptive_profile_cluster</code> DAG.</p>`; return; }
  const groups = data.groups.map((g) => `<tr data-group="${g.id}"><td>${g.id}</td><td class="text">${g.members.map(esc).join(", ")}</td>
      <td class="text">${esc(Object.entries(g.task_ranks).map(([k, v]) => `${k} ${v}`).join(", "))}</td>
      <td class="text">${g.capabilities.map(esc).join(", ") || "–"}</td><td>${num(g.cores, 0)}</td><td>${bytes(g.memory_bytes)}</td>
      <td class="why">${g.families.map(esc).join(", ") || "–"}</td></tr>`).join("");
  const benches = [...new Set(data.nodes.flatMap((n) => Object.keys(n.benchmarks)))];
  const cached = Object.fromEntries(data.cached_inputs.map((n) => [n.node, n.inputs]));
  const held = (name) => (cached[name] || []).map((c) => `${esc(c.uri.split("/").pop() || c.uri)} <span class="muted">(${bytes(c.size_bytes)})</span>`).join(", ") || "–";
  const nodeRows = data.nodes.map((n) => `<tr><td>${esc(n.node)}</td><td>${n.group ?? "–"}</td>
      ${benches.map((b) => `<td>${num(n.benchmarks[b], 1)}${n.ranks[b] ? ` <span class="muted">(${n.ranks[b]})</span>` : ""}</td>`).join("")}
      <td class="text">${n.capabilities.map(esc).join(", ") || "–"}</td><td class="text">${esc(when(n.profiled_at))}</td>
      <td class="text" data-cached="${(cached[n.node] || []).length}">${held(n.node)}</td></tr>`).join("");
  view.innerHTML = `<h2>Node groups</h2><div class="scroll"><table id="groups-table"><thead><tr><th>Group</th><th>Members</th>
      <th>Ranks (1 = weakest)</th><th>Capabilities</th><th>Cores</th><th>Memory</th><th>Families that prefer it</th></tr></thead>
      <tbody>${groups}</tbody></table></div>
    <h2>Nodes</h2><div class="scroll"><table id="nodes-table"><thead><tr><th>Node</th><th>Group</th>${benches.map((b) => `<th>${esc(b)} (rank)</th>`).join("")}
      <th>Capabilities</th><th>Profiled</th><th>Cached inputs</th></tr></thead><tbody>${nodeRows}</tbody></table></div>
    ${nodesRuntimeSection(data)}`;
}

async function locality() {
  const data = await api("api/nodes");
  const rows = data.cached_inputs.flatMap((n) => n.inputs.map((c, i) => `<tr data-node="${esc(n.node)}">
      ${i === 0 ? `<td rowspan="${n.inputs.length}">${esc(n.node)}</td>` : ""}<td class="text">${esc(c.uri)}</td>
      <td>${bytes(c.size_bytes)}</td><td class="text">${esc(when(c.last_used_at))}</td></tr>`)).join("");
  const total = data.cached_inputs.reduce((sum, n) => sum + n.inputs.reduce((s, c) => s + c.size_bytes, 0), 0);
  view.innerHTML = `<h2>Shared inputs cached on nodes</h2>
    <p class="muted">Staged by the <code>adaptive-stage</code> init container when <code>[adaptive] cache_root</code> is set;
      readers of these inputs prefer the nodes that hold them. ${data.cached_inputs.length} nodes, ${bytes(total)} in all.</p>
    ${rows ? `<div class="scroll"><table id="cached-table"><thead><tr><th>Node</th><th>Input</th><th>Size</th><th>Last used</th></tr></thead>
      <tbody>${rows}</tbody></table></div>` : `<p>No input is cached on any node yet.</p>`}`;
}

async function queue() {
  const data = await api("api/queue");
  const intro = `<p class="muted">Pending and running tasks ordered least-finished-first: the family with the fewest successful
    attempts first, then failed attempts (<b>${esc(data.failures_rule)}</b>). Airflow orders its queue by the weight it stored when the
    task instance was created; the pod's priority class is chosen when the pod is created.</p>`;
  const note = data.note ? `<div class="error">${esc(data.note)}</div>` : "";
  if (!data.tasks.length) { view.innerHTML = `<h2>Queue</h2>${intro}${note}<p>No least-finished-first task is pending or running.</p>`; return; }
  const rows = data.tasks.map((t) => `<tr data-task="${esc(t.dag_id)}.${esc(t.task_id)}" data-state="${esc(t.state)}">
      <td>${t.lff_rank ?? "–"}</td><td class="text">${esc(t.state)}</td><td class="text">${esc(t.dag_id)}</td><td class="text">${esc(t.task_id)}${t.map_index >= 0 ? ` [${t.map_index}]` : ""}</td>
      <td class="text"><a href="${familyHash(t.task_family)}">${esc(t.task_family)}</a></td>
      <td>${num(t.successes, 0)}</td><td>${num(t.failures, 0)}</td><td>${num(t.try_number, 0)}</td>
      <td>${num(t.airflow_weight, 0)}</td><td>${num(t.lff_weight_now, 0)}</td><td class="text">${esc(t.priority_class || "–")}</td>
      <td class="why">${esc(t.why)}</td></tr>`).join("");
  view.innerHTML = `<h2>Queue</h2>${intro}${note}<div class="scroll"><table id="queue-table"><thead><tr><th>LFF rank</th><th>State</th>
      <th>DAG</th><th>Task</th><th>Family</th><th>Successes</th><th>Failures</th><th>Try</th><th>Airflow weight</th>
      <th>LFF weight now</th><th>Priority class</th><th>Why</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

async function modes() {
  const data = await api("api/modes");
  const rules = data.family_rules.length
    ? data.family_rules.map((r) => `<code>${esc(r.pattern)}=${esc(r.mode)}</code>`).join(", ") : "none";
  const rows = data.dags.map((d) => `<tr data-dag="${esc(d.dag_id)}"><td class="text">${esc(d.dag_id)}</td>
      <td class="text">${d.tag ? `<code>adaptive:${esc(d.tag)}</code>` : d.tag_problem ? `<span class="bad">${esc(d.tag_problem)}</span>` : "–"}</td>
      <td class="text">${esc(d.pods)}</td><td class="text">${esc(d.operator_pods)}</td></tr>`).join("");
  view.innerHTML = `<h2>Modes</h2><p>Plain KubernetesPodOperator and KubernetesExecutor pods default to
      <code>[adaptive] mode</code> = <b id="default-mode">${esc(data.default)}</b>; the operator's pods to enforce. A DAG's
      tag <code>adaptive:&lt;mode&gt;</code> overrides both, and <code>[adaptive] family_modes</code> overrides the DAG for
      the families it names: ${rules}. A family's page shows the mode of its own pods.</p>
    ${data.dags.length ? `<div class="scroll"><table id="dag-modes-table"><thead><tr><th>DAG</th><th>Tag</th><th>Plain KPO and executor pods</th>
      <th>The operator's pods</th></tr></thead><tbody>${rows}</tbody></table></div>` : "<p>No DAG you may read.</p>"}`;
}

async function taskLink(dag, task) {
  const found = await api(`api/task/${encodeURIComponent(dag)}/${encodeURIComponent(task)}`);
  location.hash = familyHash(found.task_family);
}

// The address's arguments, each percent-decoded; null when one is not valid percent-encoding (an
// edited or truncated address: decodeURIComponent throws a URIError there).
function decoded(parts) {
  try {
    return parts.map(decodeURIComponent);
  } catch (err) {
    if (err instanceof URIError) return null;
    throw err;
  }
}
function badAddress(what) {  // instead of an uncaught error and a page left at "Loading…"
  view.innerHTML = `<div class="error" id="bad-address">That address names no valid ${what}: <code>${esc(location.hash)}</code>
    is cut short or was edited. Open the family from the Task families list.</div>`;
}
const VIEWS = ["overview", "families", "family", "nodes", "queue", "locality", "modes", "task"];
async function route() {
  const [first, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  if (first && !VIEWS.includes(first)) { history.replaceState(null, "", "#/overview"); return route(); }  // an unknown view
  const tab = first || "overview", args = decoded(rest);
  for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.tab === (tab === "family" ? "families" : tab));
  try {
    if (tab === "families") await families();
    else if (tab === "family") await (args ? family(args.join("/")) : badAddress("family"));
    else if (tab === "nodes") await nodes();
    else if (tab === "queue") await queue();
    else if (tab === "locality") await locality();
    else if (tab === "modes") await modes();
    else if (tab === "task") await (args?.length >= 2 && args[0] ? taskLink(args[0], args.slice(1).join("/")) : badAddress("task"));
    else await overview();
  } catch (err) {
    view.innerHTML = errorHtml(err);
  }
  alignHeads();
  showViewInAirflowsAddress();
  document.body.dataset.ready = tab;
}
followAirflowTheme();
window.addEventListener("hashchange", () => { window.scrollTo(0, 0); route(); });  // a new view opens at its top
openAirflowsView();
followAirflowsAddress();
window.addEventListener("load", () => setTimeout(showViewInAirflowsAddress, 0));
route();
