"""Percentile of observed peaks (Witt et al.: PC50/PC95), the default with a VPA-style margin."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from airflow_adaptive.core.sizing.base import Predictor, Sample, WithMargin, register_predictor
from airflow_adaptive.core.units import format_bytes


class PercentilePredictor(Predictor):
    """The q-th percentile of the observed peaks (lower bounds count at their value)."""

    name = "percentile"

    def __init__(self, percentile: float = 95.0) -> None:
        self.percentile = percentile

    def fit(self, samples: Sequence[Sample]) -> PercentilePredictor:
        if not samples:
            raise ValueError("percentile predictor needs at least one sample")
        peaks = np.array([s.peak_memory_bytes for s in samples], dtype=float)
        self.value_bytes_ = int(np.percentile(peaks, self.percentile))
        self.n_samples_ = len(peaks)
        return self

    def predict(self, input_size_bytes: int | None = None) -> int:
        return self.value_bytes_

    def explain(self) -> str:
        return f"P{self.percentile:g} of {self.n_samples_} peaks = {format_bytes(self.value_bytes_)}"


@register_predictor("pc50")
def pc50() -> Predictor:
    return PercentilePredictor(50.0)


@register_predictor("pc95")
def pc95() -> Predictor:
    return PercentilePredictor(95.0)


@register_predictor("percentile-margin")
def percentile_margin(percentile: float = 95.0, margin_fraction: float = 0.15) -> Predictor:
    """P95 of peaks plus 15 %: the VPA recommender's margin on Witt's PC95."""
    return WithMargin(PercentilePredictor(percentile), margin_fraction)
