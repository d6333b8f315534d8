"""Node groups from microbenchmark profiles (Tarema): k-means++ on standardised features.

k is the best silhouette over 2..min(n-1, 10) (the published profiler always
picked 3 because of a sorting bug; this takes the argmax); then a group whose
best two-way split puts the halves' means ``min_relative_spread`` apart (or twice
the measured noise, if larger) on a counted feature is split, as long as groups
remain fewer than nodes: the silhouette prefers too few groups beside one wide
group (Table IV's 5;4;4;2 merged its 4- and 2-node groups in 15 of 100 noisy
draws; with the split, none). Only features that
vary across nodes by more than benchmark noise are clustered on: standardising
a feature whose spread is noise (identical disks measured twice differ by a few
percent) would give it the weight of the CPU score that really separates the
machines. A feature counts when its range across nodes is at least
``min_relative_spread`` of its mean (10 %: twice a ±5 % run-to-run noise) and,
where repeated runs measured the noise, its standard deviation across nodes is
at least ``NOISE_SPREADS`` times the largest relative standard error of a
node's mean (pure noise reaches twice its standard error in 0.3 % of profiles
of 5 nodes, 1.8 % of 3, fewer on more); with none left, the cluster is one group (no silhouette exists for k = 1). Groups are numbered from
the weakest (1) by their mean standardised score on the counted features, and
each group gets a rank per feature (1 = weakest; one rank for all on a feature
that is noise), which becomes a node label. Regrouping can keep the ids of an
earlier grouping (``previous``): each new group takes the id of the earlier
group it shares most nodes with, so node labels do not churn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import StandardScaler

from ..exceptions import InvalidProfileError

BENCHMARK_FEATURES = (
    "cpu_events_per_s",
    "cpu_multi_events_per_s",
    "memory_mib_per_s",
    "io_seq_read_iops",
    "io_seq_write_iops",
    "io_rand_read_iops",
    "io_rand_write_iops",
)

# Which benchmarks speak for each task feature of the labels (cpu, memory, io).
TASK_FEATURE_BENCHMARKS = {
    "cpu": ("cpu_events_per_s",),
    "memory": ("memory_mib_per_s",),
    "io": ("io_seq_read_iops", "io_seq_write_iops", "io_rand_read_iops", "io_rand_write_iops", "io_score"),
}
NOISE_SPREADS = 2.0  # a feature counts when its spread across nodes is this many of its measured noise


def task_feature_ranks(benchmark_ranks: Mapping[str, int]) -> dict[str, int]:
    """A group's rank per task feature: the mean of its ranks on that feature's benchmarks."""
    ranks: dict[str, int] = {}
    for feature, benchmarks in TASK_FEATURE_BENCHMARKS.items():
        found = [benchmark_ranks[b] for b in benchmarks if b in benchmark_ranks]
        if found:
            ranks[feature] = round(sum(found) / len(found))
    return ranks


@dataclass(frozen=True)
class NodeProfile:
    """One node's measured features (higher is faster) and static facts."""

    node: str
    benchmarks: Mapping[str, float]
    cores: int | None = None
    memory_bytes: int | None = None
    capabilities: frozenset[str] = frozenset()
    noise: Mapping[str, float] = field(default_factory=dict)  # per benchmark: relative std. error


@dataclass(frozen=True)
class NodeGroup:
    id: int
    members: tuple[str, ...]
    ranks: dict[str, int]
    means: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Grouping:
    groups: tuple[NodeGroup, ...]
    features: tuple[str, ...]
    silhouette: float | None  # None when the spread test made one group
    reason: str

    def group_of(self, node: str) -> NodeGroup | None:
        return next((g for g in self.groups if node in g.members), None)


def common_features(profiles: Sequence[NodeProfile]) -> tuple[str, ...]:
    """Features measured on every node, in a stable order (known benchmarks first)."""
    shared = set.intersection(*(set(p.benchmarks) for p in profiles)) if profiles else set()
    known = [f for f in BENCHMARK_FEATURES if f in shared]
    return tuple(known + sorted(shared - set(known)))


def group_nodes(
    profiles: Sequence[NodeProfile],
    *,
    max_groups: int = 10,
    min_relative_spread: float = 0.10,
    random_state: int = 0,
    previous: Mapping[str, int] | None = None,
) -> Grouping:
    """Group nodes by their benchmark vectors; deterministic for a given ``random_state``.
    ``previous``: each node's group id in an earlier grouping, whose ids are kept where they match."""
    if not profiles:
        raise InvalidProfileError("no node profiles to group")
    names = [p.node for p in profiles]
    twice = sorted(n for n, seen in Counter(names).items() if seen > 1)
    if twice:
        raise InvalidProfileError(
            f"node names must be unique: {', '.join(map(repr, twice[:5]))} profiled twice"
        )
    features = common_features(profiles)
    if not features:
        raise InvalidProfileError("the profiles share no benchmark feature")
    x = np.array([[float(p.benchmarks[f]) for f in features] for p in profiles])
    if not np.isfinite(x).all():
        raise InvalidProfileError("benchmark values must be finite numbers")
    noise = np.array([max(float(p.noise.get(f, 0.0)) for p in profiles) for f in features])
    counted = _above_noise(x, noise, min_relative_spread)
    n = len(profiles)
    if n < 3:
        best, why = None, "fewer than 3 nodes"
    elif not counted.any():
        best = None
        why = f"every feature varies by less than {min_relative_spread:.0%} or {NOISE_SPREADS:g}x its measured noise"
    else:
        scaled = StandardScaler().fit_transform(x[:, counted])
        best = _best_split(scaled, max_groups, random_state)
        chosen = best[1] if best is not None else 0
        if best is not None:
            apart = np.maximum(min_relative_spread, NOISE_SPREADS * noise[counted])
            best = _refined(best, x[:, counted], scaled, max_groups, apart, random_state)
        why = "no split found"
    if best is None:
        grouping = _grouping(names, x, features, np.zeros(n, dtype=int), None, f"one group: {why}", counted)
    else:
        score, k, labels = best
        on = ", ".join(f for f, used in zip(features, counted, strict=True) if used)
        why = f"k={chosen} has the best silhouette on {on}"
        if k > chosen:
            why += f", split into {k} where a group's halves differ by {min_relative_spread:.0%} or more"
        why += f" (silhouette {score:.3f})"
        grouping = _grouping(names, x, features, labels, score, why, counted)
    return keep_ids(grouping, previous) if previous else grouping


def _above_noise(x: np.ndarray, noise: np.ndarray, min_relative_spread: float) -> np.ndarray:
    """Which features vary across nodes by more than benchmark noise (see the module's rule);
    ``noise``: per feature, the largest relative standard error measured on a node."""
    mean = np.maximum(np.abs(x.mean(axis=0)), 1e-12)
    deviation = x.std(axis=0, ddof=1) / mean if len(x) > 1 else np.zeros(x.shape[1])
    return (np.ptp(x, axis=0) / mean >= min_relative_spread) & (deviation >= NOISE_SPREADS * noise)


def _best_split(
    scaled: np.ndarray, max_groups: int, random_state: int
) -> tuple[float, int, np.ndarray] | None:
    """The k-means++ labels of the k in 2..min(n-1, max_groups) with the best silhouette."""
    best: tuple[float, int, np.ndarray] | None = None
    distinct = len(np.unique(scaled, axis=0))  # k-means cannot find more clusters than distinct points
    for k in range(2, min(len(scaled) - 1, max_groups, distinct) + 1):
        labels = KMeans(n_clusters=k, init="k-means++", n_init=10, random_state=random_state).fit_predict(
            scaled
        )
        if len(set(labels)) < 2:
            continue
        score = float(silhouette_score(scaled, labels))
        if best is None or score > best[0] + 1e-12:
            best = (score, k, labels)
    return best


def _refined(
    best: tuple[float, int, np.ndarray],
    x: np.ndarray,
    scaled: np.ndarray,
    max_groups: int,
    min_apart: np.ndarray,
    random_state: int,
) -> tuple[float, int, np.ndarray]:
    """The silhouette's groups, each split in two while its best two-way split puts the halves'
    means (``x``: the counted features; ``scaled``: the same standardised, as k-means saw them) at
    least ``min_apart`` (per feature, relative to its mean: the larger of
    ``min_relative_spread`` and twice the measured noise) apart on some counted feature: machines
    that differ as much as a feature must vary to count at all are not one group. The
    silhouette alone prefers fewer groups when one group is much wider than the others (Table IV's
    5;4;4;2: its 4 and 2 nodes, 11 % apart, merged beside 9 nodes that spread 8 %)."""
    _, k, labels = best
    labels = labels.copy()
    mean = np.maximum(np.abs(x.mean(axis=0)), 1e-12)
    pending = list(set(int(v) for v in labels))
    while pending and k < min(max_groups, len(x) - 1):  # a silhouette needs a group of two
        cluster = pending.pop()
        members = np.flatnonzero(labels == cluster)
        if members.size < 2 or len(np.unique(scaled[members], axis=0)) < 2:
            continue
        halves = KMeans(n_clusters=2, init="k-means++", n_init=10, random_state=random_state).fit_predict(
            scaled[members]
        )
        apart = np.abs(x[members][halves == 0].mean(axis=0) - x[members][halves == 1].mean(axis=0)) / mean
        if (apart >= min_apart).any():
            new = int(labels.max()) + 1
            labels[members[halves == 1]] = new
            pending += [cluster, new]
            k += 1
    score = float(silhouette_score(scaled, labels)) if k > best[1] else best[0]
    return score, k, labels


def keep_ids(grouping: Grouping, previous: Mapping[str, int]) -> Grouping:
    """The same groups, each numbered as the earlier group it shares most nodes with (one new group
    per earlier id, matched to maximise the nodes that keep their id); a group matching none gets
    an id no earlier group had. The order (weakest first) and the ranks stay as they are."""
    old_ids = sorted(set(previous.values()))
    shared = np.array(
        [[sum(previous.get(m) == old for m in g.members) for old in old_ids] for g in grouping.groups]
    )
    ids: dict[int, int] = {}
    if old_ids:
        for row, column in zip(*linear_sum_assignment(shared, maximize=True), strict=True):
            if shared[row, column] > 0:
                ids[row] = old_ids[column]
    fresh = (i for i in range(1, len(grouping.groups) + len(old_ids) + 1) if i not in old_ids)
    groups = tuple(replace(g, id=ids[i] if i in ids else next(fresh)) for i, g in enumerate(grouping.groups))
    return replace(grouping, groups=groups)


def _grouping(
    names: list[str],
    x: np.ndarray,
    features: tuple[str, ...],
    labels: np.ndarray,
    score: float | None,
    why: str,
    counted: np.ndarray,
) -> Grouping:
    clusters = sorted(set(int(v) for v in labels))
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = ((x - x.mean(axis=0)) / scale)[:, counted] if counted.any() else np.zeros((len(x), 1))
    strength = {c: float(z[labels == c].mean()) for c in clusters}
    order = sorted(clusters, key=lambda c: (strength[c], c))
    means = {c: x[labels == c].mean(axis=0) for c in clusters}
    groups = []
    for position, cluster in enumerate(order, start=1):
        ranks = {}
        for j, feature in enumerate(features):
            if not counted[j]:
                ranks[feature] = 1  # its differences are noise: one rank for every group
                continue
            distinct = sorted({round(float(means[c][j]), 6) for c in clusters})
            ranks[feature] = distinct.index(round(float(means[cluster][j]), 6)) + 1
        groups.append(
            NodeGroup(
                id=position,
                members=tuple(sorted(n for n, label in zip(names, labels, strict=True) if label == cluster)),
                ranks=ranks,
                means={f: float(means[cluster][j]) for j, f in enumerate(features)},
            )
        )
    return Grouping(tuple(groups), features, score, why)
