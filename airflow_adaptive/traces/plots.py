"""PNG pictures of a replay: waste per strategy, and first allocation against the true peak."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from airflow_adaptive.core.units import GIB
from airflow_adaptive.plotting import pyplot, save


def _stem(path: str) -> str:
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return f"{parent}-{Path(path).stem}"


def write_plots(report: dict[str, Any], folder: str | os.PathLike[str]) -> list[Path]:
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
        ax.barh(names, waste, color=colours)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_xlabel("memory waste (GB·h, log scale; failed attempts included)")
        ax.set_title(f"{Path(trace['trace']).name}: {trace['instances']} tasks, history {trace['history']}")
        written.append(save(fig, out / f"{_stem(trace['trace'])}-waste.png"))
        if trace.get("budget_sweep"):
            written.append(
                _waste_vs_kills(plt, trace, default, out / f"{_stem(trace['trace'])}-waste-vs-kills.png")
            )
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


def _waste_vs_kills(plt: Any, trace: dict[str, Any], default: str, path: Path) -> Path:
    """The default strategy's waste against its OOM kills under each budget, and every other
    strategy as a point: what a budget buys, next to what the published strategies give."""
    fig, ax = plt.subplots(figsize=(7, 5))
    curve = sorted(trace["budget_sweep"], key=lambda p: p["max_oom_rate"])
    ax.plot(
        [p["retries_per_100"] for p in curve], [p["waste_gb_h"] for p in curve],
        marker="o", color="tab:green", label=f"{default}, by OOM-kill budget",
    )  # fmt: skip
    for p in curve:
        ax.annotate(f"{p['max_oom_rate']:g}", (p["retries_per_100"], p["waste_gb_h"]), fontsize=7)
    for name, m in sorted(trace["strategies"].items()):
        if name in (default, "whole-node"):
            continue
        ax.scatter(
            m["retries_per_100"], m["waste_gb_h"], s=14, color="tab:grey" if name == "user" else "tab:blue"
        )
        ax.annotate(name, (m["retries_per_100"], m["waste_gb_h"]), fontsize=6, alpha=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("OOM kills per 100 tasks")
    ax.set_ylabel("memory waste (GB·h, log scale)")
    ax.set_title(f"{Path(trace['trace']).name}: waste against OOM kills")
    ax.legend(fontsize=7)
    return save(fig, path)
