"""``adaptive-pooled``: ``adaptive`` whose small-sample bound pools a family's spread of log peaks
with a prior spread learnt across the store's families (``small_samples.SpreadMoments``, limma's
moment estimate) instead of a fixed one. Small steady families get less memory sooner; on the
shared traces it kills more than the OOM target allows on some (docs/sizing.md), so it is not the
default."""

from __future__ import annotations

from .adaptive import AdaptivePredictor
from .base import register_predictor


class PooledAdaptivePredictor(AdaptivePredictor):
    name = "adaptive-pooled"
    learns_prior_spread = True


register_predictor("adaptive-pooled", takes=("max_oom_rate",))(PooledAdaptivePredictor)
