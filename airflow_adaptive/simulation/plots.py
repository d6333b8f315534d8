"""PNG pictures of a comparison: a Gantt-style chart per policy and a bar chart of makespans."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from airflow_adaptive.plotting import pyplot, save

from .engine import RunResult


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def write_plots(results: Mapping[str, RunResult], folder: str | os.PathLike[str], title: str) -> list[Path]:
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
