"""Several policies side by side on the same cluster, workload, parameters and seed."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from airflow_adaptive.exceptions import InvalidSettingError

from .cluster import Cluster
from .engine import RunResult, Simulation
from .params import DEFAULT_PARAMS, SIZINGS, SimParams
from .placements import PLACEMENTS
from .workload import Workload


def policy_name(
    placement: str,
    sizing: str,
    sizings: Sequence[str],
    queue: str = "fifo",
    queues: Sequence[str] = ("fifo",),
) -> str:
    """Results are keyed by placement; ``placement+sizing`` when several sizings run, and
    ``.../queue`` when several queue orders run."""
    name = placement if len(sizings) == 1 else f"{placement}+{sizing}"
    return name if len(queues) == 1 else f"{name}/{queue}"


def parse_names(
    text: str, known: Sequence[str], what: str, *, everything: Sequence[str] | None = None
) -> list[str]:
    """Comma-separated names, each one of ``known``; ``all`` is ``everything`` (default: ``known``)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(known if everything is None else everything)
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        close = difflib.get_close_matches(unknown[0], known, n=1) if unknown else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidSettingError(
            f"unknown {what} {', '.join(unknown) or '(none)'}{hint}; known: {', '.join(known)}"
        )
    return list(dict.fromkeys(names))


def compare(
    cluster: Cluster,
    workload: Workload,
    placements: Sequence[str] = PLACEMENTS,
    sizings: Sequence[str] = ("user",),
    params: SimParams = DEFAULT_PARAMS,
    seed: int = 0,
    *,
    queues: Sequence[str] = ("fifo",),
    record_timeline: bool = False,
    on_done: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], dict[str, RunResult]]:
    """The JSON report and each policy's full result."""
    results: dict[str, RunResult] = {}
    for sizing in sizings:
        SIZINGS.get(sizing)  # an unknown name: a typed error before any run
        for placement in placements:
            for queue in queues:
                name = policy_name(placement, sizing, sizings, queue, queues)
                sim = Simulation(
                    cluster, workload, placement, sizing, params, seed,
                    queue=queue, record_timeline=record_timeline,
                )  # fmt: skip
                results[name] = sim.run()
                if on_done:
                    on_done(name)
    grouping = cluster.grouping
    report = {
        "cluster": {
            "name": cluster.name,
            "nodes": len(cluster.nodes),
            "groups": {str(g.id): list(g.members) for g in grouping.groups},
            "grouping": grouping.reason,
        },
        "workload": {"name": workload.name, "tasks": len(workload.tasks), "runs": workload.runs},
        "seed": seed,
        "queues": list(queues),
        "params": asdict(params),
        "results": {name: r.summary() for name, r in results.items()},
    }
    return report, results
