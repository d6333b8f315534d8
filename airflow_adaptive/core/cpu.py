"""CPU requests from the cores a family's attempts kept busy (``[adaptive] size_cpu``).

kube-scheduler packs nodes by requests: a task that keeps 5.5 cores busy on a 2-core request
oversubscribes its node, and one that asks for 8 and uses 1 keeps others out. With ``size_cpu``
the request becomes a high quantile of the cores busy (CPU seconds / wall seconds) of the family's
completed attempts in its history window, with a floor, never above the largest profiled node's
cores nor above the user's own CPU limit; limits are left as the user set them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .model import ExitReason, Observation


@dataclass(frozen=True)
class CpuHistory:
    """A quantile of the cores busy of a family's completed attempts, and how many there were."""

    cores: float | None
    attempts: int

    @classmethod
    def of(cls, busy: Sequence[float], quantile: float) -> CpuHistory:
        """The ``quantile`` of ``busy`` (cores busy per attempt), None when there is none."""
        return cls(float(np.quantile(busy, quantile)) if busy else None, len(busy))


def cpu_history(window: Sequence[Observation], quantile: float) -> CpuHistory:
    busy = [
        o.usage.cpu_core_seconds / o.usage.wall_seconds
        for o in window
        if o.exit_reason is ExitReason.COMPLETED
        and o.usage.cpu_core_seconds is not None
        and o.usage.wall_seconds
        and math.isfinite(o.usage.cpu_core_seconds / o.usage.wall_seconds)
    ]
    return CpuHistory.of(busy, quantile)


def decide_cpu(
    history: CpuHistory | None,
    quantile: float,
    min_millicores: int,
    *,
    limit_millicores: int | None,
    largest_node_millicores: int | None,
) -> tuple[int | None, str]:
    """The CPU request in millicores (None: keep the user's) and why, in words."""
    if history is None or history.cores is None:
        return None, "cpu: no recorded cores busy yet, the request stays"
    if not largest_node_millicores:
        return None, "cpu: no profiled node tells the largest node's cores, the request stays"
    wanted = max(min_millicores, math.ceil(round(history.cores * 1000, 6)))  # no +1m from float noise
    bounds = [(largest_node_millicores, "the largest node")]
    if limit_millicores:
        bounds.append((limit_millicores, "the CPU limit"))
    request = min([wanted, *(b for b, _ in bounds)])
    why = f"cpu: P{quantile * 100:g} of {history.attempts} attempts' cores busy = {history.cores:.2f}"
    capped = [name for bound, name in bounds if request == bound < wanted]
    return request, f"{why} -> request {request}m" + (f" (capped at {capped[0]})" if capped else "")
