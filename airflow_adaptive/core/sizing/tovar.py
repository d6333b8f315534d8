"""Tovar et al. (TPDS 2017, CCTools ``category.c``): a first allocation, then the maximum seen."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..units import format_bytes
from .base import Predictor, Sample, peaks, register_predictor, runtimes
from .retry import double

BUCKET_BYTES = 250 * 10**6  # CCTools' memory histogram bucket


class _TwoStep(Predictor):
    """Candidates are the histogram bucket edges up to the maximum seen; retries get the maximum."""

    min_samples = 1

    def __init__(self, bucket_bytes: int = BUCKET_BYTES, cap_bytes: int | None = None) -> None:
        self.bucket_bytes = bucket_bytes
        self.cap_bytes = cap_bytes

    def _fit(self, samples: Sequence[Sample]) -> None:
        r, t = peaks(samples), runtimes(samples)
        self.max_bytes_ = float(np.ceil(r.max() / self.bucket_bytes) * self.bucket_bytes)
        edges = np.arange(1, int(self.max_bytes_ // self.bucket_bytes) + 1) * float(self.bucket_bytes)
        above = r[None, :] > edges[:, None]  # [candidate, task]
        n = r.size
        self.first_bytes_ = float(edges[int(np.argmin(self._objective(edges, above, t, n)))])

    def _objective(self, a: np.ndarray, above: np.ndarray, t: np.ndarray, n: int) -> np.ndarray:
        raise NotImplementedError

    def _predict(self, input_size_bytes: int | None) -> float:
        return self.first_bytes_

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        if failed_bytes < self.max_bytes_:
            return self.max_bytes_
        return float(self.cap_bytes) if self.cap_bytes else float(double(failed_bytes))

    def explain(self) -> str:
        return f"{self.name}: first {format_bytes(self.first_bytes_)}, then {format_bytes(self.max_bytes_)}"


class MinWaste(_TwoStep):
    """The a minimising a * mean runtime + a_max * T(>a), T(>a) the mean runtime of tasks needing more."""

    name = "tovar-min-waste"

    def _objective(self, a: np.ndarray, above: np.ndarray, t: np.ndarray, n: int) -> np.ndarray:
        t_above = (above * t[None, :]).sum(axis=1) / n
        return a * t.mean() + self.max_bytes_ * t_above


class MaxThroughput(_TwoStep):
    """The a maximising (P(r<=a) * a_max / a + P(r>a)) / (mean runtime + T(>a))."""

    name = "tovar-max-throughput"

    def _objective(self, a: np.ndarray, above: np.ndarray, t: np.ndarray, n: int) -> np.ndarray:
        p_above = above.mean(axis=1)
        t_above = (above * t[None, :]).sum(axis=1) / n
        throughput = ((1 - p_above) * self.max_bytes_ / a + p_above) / (t.mean() + t_above)
        return -throughput


register_predictor("tovar-min-waste", anchor=True, takes=("cap_bytes",))(MinWaste)
register_predictor("tovar-max-throughput", anchor=True, takes=("cap_bytes",))(MaxThroughput)
