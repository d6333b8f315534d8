// airflow-adaptive UI: the days and source controls every totals view shares, and what a control's
// reload does when it fails. Reads ``state`` and ``view`` (app.js) when called.
"use strict";

function range() {
  const q = new URLSearchParams();
  if (state.start) q.set("start", state.start);
  if (state.end) q.set("end", state.end);
  if (state.source) q.set("source", state.source);
  return q;
}
// Live attempts ran with the provider's decisions; imported ones (trace imports) at their own requests.
const SOURCES = [["live", "Live (Airflow ran them)"], ["imported", "Imported (traces)"], ["all", "All (savings apart)"]];
function rangeInputs() {
  const options = SOURCES.map(([v, label]) => `<option value="${v}"${v === state.source ? " selected" : ""}>${label}</option>`).join("");
  return `<label>Attempts <select id="source">${options}</select></label>
          <label>From <input type="date" id="start" value="${esc(state.start)}"></label>
          <label>to <input type="date" id="end" value="${esc(state.end)}"></label>`;
}
function bindRange(reload) {
  for (const id of ["source", "start", "end"]) {
    document.getElementById(id).addEventListener("change", (e) => {
      const next = { ...state, [id]: e.target.value };
      if (next.start && next.end && next.start > next.end) {  // kept out of the state: the view stays usable
        e.target.value = state[id];
        return inlineError(`From ${next.start} is after to ${next.end}: choose days that run forward.`);
      }
      state[id] = e.target.value; state.page = 1; refresh(reload);
    });
  }
}
// A control's reload that fails says why under the controls, which stay (the whole view is only
// replaced when it cannot be drawn at all).
function refresh(reload) {
  reload().then(alignHeads).catch((err) => (err instanceof SessionEnded ? (view.innerHTML = errorHtml(err)) : inlineError(err.message)));
}
function inlineError(message) {
  let el = document.getElementById("inline-error");
  if (!el) {
    (view.querySelector(".toolbar") || view).insertAdjacentHTML("afterend", `<div class="error" id="inline-error"></div>`);
    el = document.getElementById("inline-error");
  }
  el.textContent = message;
}
