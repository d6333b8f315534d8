"""Percentile of observed peaks (Witt et al.: PC50/PC95), and the VPA recommender's estimator."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..units import format_bytes
from .base import MIB, Predictor, Sample, WithMargin, peaks, register_predictor


class PercentilePredictor(Predictor):
    """The q-th percentile of the observed peaks (lower bounds count at their value); doubles on failure."""

    name = "percentile"

    def __init__(self, percentile: float = 95.0) -> None:
        self.percentile = percentile

    def _fit(self, samples: Sequence[Sample]) -> None:
        self.value_bytes_ = float(np.percentile(peaks(samples), self.percentile))

    def _predict(self, input_size_bytes: int | None) -> float:
        return self.value_bytes_

    def explain(self) -> str:
        return f"P{self.percentile:g} of {self.n_samples_} peaks = {format_bytes(self.value_bytes_)}"


class VpaPredictor(Predictor):
    """Kubernetes VPA recommender: P90 of an exponential histogram (+5 % buckets), then margin and floor.

    The histogram's bucket ends are what the VPA reports, so the estimate is the end of the bucket
    holding the percentile. After an OOM kill: max(used + 100 MiB, used x 1.2).
    """

    name = "vpa"

    def __init__(
        self, percentile: float = 90.0, first_bucket_bytes: int = 10 * MIB, bucket_growth: float = 0.05
    ) -> None:
        self.percentile = percentile
        self.first_bucket_bytes = first_bucket_bytes
        self.bucket_growth = bucket_growth

    def _bucket_end(self, value: float) -> float:
        if value <= self.first_bucket_bytes:
            return float(self.first_bucket_bytes)
        # bucket i covers [first * ((1+g)^i - 1) / g, ...): the VPA's exponential bucketing
        g = self.bucket_growth
        index = math.ceil(math.log(value * g / self.first_bucket_bytes + 1) / math.log(1 + g))
        return self.first_bucket_bytes * ((1 + g) ** index - 1) / g

    def _fit(self, samples: Sequence[Sample]) -> None:
        self.value_bytes_ = self._bucket_end(float(np.percentile(peaks(samples), self.percentile)))

    def _predict(self, input_size_bytes: int | None) -> float:
        return self.value_bytes_

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        return max(failed_bytes + 100 * MIB, failed_bytes * 1.2)

    def explain(self) -> str:
        return f"VPA P{self.percentile:g} of {self.n_samples_} peaks = {format_bytes(self.value_bytes_)}"


class WithFloor(WithMargin):
    """VPA's margin then its 250 MB floor."""

    def __init__(
        self, inner: Predictor, margin_fraction: float = 0.15, floor_bytes: int = 250 * 10**6
    ) -> None:
        super().__init__(inner, margin_fraction)
        self.floor_bytes = floor_bytes

    def _post(self, value: int, *, cold: bool) -> int:
        return value if cold else max(self.floor_bytes, super()._post(value, cold=cold))


@register_predictor("pc50", anchor=True)
def pc50() -> Predictor:
    return PercentilePredictor(50.0)


@register_predictor("pc95", anchor=True)
def pc95() -> Predictor:
    return PercentilePredictor(95.0)


@register_predictor("percentile-margin")
def percentile_margin(percentile: float = 95.0, margin_fraction: float = 0.15) -> Predictor:
    """P95 of peaks plus 15 %: the VPA recommender's margin on Witt's PC95."""
    return WithMargin(PercentilePredictor(percentile), margin_fraction)


@register_predictor("vpa", anchor=True)
def vpa() -> Predictor:
    return WithFloor(VpaPredictor())
