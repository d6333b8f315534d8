"""Percentile of observed peaks (Witt et al.: PC50/PC95), and the VPA recommender's estimator."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..units import MIB, format_bytes
from .base import Predictor, Sample, WithMargin, peaks, register_predictor
from .retry import vpa_bump


class PercentilePredictor(Predictor):
    """Witt et al. 2019 (``seeds/witt-feedback-memory-lff.txt``, section IV.A): the q-th percentile
    (numpy's linear interpolation) of the peaks of the successful attempts so far, from the first
    one on (lower bounds count at their value); doubles on failure."""

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
    """The Kubernetes VPA recommender's memory target (kubernetes/autoscaler,
    ``vertical-pod-autoscaler/pkg/recommender``), every attempt weighing the same:

    - the peaks go into an exponential histogram whose first bucket is 1e7 bytes and each next one
      5 % wider (``model/aggregations_config.go``, ``memoryHistogramOptions``);
    - the target is its P90 as ``util/histogram.go`` ``Percentile`` reads it: the end of the first
      bucket whose cumulative weight reaches 90 % of the total (the ceil(0.9 n)-th smallest peak's
      bucket, not an interpolated value);
    - :class:`WithFloor` then adds the 15 % safety margin and the 250 MiB pod minimum
      (``logic/recommender.go``);
    - after an OOM kill: max(used + 100 MiB, used x 1.2) (``DefaultOOMMinBumpUp``,
      ``DefaultOOMBumpUpRatio``).
    """

    name = "vpa"

    def __init__(
        self, percentile: float = 90.0, first_bucket_bytes: int = 10**7, bucket_growth: float = 0.05
    ) -> None:
        self.percentile = percentile
        self.first_bucket_bytes = first_bucket_bytes
        self.bucket_growth = bucket_growth

    def _bucket_end(self, value: float) -> float:
        """Bucket i covers [first ((1+g)^i - 1) / g, first ((1+g)^(i+1) - 1) / g)."""
        first, g = self.first_bucket_bytes, self.bucket_growth
        index = 0 if value < first else int(math.log(value * g / first + 1) / math.log(1 + g))
        return first * ((1 + g) ** (index + 1) - 1) / g

    def _fit(self, samples: Sequence[Sample]) -> None:
        at = float(np.percentile(peaks(samples), self.percentile, method="inverted_cdf"))
        self.value_bytes_ = self._bucket_end(at)

    def _predict(self, input_size_bytes: int | None) -> float:
        return self.value_bytes_

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        return vpa_bump(failed_bytes)

    def explain(self) -> str:
        return f"VPA P{self.percentile:g} of {self.n_samples_} peaks = {format_bytes(self.value_bytes_)}"


class WithFloor(WithMargin):
    """VPA's margin then its floor: ``pod-recommendation-min-memory-mb`` 250, times 1024 * 1024."""

    def __init__(self, inner: Predictor, margin_fraction: float = 0.15, floor_bytes: int = 250 * MIB) -> None:
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
