"""Bucketing: allocate a bucket's upper edge, climb to the next bucket after an OOM kill.

Phung et al. (quantized and 1-D k-means buckets; the lowest bucket first) and
CCTools (``dttools/src/bucketing_greedy.c`` / ``bucketing_exhaust.c``: recency-
weighted points, buckets chosen by expected cost, a bucket drawn at random in
proportion to its probability, skipping buckets at or below a failed allocation).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
from sklearn.cluster import KMeans

from ..units import format_bytes
from .base import Predictor, Sample, peaks, register_predictor
from .retry import double


class _Buckets(Predictor):
    """Shared state: sorted bucket upper edges; retry climbs to the next edge, then the cap."""

    min_samples = 10  # warm-up observations before buckets are trusted (Phung, CCTools)
    edges_: np.ndarray

    def __init__(self, cap_bytes: int | None = None) -> None:
        self.cap_bytes = cap_bytes

    def _predict(self, input_size_bytes: int | None) -> float:
        return float(self.edges_[0])

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        higher = self.edges_[self.edges_ > failed_bytes]
        if higher.size:
            return float(higher[0])
        return float(self.cap_bytes) if self.cap_bytes else float(double(failed_bytes))

    def explain(self) -> str:
        edges = ", ".join(format_bytes(e) for e in self.edges_)
        return f"{self.name} over {self.n_samples_} peaks: buckets up to {edges}"


class QuantizedBuckets(_Buckets):
    """n buckets holding equal numbers of sorted peaks."""

    name = "quantized-buckets"

    def __init__(self, n_buckets: int = 3, cap_bytes: int | None = None) -> None:
        super().__init__(cap_bytes)
        self.n_buckets = n_buckets

    def _fit(self, samples: Sequence[Sample]) -> None:
        y = np.sort(peaks(samples))
        n = min(self.n_buckets, y.size)
        self.edges_ = np.unique(np.quantile(y, np.arange(1, n + 1) / n, method="inverted_cdf"))


class KMeansBuckets(_Buckets):
    """n buckets from 1-D k-means (k-means++ seeding) over the peaks; edges are cluster maxima."""

    name = "kmeans-buckets"

    def __init__(self, n_buckets: int = 3, random_state: int = 0, cap_bytes: int | None = None) -> None:
        super().__init__(cap_bytes)
        self.n_buckets = n_buckets
        self.random_state = random_state

    def _fit(self, samples: Sequence[Sample]) -> None:
        y = peaks(samples)
        k = min(self.n_buckets, np.unique(y).size)
        if k <= 1:
            self.edges_ = np.array([y.max()])
            return
        labels = KMeans(n_clusters=k, n_init=1, random_state=self.random_state).fit_predict(y.reshape(-1, 1))
        self.edges_ = np.sort([y[labels == c].max() for c in range(k)])


def _recency_weights(n: int, decay: float) -> np.ndarray:
    """CCTools-style significance: newer points weigh more."""
    return (1.0 + decay) ** np.arange(n)


def expected_cost(edges: np.ndarray, probs: np.ndarray, means: np.ndarray) -> float:
    """Expected memory waste when a bucket is drawn in proportion to its probability.

    A task from bucket j given bucket i's edge wastes ``edge_i - mean_j`` when i >= j; otherwise
    it wastes ``edge_i`` and is drawn again among the buckets above i.
    """
    k = edges.size
    cost = np.zeros((k, k))  # cost[i, j]: allocate edge i to a task of bucket j
    for i in range(k - 1, -1, -1):
        above = probs[i + 1 :]
        for j in range(k):
            if i >= j:
                cost[i, j] = edges[i] - means[j]
            else:
                cost[i, j] = edges[i] + float(above @ cost[i + 1 :, j]) / float(above.sum())
    return float(probs @ cost @ probs)


class _DrawnBuckets(_Buckets):
    """CCTools allocation: draw a bucket at random by probability; retries skip lower buckets."""

    def __init__(
        self, recency_decay: float = 0.01, random_state: int = 0, cap_bytes: int | None = None
    ) -> None:
        super().__init__(cap_bytes)
        self.recency_decay = recency_decay
        self.random_state = random_state

    def _set_buckets(self, y: np.ndarray, w: np.ndarray, cuts: list[int]) -> None:
        """Buckets end at the sorted indices in ``cuts`` (inclusive; the last is len-1)."""
        bounds = [0, *[c + 1 for c in cuts]]
        self.edges_ = np.array([y[c] for c in cuts])
        weight = np.array([w[a:b].sum() for a, b in pairwise(bounds)])
        self.probs_ = weight / weight.sum()
        self.means_ = np.array([np.average(y[a:b], weights=w[a:b]) for a, b in pairwise(bounds)])
        self.seed_ = (self.random_state, len(y))

    def _sorted(self, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
        y = peaks(samples)
        w = _recency_weights(y.size, self.recency_decay)
        order = np.argsort(y, kind="stable")
        return y[order], w[order]

    def _draw(self, floor: float, skip: int) -> float:
        """A bucket above ``floor`` drawn with its probability by a generator seeded by the fitted
        history, after ``skip`` numbers: the same inputs draw the same bucket (a replay repeats),
        and a retry uses the number after the first allocation's, as one generator would."""
        allowed = self.edges_ > floor
        if not allowed.any():
            return float(self.cap_bytes) if self.cap_bytes else 2.0 * floor
        p = np.where(allowed, self.probs_, 0.0)
        rng = np.random.default_rng(list(self.seed_))
        rng.random(skip)
        return float(rng.choice(self.edges_, p=p / p.sum()))

    def _predict(self, input_size_bytes: int | None) -> float:
        return self._draw(-1.0, skip=0)

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        return self._draw(float(failed_bytes), skip=1)


class GreedyBuckets(_DrawnBuckets):
    """CCTools greedy bucketing: split buckets recursively at the break with the lowest expected cost."""

    name = "greedy-buckets"

    def _fit(self, samples: Sequence[Sample]) -> None:
        y, w = self._sorted(samples)
        cw, cyw = np.cumsum(w), np.cumsum(y * w)
        cuts: list[int] = []
        ranges = [(0, y.size - 1)]
        while ranges:
            lo, hi = ranges.pop(0)
            brk = self._best_break(y, cw, cyw, lo, hi)
            if brk == hi:
                continue
            cuts.append(brk)
            if brk > lo:
                ranges.append((lo, brk))
            if brk + 1 < hi:
                ranges.append((brk + 1, hi))
        self._set_buckets(y, w, sorted({*cuts, y.size - 1}))

    @staticmethod
    def _best_break(y: np.ndarray, cw: np.ndarray, cyw: np.ndarray, lo: int, hi: int) -> int:
        """The break index in [lo, hi] with the lowest two-bucket expected cost (ties: the highest)."""
        base_w = cw[lo - 1] if lo else 0.0
        base_yw = cyw[lo - 1] if lo else 0.0
        idx = np.arange(lo, hi + 1)
        w_lo = cw[idx] - base_w
        total = cw[hi] - base_w
        w_hi = total - w_lo
        e_lo = (cyw[idx] - base_yw) / w_lo
        e_hi = np.divide(cyw[hi] - cyw[idx], w_hi, out=np.zeros_like(w_hi), where=w_hi > 0)
        p1, p2 = w_lo / total, w_hi / total
        brk, top = y[idx], y[hi]
        cost = (
            p1 * p1 * (brk - e_lo)
            + p1 * p2 * (top - e_lo)
            + p2 * p1 * (brk + top - e_hi)
            + p2 * p2 * (top - e_hi)
        )
        return int(idx[len(cost) - 1 - int(np.argmin(cost[::-1]))])


class ExhaustiveBuckets(_DrawnBuckets):
    """CCTools exhaustive bucketing: 1 to 10 buckets of equal weight; keep the cheapest."""

    name = "exhaustive-buckets"

    def __init__(
        self,
        max_buckets: int = 10,
        recency_decay: float = 0.01,
        random_state: int = 0,
        cap_bytes: int | None = None,
    ) -> None:
        super().__init__(recency_decay, random_state, cap_bytes)
        self.max_buckets = max_buckets

    def _fit(self, samples: Sequence[Sample]) -> None:
        y, w = self._sorted(samples)
        share = np.cumsum(w) / w.sum()
        best: tuple[float, list[int]] | None = None
        for k in range(1, min(self.max_buckets, y.size) + 1):
            cuts = sorted({int(np.searchsorted(share, q - 1e-12)) for q in np.arange(1, k + 1) / k})
            self._set_buckets(y, w, cuts)
            cost = expected_cost(self.edges_, self.probs_, self.means_)
            if best is None or cost < best[0]:
                best = (cost, cuts)
        assert best is not None
        self._set_buckets(y, w, best[1])


register_predictor("quantized-buckets", anchor=True, takes=("cap_bytes",))(QuantizedBuckets)
register_predictor("kmeans-buckets", anchor=True, takes=("cap_bytes",))(KMeansBuckets)
register_predictor("greedy-buckets", anchor=True, takes=("cap_bytes",))(GreedyBuckets)
register_predictor("exhaustive-buckets", anchor=True, takes=("cap_bytes",))(ExhaustiveBuckets)
