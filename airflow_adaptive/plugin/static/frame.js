// airflow-adaptive UI: the page inside Airflow's frame. Airflow's address names this page's view, kept in
// step both ways, Airflow's theme is this page's, and an ended sign-in leads back to Airflow's login; app.js
// calls these at load.
"use strict";

// Airflow copies the frame's path into its own address (/plugin/adaptive/adaptive/ui#/overview) once,
// when the frame loads. Its address names this page's view instead: /plugin/adaptive#/families,
// kept as the view changes, so it can be bookmarked and reloaded (openAirflowsView reads it back).
function airflowsPluginPath() {
  const top = window.parent;
  if (top === window) return null;
  const m = top.location.pathname.match(/^(.*\/plugin\/[^/]+)(\/.*)?$/);  // a nav page, not a task's tab
  return m && !m[1].includes("/dags/") && (!m[2] || m[2] === location.pathname) ? m[1] : null;
}
function showViewInAirflowsAddress() {
  try {
    const path = airflowsPluginPath();
    if (path) window.parent.history.replaceState(window.parent.history.state, "", path + location.hash);
  } catch (err) { /* not framed by Airflow, or another origin: nothing to keep in step */ }
}
function openAirflowsView() {
  try {
    const wanted = window.parent.location.hash;
    if (airflowsPluginPath() && wanted.startsWith("#/") && wanted !== location.hash) history.replaceState(null, "", wanted);
  } catch (err) { /* as above */ }
}
// A view named in Airflow's address while the page is open (typed, or back and forward): this
// frame follows it, as a fresh load would (openAirflowsView); the listener goes with the frame.
function followAirflowsAddress() {
  try {
    const top = window.parent;
    if (top === window) return;
    const follow = () => {
      const wanted = top.location.hash;
      if (airflowsPluginPath() && wanted.startsWith("#/") && wanted !== location.hash) location.replace(wanted);  // no second history entry
    };
    top.addEventListener("hashchange", follow);
    window.addEventListener("pagehide", () => top.removeEventListener("hashchange", follow));
  } catch (err) { /* not framed by Airflow, or another origin: nothing to follow */ }
}
function followAirflowTheme() {  // same origin: read the theme class Airflow sets on its own page
  try {
    const parent = window.parent.document.documentElement.classList;
    const theme = parent.contains("dark") ? "dark" : parent.contains("light") ? "light" : "";
    if (theme) document.documentElement.dataset.theme = theme;
  } catch (err) { /* not framed by Airflow: the browser's preference applies */ }
}
// Airflow's sign-in can end while this page stays open (its token expires): every fetch then gets
// 401 "Token Expired" or 403 "Invalid JWT token". Say what happened and offer Airflow's login again,
// instead of the bare detail. No automatic reload: a sign-in that keeps failing would loop.
class SessionEnded extends Error {}
function endsSession(status, detail) { return status === 401 || (status === 403 && /token/i.test(detail)); }
function errorHtml(err) {
  if (!(err instanceof SessionEnded)) return `<div class="error">${esc(err.message)}</div>`;
  return `<div class="error" id="session-ended">Your Airflow sign-in has ended (${esc(err.message)}), so nothing
    here can load. <button type="button" id="sign-in-again">Sign in again</button></div>`;
}
document.addEventListener("click", (e) => {
  if (e.target.id !== "sign-in-again") return;
  try { window.top.location.reload(); } catch (err) { location.reload(); }  // Airflow's page, or this one alone
});
