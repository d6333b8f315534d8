// airflow-adaptive UI: a family's expected runtime per node group (core/runtimes.py), on the family's
// page and, for the busiest families, on the Nodes page.
"use strict";

function duration(seconds) {  // 42 s, 7.5 min, 2.3 h
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 90) return `${num(seconds, seconds < 10 ? 1 : 0)} s`;
  if (seconds < 5400) return `${num(seconds / 60, 1)} min`;
  return `${num(seconds / 3600, 1)} h`;
}

function runtimeSection(rows) {  // rows: [{group, seconds, log_spread, runs}]
  if (!rows || !rows.length) {
    return `<h2>Expected runtime per node group</h2><p class="muted" id="runtime-none">None yet: no attempt of this
      family shown here ran on a profiled node.</p>`;
  }
  const fastest = Math.min(...rows.map((r) => r.seconds));
  const body = rows.map((r) => `<tr data-group="${r.group}"${r.seconds === fastest ? ' class="best"' : ""}>
      <td>${r.group}</td><td data-seconds="${r.seconds}">${duration(r.seconds)}</td>
      <td>×/÷ ${num(Math.exp(r.log_spread), 2)}</td>
      <td class="text">${r.runs ? `${r.runs} of its runs there` : "from the benchmarks alone"}</td></tr>`).join("");
  return `<h2>Expected runtime per node group</h2>
    <p class="muted">From this family's runs and the groups' benchmark scores (after Lotaru): a group it ran on
      is judged by its own runs as far as they differ beyond their spread, the others are scaled by the
      benchmarks its runtime follows. The <code>finish-time</code> placement policy prefers the group where it
      is expected to end first.</p>
    <div class="scroll"><table id="runtime-table"><thead><tr><th>Group</th><th>Expected</th><th>Spread</th>
      <th>Evidence</th></tr></thead><tbody>${body}</tbody></table></div>`;
}

function nodesRuntimeSection(data) {  // the busiest families' expected runtime per group
  if (!data.runtimes || !data.runtimes.length) return "";
  const ids = data.groups.map((g) => String(g.id));
  const body = data.runtimes.map((f) => {
    const values = ids.map((g) => f.seconds_by_group[g]).filter((v) => v !== undefined);
    const fastest = Math.min(...values);
    const cells = ids.map((g) => {
      const v = f.seconds_by_group[g];
      return `<td${v === fastest ? ' class="best"' : ""}>${duration(v)}</td>`;
    }).join("");
    return `<tr data-family="${esc(f.task_family)}"><td class="text">${breakable(f.task_family)}</td>${cells}</tr>`;
  }).join("");
  return `<h2>Expected runtime per group</h2><p class="muted">The busiest families with runs on profiled
      nodes; the fastest group in bold. Placement policy: <code>${esc(data.placement_policy)}</code>.</p>
    <div class="scroll"><table id="runtimes-table"><thead><tr><th>Family</th>${ids.map((g) => `<th>Group ${esc(g)}</th>`).join("")}
      </tr></thead><tbody>${body}</tbody></table></div>`;
}
