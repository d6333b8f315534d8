// The family page's what-if: every strategy replayed on the family's history, as a table and as
// points on the waste-for-kills plane (uPlot). Read-only: GET requests only, as app.js.
function enforcingText(data) {  // the configured strategy against the users' own requests, same replay
  const of = (name) => data.strategies.find((s) => s.strategy === name);
  const ours = of(data.configured), users = of("user");
  if (!ours || !users || !data.tasks) return "No completed attempt with a measured peak to replay yet.";
  const saved = users.waste_gb_h - ours.waste_gb_h;
  const share = users.waste_gb_h > 0 ? ` (${num(100 * saved / users.waste_gb_h, 1)} %)` : "";
  return `Enforcing <b>${esc(data.configured)}</b> on these ${data.tasks} attempts, replayed through the live decision:
    <b>${gbh(ours.waste_gb_h)}</b> GB·h wasted instead of the users' ${gbh(users.waste_gb_h)}, so
    <b data-col="saved">${gbh(saved)}</b> GB·h ${saved >= 0 ? "saved" : "more"}${share}, at
    <b data-col="kills">${num(ours.retries_per_100, 1)}</b> OOM kills per 100 attempts (the users' requests:
    ${num(users.retries_per_100, 1)}).`;
}

const METRICS = {
  MAQ: "memory allocation quality: memory·time used over memory·time used plus wasted",
  WRR: "waste reduction ratio: 1 − waste over the waste of giving every task a whole node",
  ATE: "average task efficiency: each task's peak·time over what its successful attempt was given, averaged (0 for a failed task)",
};
async function whatif(name) {
  const el = document.getElementById("whatif");
  try {
    const data = await api(familyApi("api/family/whatif", name));
    if (!Array.isArray(data.strategies)) throw new Error(`no strategies in the what-if answer for ${name}`);
    el.classList.remove("muted");
    const abbr = (short) => `<abbr title="${esc(METRICS[short])}">${short}</abbr>`;
    el.innerHTML = `<p class="muted">Each strategy replayed on the newest ${data.tasks} completed attempts in the order they ran,
      sized only from the attempts before each one and retried after its own kills (sequential history), cheapest first;
      <code>adaptive</code> under the OOM-kill budget of ${num(100 * data.max_oom_rate, 1)} %${data.min_observations > 1
        ? `; every strategy keeps the request until ${num(data.min_observations, 0)} attempts are known (<code>min_observations</code>)` : ""}.
      Its OOM kills / 100 are that replay's kills: neither the rule's replay above nor kills that happened.${
        data.left_out && data.left_out.length ? ` Not replayed here, as each of its decisions takes seconds: ${data.left_out.map((n) => `<code>${esc(n)}</code>`).join(", ")}
        (<code>airflow-adaptive replay --strategy NAME</code> replays it).` : ""}</p>
      <table id="whatif-table"><thead><tr><th>Strategy</th><th>Waste GB·h</th><th>OOM kills / 100 (replayed)</th><th>Failed</th>
      <th>${abbr("MAQ")}</th><th>${abbr("WRR")}</th><th>${abbr("ATE")}</th></tr></thead>
      <tbody>${data.strategies.map((s) => `<tr data-strategy="${esc(s.strategy)}"><td>${esc(s.strategy)}</td><td data-col="waste">${gbh(s.waste_gb_h)}</td>
      <td>${num(s.retries_per_100, 1)}</td><td>${num(s.failed, 0)}</td><td>${num(s.maq, 3)}</td><td>${num(s.wrr, 3)}</td>
      <td>${num(s.ate, 3)}</td></tr>`).join("")}</tbody></table>
      <p class="muted" id="metrics">${Object.entries(METRICS).map(([k, v]) => `<b>${k}</b>: ${esc(v)}`).join(". ")}. Higher is better for all three.</p>
      <div class="chart" id="whatif-plane"></div><p class="muted" id="whatif-plane-caption">Each strategy above that failed no task
      as a point (not <code>whole-node</code>): its OOM kills per 100 tasks across, its waste up. A point below and left of
      <code>${esc(data.configured)}</code> wastes less memory for no more kills; the shaded corner holds the points
      <code>${esc(data.configured)}</code> beats on both. Where names would overlap, the table above has them all.</p>`;
    planeChart(document.getElementById("whatif-plane"), data.strategies, data.configured);
    const enforcing = document.getElementById("enforcing");
    if (enforcing) { enforcing.classList.remove("muted"); enforcing.innerHTML = enforcingText(data); }
  } catch (err) { el.innerHTML = errorHtml(err); }
}

// Waste against kills, one point per strategy (uPlot draws lines on a sorted x: each strategy is its
// own series with a value at its own x only, and its name is written beside its point).
function planeChart(el, strategies, configured) {
  const shown = strategies.filter((s) => s.failed === 0 && s.strategy !== "whole-node");
  if (!shown.length) { document.getElementById("whatif-plane-caption")?.remove(); el.remove(); return null; }
  const xs = [...new Set(shown.map((s) => s.retries_per_100))].sort((a, b) => a - b);
  const colour = (name) => css(name === configured ? "--good" : name === "user" ? "--muted" : "--accent");
  const series = shown.map((s) => ({
    label: s.strategy, stroke: colour(s.strategy), paths: () => null,
    points: { show: true, size: s.strategy === configured ? 11 : 7, fill: colour(s.strategy) },
  }));
  const data = [xs, ...shown.map((s) => xs.map((x) => (x === s.retries_per_100 ? s.waste_gb_h : null)))];
  const ours = shown.find((s) => s.strategy === configured);
  const width = chartWidth(el);
  const plot = new uPlot({
    title: "Waste for kills", width, height: 300, legend: { show: false },
    scales: { x: { time: false, range: (u, lo, hi) => [-Math.max(hi, 1) * 0.02, Math.max(hi * 1.15, 1)] },
              y: { range: (u, lo, hi) => [0, Math.max(hi * 1.12, 0.001)] } },
    axes: [{ stroke: css("--muted"), grid: { stroke: css("--line") }, label: "OOM kills / 100 (replayed)", values: (u, t) => t.map((v) => num(v, 1)) },
           { stroke: css("--muted"), grid: { stroke: css("--line") }, size: 60, label: "waste GB·h", labelGap: 4, values: (u, t) => t.map(gbh) }],
    series: [{}, ...series],
    hooks: { draw: [(u) => planeMarks(u, shown, ours)] },
  }, data, el);
  followWidth(el, plot);
  el.uplot = plot;  // for the browser test: the points as drawn
  return plot;
}
function planeMarks(u, shown, ours) {  // the corner the configured strategy beats, and the points' names
  const ctx = u.ctx, dpr = devicePixelRatio;
  ctx.save();
  if (ours) {
    const x = u.valToPos(ours.retries_per_100, "x", true), y = u.valToPos(ours.waste_gb_h, "y", true);
    ctx.fillStyle = "rgba(40, 160, 90, 0.08)";
    ctx.fillRect(x, u.bbox.top, u.bbox.left + u.bbox.width - x, y - u.bbox.top);
  }
  ctx.fillStyle = css("--muted");
  ctx.font = `${11 * dpr}px sans-serif`;
  ctx.textAlign = "left";
  ctx.textBaseline = "bottom";
  const taken = [];  // a name that would overlap one already written is left out: the table has them all
  const first = ours ? [ours, ...shown.filter((s) => s !== ours)] : shown;
  for (const s of first) {
    const x = u.valToPos(s.retries_per_100, "x", true) + 6 * dpr, y = u.valToPos(s.waste_gb_h, "y", true) - 2 * dpr;
    const box = [x, y - 12 * dpr, x + ctx.measureText(s.strategy).width, y];
    if (taken.some((b) => box[0] < b[2] && b[0] < box[2] && box[1] < b[3] && b[1] < box[3])) continue;
    taken.push(box);
    ctx.fillText(s.strategy, x, y);
  }
  ctx.restore();
}
