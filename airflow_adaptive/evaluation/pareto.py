"""Waste against OOM kills: which published strategy (anchor) the default beats on both, and which
beats it.

An anchor's point is its waste (GB·h) and its kills per 100 tasks on a trace. The default
**beats** it when it has no more kills and no more waste; the anchor **beats the default** when
it has no more of either. A user compares strategies this way: at the same or fewer OOM kills,
less memory. An anchor at exactly the default's point is both (``tie`` says so, and ``replay`` names
it as a tie, not as a winner). With a budget sweep, an anchor point is also checked against every
point of the default's curve: the sweep beats it when some budget does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

WASTE, KILLS = "waste_gb_h", "retries_per_100"


def no_worse(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether point ``a`` has no more waste, no more kills and no more failed tasks than ``b`` (a
    tie counts both ways, as the definition says)."""
    return bool(a[WASTE] <= b[WASTE] and a[KILLS] <= b[KILLS] and a.get("failed", 0) <= b.get("failed", 0))


def pareto(trace: Mapping[str, Any], default: str, anchors: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per anchor replayed on ``trace``: its point and how it stands against the default (and the
    default's budget sweep, when there is one)."""
    results = trace["strategies"]
    if default not in results:
        return {}
    ours = results[default]
    sweep: Sequence[Mapping[str, Any]] = trace.get("budget_sweep", [])
    points = {}
    for name in anchors:
        if name not in results:
            continue
        point = results[name]
        entry: dict[str, Any] = {
            WASTE: point[WASTE],
            KILLS: point[KILLS],
            "failed": point.get("failed", 0),
            "default_beats": no_worse(ours, point),
            "beats_default": no_worse(point, ours),
        }
        entry["tie"] = entry["default_beats"] and entry["beats_default"]  # the same point: both
        if sweep:
            beaten_at = [p["max_oom_rate"] for p in sweep if no_worse(p, point)]
            entry["sweep_beats"] = bool(beaten_at)
            entry["sweep_budgets"] = beaten_at
        points[name] = entry
    return points


def pareto_counts(traces: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Over traces with a ``pareto`` entry: anchor points, how many the default beats, how many
    beat it (and on how many traces), how many the sweep beats."""
    counts = {"points": 0, "default_beats": 0, "beats_default": 0, "traces_beaten": 0, "sweep_beats": 0}
    for trace in traces:
        points = trace.get("pareto", {}).values()
        counts["points"] += len(points)
        for key in ("default_beats", "beats_default", "sweep_beats"):
            counts[key] += sum(bool(p.get(key)) for p in points)
        counts["traces_beaten"] += any(p["beats_default"] for p in points)
    return counts


def beaten_by(trace: Mapping[str, Any]) -> list[str]:
    """The anchors that beat the default on ``trace``, least waste first."""
    points = trace.get("pareto", {})
    return sorted((n for n, p in points.items() if p["beats_default"]), key=lambda n: points[n][WASTE])


def against(point: Mapping[str, Any], anchors: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """How many of the ``anchors``' points ``point`` beats, and how many beat it."""
    found = list(anchors)
    return sum(no_worse(point, a) for a in found), sum(no_worse(a, point) for a in found)
