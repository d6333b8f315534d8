"""Task labels (Tarema): where a task family's demand falls among all families', per feature.

For each feature the node groups, weakest first, split [0, 1] in proportion to
their capacity (cores for CPU, memory for RAM, node count for I/O):
``p_i = m_i / sum(m) + p_(i-1)``. The values of the families at those
percentiles bound one interval per group; a family's label is the rank of
the interval holding its own mean. Demand thus spreads over the groups in
proportion to what they can hold, so light tasks do not crowd the strongest
nodes. A family with no history has no label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..exceptions import InvalidSettingError
from .sketch import LogHistogram, bucket_of, bucket_value

TASK_FEATURES = ("cpu", "memory", "io")


@dataclass(frozen=True)
class FamilyDemand:
    """Mean use of one task family: cores busy, peak memory, bytes read+written per second."""

    family: str
    cpu_cores: float | None
    peak_memory_bytes: float | None
    io_bytes_per_s: float | None

    def value(self, feature: str) -> float | None:
        return {"cpu": self.cpu_cores, "memory": self.peak_memory_bytes, "io": self.io_bytes_per_s}[feature]


def cumulative_shares(capacities: Sequence[float]) -> np.ndarray:
    """Where the groups' shares of capacity end, weakest first, without the final 1."""
    weights = np.asarray(capacities, dtype=float)
    if weights.size == 0 or (weights <= 0).any():
        raise InvalidSettingError("group capacities must be positive")
    return np.cumsum(weights / weights.sum())[:-1]


def interval_bounds(values: Sequence[float], capacities: Sequence[float]) -> np.ndarray:
    """The n-1 values that split ``values`` into intervals weighted by ``capacities`` (weakest first)."""
    cumulative = cumulative_shares(capacities)
    return np.quantile(np.asarray(values, dtype=float), cumulative) if len(values) else np.array([])


def label(value: float, bounds: np.ndarray) -> int:
    """1-based interval of ``value`` (a value on a bound belongs to the lower interval)."""
    return int(np.searchsorted(bounds, value, side="left")) + 1


def task_labels(
    family: str, demands: Mapping[str, FamilyDemand], capacities: Mapping[str, Sequence[float]]
) -> dict[str, int] | None:
    """The family's label per feature, given each feature's group capacities (weakest group first)."""
    own = demands.get(family)
    if own is None:
        return None
    labels = {}
    for feature, caps in capacities.items():
        mine = own.value(feature)
        values = [v for d in demands.values() if (v := d.value(feature)) is not None]
        if mine is None or not values:
            continue
        labels[feature] = label(mine, interval_bounds(values, caps))
    return labels or None


@dataclass(frozen=True)
class GroupCapacity:
    """What one node group holds, for splitting demand among groups."""

    task_ranks: Mapping[str, int]  # task feature -> rank (1 = weakest)
    cores: float
    memory_bytes: float
    nodes: int


def feature_capacities(groups: Sequence[GroupCapacity]) -> dict[str, list[float]]:
    """Per task feature, the groups' capacities weakest first (cores, memory, node count for I/O).

    Groups with the same rank pool their capacity; a feature some group has no rank for is left out.
    """
    measure = {
        "cpu": lambda g: g.cores or g.nodes,
        "memory": lambda g: g.memory_bytes or g.nodes,
        "io": lambda g: g.nodes,
    }
    capacities: dict[str, list[float]] = {}
    for feature, amount in measure.items():
        if not groups or any(feature not in g.task_ranks for g in groups):
            continue
        pooled: dict[int, float] = {}
        for g in groups:
            rank = g.task_ranks[feature]
            pooled[rank] = pooled.get(rank, 0.0) + float(amount(g))
        capacities[feature] = [pooled[r] for r in sorted(pooled)]
    return capacities


def labels_from_distributions(
    own: FamilyDemand | None,
    distributions: Mapping[str, LogHistogram],
    capacities: Mapping[str, Sequence[float]],
) -> dict[str, int] | None:
    """:func:`task_labels` from the store's maintained distribution of every family's mean demand.

    Bounds are histogram quantiles (within the histogram's 1 %), and the family's own mean is
    compared in the same buckets, so a family never falls on the wrong side of its own bucket.
    """
    if own is None:
        return None
    labels = {}
    for feature, caps in capacities.items():
        mine, histogram = own.value(feature), distributions.get(feature)
        if mine is None or histogram is None or histogram.total == 0:
            continue
        bounds = np.array([histogram.quantile(float(c)) or 0.0 for c in cumulative_shares(caps)])
        labels[feature] = label(bucket_value(bucket_of(mine)), bounds)
    return labels or None
