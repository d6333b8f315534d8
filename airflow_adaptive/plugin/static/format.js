// airflow-adaptive UI: number formats and chart helpers shared by the pages (no DOM here).
"use strict";

// Python's f"{v:.3g}", which core/units.py:format_bytes (the CLI's and `demo`'s tables) uses: three
// significant digits of the exact binary value, ties to even, trailing zeros dropped, an exponent
// below 1e-4 or from 1000 on. JavaScript's toPrecision rounds ties up and keeps the zeros.
function sig3(value) {
  const v = Number(value);
  if (!Number.isFinite(v) || v === 0) return String(v);
  const [mantissa, power] = Math.abs(v).toExponential(60).split("e");  // exact for a double
  const digits = mantissa.replace(".", "");
  let n = Number(digits.slice(0, 3)), exp = Number(power);
  const rest = digits.slice(3), beyond = /[1-9]/.test(rest.slice(1));
  if (rest[0] > "5" || (rest[0] === "5" && (beyond || n % 2 === 1))) n += 1;
  if (n === 1000) { n = 100; exp += 1; }
  const sign = v < 0 ? "-" : "", text = String(n);
  const trim = (s) => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  if (exp < -4 || exp >= 3) {
    return `${sign}${trim(`${text[0]}.${text.slice(1)}`)}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  }
  if (exp < 0) return `${sign}${trim(`0.${"0".repeat(-exp - 1)}${text}`)}`;
  return `${sign}${trim(`${text.slice(0, exp + 1)}.${text.slice(exp + 1)}`)}`;
}
function bytes(value) {  // format_bytes: binary units, three significant digits
  if (value === null || value === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(value), i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${v.toFixed(0)} B` : `${sig3(v)} ${units[i]}`;
}
function num(value, digits = 1) {
  return value === null || value === undefined ? "–" : Number(value).toLocaleString("en", { maximumFractionDigits: digits });
}
function gbh(value) {  // memory·time: three significant digits, as bytes are, without an exponent
  return value === null || value === undefined ? "–" : Number(value).toLocaleString("en", { maximumSignificantDigits: 3 });
}
function pct(value) { return value === null || value === undefined ? "–" : `${(100 * value).toFixed(1)} %`; }
function when(value) { return value ? String(value).replace("T", " ").slice(0, 16) : "–"; }
function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function breakable(name) {  // a long nf-core name (A:B:C_D) may wrap after each ':' and '.'
  return esc(name).replace(/([:.])/g, "$1<wbr>");
}

// Memory axis ticks at multiples of a power-of-two step (256 MiB, 1 GiB, 2 GiB, ...), never 7.45 GiB.
function binarySplits(u, axis, min, max) {
  let step = 1024 ** 2;
  while ((max - min) / step > 6) step *= 2;
  const ticks = [];
  for (let v = Math.ceil(min / step) * step; v <= max; v += step) ticks.push(v);
  return ticks;
}

// The days with data, and one null the day after each that the next day with data does not follow:
// uPlot leaves a gap there instead of drawing a line across it (spanGaps is off). One null per gap,
// not one per empty day, so an attempt dated decades away costs one point, not thousands.
const DAY_S = 86400;
function oneTime(xs) { return xs.length > 0 && xs[0] === xs[xs.length - 1]; }  // xs ascending
function dayStart(day) { return Date.parse(`${day}T00:00:00Z`) / 1000; }
function dailySeries(days) {
  const xs = [], rows = [];
  days.forEach((d, i) => {
    const t = dayStart(d.day);
    xs.push(t);
    rows.push(d);
    if (i + 1 < days.length && dayStart(days[i + 1].day) > t + DAY_S) {
      xs.push(t + DAY_S);
      rows.push(null);
    }
  });
  return { xs, rows };
}

// The legend shows the newest values while the cursor is off the chart (uPlot shows "--" there).
function newestIndex(u) {
  for (let i = u.data[0].length - 1; i >= 0; i--) {
    if (u.data.slice(1).some((s) => s[i] !== null && s[i] !== undefined)) return i;
  }
  return null;
}
function legendShowsNewest(u) {
  if (u.cursor.idx === null || u.cursor.idx === undefined) u.setLegend({ idx: newestIndex(u) });
}

// uPlot draws at the width it is given: a chart takes its box's (320 to 1200 px) and follows it as
// the window narrows or widens. The observer goes with the box when a view replaces it.
function chartWidth(el) { return Math.max(320, Math.min(el.clientWidth || 900, 1200)); }
function followWidth(el, plot) {
  if (!window.ResizeObserver) return;
  const observer = new ResizeObserver(() => {
    if (!el.isConnected) { observer.disconnect(); return; }  // its view was replaced
    const width = chartWidth(el);
    if (width !== plot.width) plot.setSize({ width, height: plot.height });
  });
  observer.observe(el);
}
