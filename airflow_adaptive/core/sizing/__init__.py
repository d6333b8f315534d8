"""Memory predictors and retry policies, registered by name."""

from airflow_adaptive.core.sizing import (  # noqa: F401  (importing registers the strategies)
    adaptive as _adaptive,
    baselines as _baselines,
    bucketing as _bucketing,
    percentile as _percentile,
    regression as _regression,
    tovar as _tovar,
)
from airflow_adaptive.core.sizing.base import (
    ANCHORS,
    Predictor,
    Sample,
    WithBounds,
    WithMargin,
    make_predictor,
    predictor_names,
    register_predictor,
)
from airflow_adaptive.core.sizing.retry import RETRY_POLICIES, get_retry_policy

__all__ = [
    "ANCHORS",
    "RETRY_POLICIES",
    "Predictor",
    "Sample",
    "WithBounds",
    "WithMargin",
    "get_retry_policy",
    "make_predictor",
    "predictor_names",
    "register_predictor",
]
