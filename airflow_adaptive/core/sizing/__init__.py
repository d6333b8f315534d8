"""Memory predictors and retry policies, registered by name."""

# Importing the strategy modules registers them.
from . import adaptive, baselines, bucketing, percentile, pooled, regression, sizey, tovar
from .base import (
    ANCHORS,
    Predictor,
    Sample,
    WithBounds,
    WithMargin,
    make_predictor,
    predictor_names,
    quick_predictor_names,
    register_predictor,
)
from .retry import RETRY_POLICIES, get_retry_policy

__all__ = [
    "ANCHORS",
    "RETRY_POLICIES",
    "Predictor",
    "Sample",
    "WithBounds",
    "WithMargin",
    "adaptive",
    "baselines",
    "bucketing",
    "get_retry_policy",
    "make_predictor",
    "percentile",
    "pooled",
    "predictor_names",
    "quick_predictor_names",
    "register_predictor",
    "regression",
    "sizey",
    "tovar",
]
