"""PNG reports, with matplotlib imported only when a picture is asked for (never a display):
a replay's waste per strategy, waste against OOM kills and first allocation against the true
peak; a simulation's makespans and a Gantt-style chart per policy."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from airflow_adaptive.console import significant
from airflow_adaptive.core.units import GIB

if TYPE_CHECKING:
    from airflow_adaptive.simulation.engine import RunResult


def pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Lay out, write and close one figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


# -- replay ------------------------------------------------------------------------------------
def _stem(path: str) -> str:
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return f"{parent}-{Path(path).stem}"


def write_replay_plots(report: dict[str, Any], folder: str | os.PathLike[str]) -> list[Path]:
    plt = pyplot()

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    default = report["default_strategy"]
    for trace in report["traces"]:
        names = sorted(trace["strategies"], key=lambda n: trace["strategies"][n]["waste_gb_h"])
        waste = [trace["strategies"][n]["waste_gb_h"] for n in names]
        colours = [
            "tab:green" if n == default else "tab:grey" if n in ("user", "whole-node") else "tab:blue"
            for n in names
        ]
        fig, ax = plt.subplots(figsize=(9, 0.32 * len(names) + 1.5))
        bars = ax.barh(names, waste, color=colours)
        # Linear from zero: a bar's length is its waste, so twice as long is twice the waste
        # (a log axis starting near the smallest bar made small differences look large).
        ax.set_xlim(left=0, right=max(waste, default=0) * 1.15 or 1)
        ax.bar_label(bars, labels=[significant(w) for w in waste], padding=3, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("memory waste (GB·h; failed attempts included)")
        ax.set_title(f"{Path(trace['trace']).name}: {trace['instances']} tasks, history {trace['history']}")
        written.append(save(fig, out / f"{_stem(trace['trace'])}-waste.png"))
        if trace.get("budget_sweep"):
            stem = out / f"{_stem(trace['trace'])}-waste-vs-kills.png"
            written.append(_waste_vs_kills(plt, trace, default, report.get("max_oom_rate"), stem))
        allocations = report.get("_allocations", {}).get(trace["trace"])
        if not allocations:
            continue
        fig, ax = plt.subplots(figsize=(6.5, 6))
        families = sorted({family for family, _, _ in allocations})
        cmap = plt.get_cmap("tab20")
        for i, family in enumerate(families):
            points = [(peak / GIB, alloc / GIB) for f, alloc, peak in allocations if f == family]
            xs, ys = zip(*points, strict=True)
            ax.scatter(
                xs,
                ys,
                s=8,
                alpha=0.6,
                color=cmap(i % 20),
                label=family[-30:] if len(families) <= 12 else None,
            )
        lo = min(min(a, p) for _, a, p in allocations) / GIB
        hi = max(max(a, p) for _, a, p in allocations) / GIB
        ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="allocation = peak")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("true peak (GiB)")
        ax.set_ylabel(f"first allocation by {default} (GiB)")
        ax.set_title(f"{Path(trace['trace']).name}: predicted vs actual, per task family")
        if len(families) <= 12:
            ax.legend(fontsize=6, loc="upper left")
        written.append(save(fig, out / f"{_stem(trace['trace'])}-predicted-vs-actual.png"))
    return written


def _shared_labels(
    points: Iterable[tuple[str, Mapping[str, Any]]], ratio: float = 1.02
) -> list[tuple[str, tuple[float, float]]]:
    """One label per place on the waste-for-kills plane: names whose points would be drawn on top of
    each other (within 0.1 kills per 100 and a ``ratio`` of waste) share it, joined by commas."""
    places: dict[tuple[float, int | None], list[tuple[str, Mapping[str, Any]]]] = {}
    for name, m in points:
        waste = m["waste_gb_h"]
        key = (round(m["retries_per_100"], 1), round(math.log(waste, ratio)) if waste > 0 else None)
        places.setdefault(key, []).append((name, m))
    return [
        (", ".join(n for n, _ in same), (same[0][1]["retries_per_100"], same[0][1]["waste_gb_h"]))
        for same in places.values()
    ]


def _plain_log_ticks(axis: Any) -> None:
    """A log axis's tick labels in plain decimals (2,000 and 0.5, not 2 x 10^3), on the ticks
    matplotlib itself would label (minor ones only where the axis spans few decades)."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
            shown = significant(x)
            return shown.rstrip("0").rstrip(".") if "." in shown else shown

    axis.set_major_formatter(Plain())
    axis.set_minor_formatter(Plain(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def _waste_vs_kills(plt: Any, trace: dict[str, Any], default: str, budget: float | None, path: Path) -> Path:
    """The default strategy's waste against its OOM kills under each budget, and every other
    strategy as a point: what a budget buys, next to what the published strategies give."""
    fig, ax = plt.subplots(figsize=(7, 5))
    curve = sorted(trace["budget_sweep"], key=lambda p: p["max_oom_rate"])
    ax.plot(
        [p["retries_per_100"] for p in curve], [p["waste_gb_h"] for p in curve],
        marker="o", color="tab:green", label=f"{default}, by OOM-kill budget",
    )  # fmt: skip
    for label, at in _shared_labels(((f"{p['max_oom_rate']:g}", p) for p in curve), 1.06):
        left = at[0] > 0.05  # left of the curve, as anchors' names are right of theirs; at no kill, right
        ax.annotate(label, at, xytext=(-5, -9) if left else (7, -3), textcoords="offset points",
                    ha="right" if left else "left", fontsize=7)  # fmt: skip
    ours = trace["strategies"].get(default)
    if ours:  # the configured budget's own point, the one pods get
        ax.scatter(ours["retries_per_100"], ours["waste_gb_h"], s=110, marker="*", color="tab:red", zorder=3,
                   label=f"{default} as configured" + (f" (budget {budget:g})" if budget is not None else ""))  # fmt: skip
    others = [(n, m) for n, m in sorted(trace["strategies"].items()) if n not in (default, "whole-node")]
    for name, m in others:
        ax.scatter(
            m["retries_per_100"], m["waste_gb_h"], s=14, color="tab:grey" if name == "user" else "tab:blue"
        )
    for label, at in _shared_labels(others):  # right of their points
        ax.annotate(label, at, xytext=(4, 3), textcoords="offset points", fontsize=6, alpha=0.8)
    ax.set_yscale("log")
    _plain_log_ticks(ax.yaxis)
    ax.tick_params(axis="y", which="both", labelsize=8)
    ax.set_xscale("symlog", linthresh=1.0)  # the budgets' points lie within a few kills; anchors reach 100+
    kills = [p["retries_per_100"] for p in (*curve, *trace["strategies"].values())]
    ax.set_xlim(left=-0.15, right=max(kills) * 1.5 + 1)  # room for the points at 0 and their names
    ax.set_xlabel("OOM kills per 100 tasks (log scale above 1)")
    ax.set_ylabel("memory waste (GB·h, log scale)")
    ax.set_title(f"{Path(trace['trace']).name}: waste against OOM kills")
    ax.legend(fontsize=7)
    return save(fig, path)


# -- simulation --------------------------------------------------------------------------------
def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def write_simulation_plots(
    results: Mapping[str, RunResult], folder: str | os.PathLike[str], title: str
) -> list[Path]:
    plt = pyplot()

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    names = list(results)
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(names) + 1.5))
    ax.barh(names, [results[n].makespan_s / 3600 for n in names], color="tab:blue")
    ax.invert_yaxis()
    ax.set_xlabel("makespan (hours)")
    ax.set_title(title)
    written.append(save(fig, out / "makespan.png"))
    for name, result in results.items():
        spans = result.timeline
        nodes = sorted({s.node for s in spans})
        row = {n: i for i, n in enumerate(nodes)}
        families = sorted({s.family for s in spans})
        colour = {f: plt.get_cmap("tab20")(i % 20) for i, f in enumerate(families)}
        fig, ax = plt.subplots(figsize=(11, 0.3 * len(nodes) + 1.5))
        bars: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for s in spans:
            key = (s.node, "" if s.oom_killed else s.family)
            bars.setdefault(key, []).append((s.start_s / 3600, (s.end_s - s.start_s) / 3600))
        for (node, family), xs in bars.items():
            ax.broken_barh(
                xs, (row[node] - 0.4, 0.8), facecolors="black" if not family else colour[family], alpha=0.5
            )
        ax.set_yticks(range(len(nodes)), nodes, fontsize=7)
        ax.set_xlabel("hours (overlapping bars: tasks sharing a node; black: OOM-killed attempts)")
        ax.set_title(f"{title}: {name}, makespan {result.makespan_s / 3600:.2f} h")
        written.append(save(fig, out / f"gantt-{_safe(name)}.png"))
    return written
