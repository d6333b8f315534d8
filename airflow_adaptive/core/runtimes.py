"""A family's expected runtime on each node group (after Lotaru, Bader et al., FGCS 2024).

Lotaru scales a task's runtime from one machine to another by its benchmark scores,
``f = w·cpu_src/cpu_dst + (1 - w)·io_src/io_dst`` with fixed halves, and predicts the runtime on
its own machine from input size. Here the family's recorded runs, wherever they ran, are fitted
together in log space:

    log runtime = a + b·log input size + log f_w(group) + δ_group

- ``f_w`` is Lotaru's weighted score ratio (to the mean group) over the task features scored on
  every group. Which resource binds a task is a property of the family, so the weights ``w`` are the
  ones on the simplex (steps of 0.1) under which its runs agree best; without runs on two groups that
  differ they cannot be told apart, and Lotaru's halves stand.
- ``b`` is fitted when at least three runs, all of them with input sizes, vary in size (else
  ``b = 0``), and kept within 0..``MAX_SIZE_SLOPE``.
- ``δ_group`` is what a group's own runs say beyond the benchmarks: the mean residual of its runs,
  shrunk towards 0 by empirical Bayes (``_group_offsets``), so a group is judged by its own runs
  as far as they differ by more than the spread of the family's runs, and a group the family never
  ran on by the benchmarks alone.

The spread of every estimate is the residual standard deviation in log space.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .grouping import TASK_FEATURE_BENCHMARKS
from .model import ExitReason, Observation

Scores = Mapping[str, float]  # task feature (cpu, memory, io) -> benchmark score, higher is faster
LOTARU_WEIGHTS = {"cpu": 0.5, "io": 0.5}  # Lotaru's fixed halves: CPU and I/O
WEIGHT_STEP = 0.1
MIN_SIZED_RUNS = 3
MIN_LOG_SIZE_SPREAD = 0.1  # input sizes this close (in log space) say nothing about size
# Runtime grows at most quadratically with input size in the tools we know; a steeper line (three
# close sizes give any slope) would send a large input's estimate past any float.
MAX_SIZE_SLOPE = 2.0
MAX_LOG_SECONDS = 700.0  # exp() of more overflows a float
RECENT_RUNS = 100  # completed attempts a family's stored model keeps for its runtime per group
StoredRun = tuple[str, float, int | None]  # node name, seconds, input bytes: as the model stores it


@dataclass(frozen=True)
class Run:
    """One completed attempt of the family: where it ran, how long, on how much input."""

    group: int
    runtime_s: float
    input_size_bytes: int | None = None


@dataclass(frozen=True)
class RuntimeEstimate:
    seconds: float
    log_spread: float  # uncertainty: residual standard deviation in log space
    runs: int  # the family's own runs on the group (0: from the benchmarks alone)


@dataclass(frozen=True)
class RuntimeModel:
    """A family's fitted runtime model; ``expected`` gives the runtime per group."""

    weights: Mapping[str, float]
    reference: Mapping[str, float]  # per feature: the mean score of the groups it was fitted with
    intercept: float
    slope: float  # of log runtime on log input size (0: size not used)
    typical_log_size: float  # the runs' median log input size (0 when size is not used)
    offsets: Mapping[int, float]  # per group: delta, shrunk
    counts: Mapping[int, int]
    log_spread: float

    def expected(
        self, scores: Mapping[int, Scores], input_size_bytes: int | None = None
    ) -> dict[int, RuntimeEstimate]:
        """Expected seconds per group in ``scores`` for a task of ``input_size_bytes`` (typical if None)."""
        size = self.typical_log_size
        if self.slope and input_size_bytes is not None and input_size_bytes > 0:
            size = math.log(input_size_bytes)
        base = self.intercept + self.slope * (size - self.typical_log_size)
        factors = _log_factors([self.weights], self.reference, list(scores.values()))[0]
        return {
            g: RuntimeEstimate(
                math.exp(min(MAX_LOG_SECONDS, base + factor + self.offsets.get(g, 0.0))),
                self.log_spread,
                self.counts.get(g, 0),
            )
            for (g, factor) in zip(scores, factors, strict=True)
        }


def recorded_runs(window: Sequence[Observation]) -> tuple[StoredRun, ...]:
    """The newest completed attempts of a window that say where they ran and for how long. Nodes,
    not groups, are kept: regrouping the nodes must not make the runs wrong. Imported attempts
    are left out: their host names are another cluster's, even where one reads like a node here."""
    runs = [
        (o.node_name, float(o.usage.wall_seconds), o.input_size_bytes)
        for o in window
        if o.exit_reason is ExitReason.COMPLETED
        and not o.imported
        and o.node_name
        and o.usage.wall_seconds is not None
        and o.usage.wall_seconds > 0
        and math.isfinite(o.usage.wall_seconds)
    ]
    return tuple(runs[-RECENT_RUNS:])


def runs_on_groups(stored: Sequence[Sequence[object]], group_of: Mapping[str, int]) -> list[Run]:
    """Stored runs on the groups their nodes are in now; runs on unknown nodes or malformed ones drop."""
    runs = []
    for item in stored:
        try:
            node, seconds, size = item
            group = group_of.get(str(node))
            runtime = float(seconds)  # type: ignore[arg-type]
            input_size = int(size) if isinstance(size, (int, float)) and size > 0 else None
        except (TypeError, ValueError, OverflowError):
            continue
        if group is not None and runtime > 0 and math.isfinite(runtime):
            runs.append(Run(group, runtime, input_size))
    return runs


def feature_scores(benchmarks: Mapping[str, float]) -> dict[str, float]:
    """A node's (or a group's mean) score per task feature: the geometric mean of its benchmarks."""
    scores = {}
    for feature, names in TASK_FEATURE_BENCHMARKS.items():
        found = [v for b in names if (v := benchmarks.get(b, 0.0)) > 0 and math.isfinite(v)]
        if found:
            scores[feature] = math.exp(sum(math.log(v) for v in found) / len(found))
    return scores


def _log_factors(
    candidates: Sequence[Mapping[str, float]], reference: Mapping[str, float], groups: Sequence[Scores]
) -> np.ndarray:
    """log of Lotaru's runtime factor from the reference to each group, per candidate weighting
    (candidates x groups); a feature a group or the reference lacks drops out and the rest are
    renormalised, and with none left the factor is 1."""
    features = sorted({f for w in candidates for f, v in w.items() if v > 0})
    if not features or not groups:
        return np.zeros((len(candidates), len(groups)))
    weights = np.array([[w.get(f, 0.0) for f in features] for w in candidates])
    known = np.array([[bool(s.get(f)) and bool(reference.get(f)) for s in groups] for f in features])
    ratios = np.array(
        [
            [reference[f] / s[f] if k else 0.0 for s, k in zip(groups, row, strict=True)]
            for f, row in zip(features, known, strict=True)
        ]
    )
    total = weights @ known
    factor = np.divide(weights @ ratios, total, out=np.ones_like(total), where=total > 0)
    return np.log(factor)


def _simplex(features: Sequence[str]) -> list[dict[str, float]]:
    steps = round(1 / WEIGHT_STEP)
    return [
        {f: p / steps for f, p in zip(features, parts, strict=True) if p}
        for parts in itertools.product(range(steps + 1), repeat=len(features))
        if sum(parts) == steps
    ]


def _design(runs: Sequence[Run]) -> tuple[np.ndarray, float]:
    """Columns [1] or [1, log size - typical], and the typical log size (0 when size is not used)."""
    sizes = [r.input_size_bytes for r in runs]
    ones = np.ones((len(runs), 1))
    if sum(1 for s in sizes if s and s > 0) < max(MIN_SIZED_RUNS, len(runs)):
        return ones, 0.0
    logs = np.log(np.array(sizes, dtype=float))
    if float(np.std(logs)) < MIN_LOG_SIZE_SPREAD:
        return ones, 0.0
    typical = float(np.median(logs))
    return np.column_stack([ones, logs - typical]), typical


def _group_offsets(groups: np.ndarray, residual: np.ndarray) -> tuple[dict[int, int], dict[int, float]]:
    """Runs per group, and each group's mean residual shrunk by empirical Bayes: by
    tau^2 / (tau^2 + sigma^2 / n), with sigma^2 the pooled spread of runs within a group and tau^2 the
    spread of the groups' means beyond what sigma^2 alone would give (method of moments). Groups
    that differ no more than their runs' noise keep the benchmarks' word (offset 0)."""
    ids = [int(g) for g in np.unique(groups)]
    counts = {g: int(np.sum(groups == g)) for g in ids}
    means = {g: float(residual[groups == g].mean()) for g in ids}
    within = sum(float(((residual[groups == g] - means[g]) ** 2).sum()) for g in ids)
    if len(ids) < 2 or len(residual) <= len(ids):
        return counts, {g: 0.0 for g in ids}
    sigma2 = within / (len(residual) - len(ids))
    between = float(np.var(list(means.values()), ddof=1))
    tau2 = max(0.0, between - float(np.mean([sigma2 / n for n in counts.values()])))
    shrink = {g: tau2 / (tau2 + sigma2 / counts[g]) if tau2 + sigma2 > 0 else 0.0 for g in ids}
    return counts, {g: means[g] * shrink[g] for g in ids}


def fit_runtimes(runs: Sequence[Run], scores: Mapping[int, Scores]) -> RuntimeModel | None:
    """The family's runtime model from its completed runs (None when it has none usable)."""
    runs = [r for r in runs if r.group in scores and r.runtime_s > 0 and math.isfinite(r.runtime_s)]
    if not runs:
        return None
    features = sorted(set.intersection(*(set(s) for s in scores.values())))
    reference = {f: float(np.mean([s[f] for s in scores.values()])) for f in features}
    y = np.log([r.runtime_s for r in runs])
    x, typical = _design(runs)
    halves = {f: w for f, w in LOTARU_WEIGHTS.items() if f in features} or {f: 1.0 for f in features}
    candidates = [halves, *_simplex(features)]
    groups = sorted({r.group for r in runs})
    # Every candidate at once: log f_w per (candidate, group), the runs' targets, one least squares.
    log_factors = _log_factors(candidates, reference, [scores[g] for g in groups])
    targets = y[:, None] - log_factors[:, [groups.index(r.group) for r in runs]].T
    coefs = np.linalg.lstsq(x, targets, rcond=None)[0]
    residuals = targets - x @ coefs
    errors = (residuals**2).sum(axis=0)
    best = int(np.argmin(errors))
    if errors[0] <= errors[best] * (1 + 1e-9) + 1e-12:
        best = 0  # ties keep Lotaru's halves
    chosen, residual, fitted, error = (
        candidates[best],
        residuals[:, best],
        coefs[:, best],
        float(errors[best]),
    )
    counts, offsets = _group_offsets(np.array([r.group for r in runs]), residual)
    spread = math.sqrt(error / max(len(runs) - x.shape[1], 1)) if len(runs) > x.shape[1] else 0.0
    slope = min(max(float(fitted[1]), 0.0), MAX_SIZE_SLOPE) if x.shape[1] > 1 else 0.0
    return RuntimeModel(dict(chosen), reference, float(fitted[0]), slope, typical, offsets, counts, spread)
