"""Memory predictors and retry policies, registered by name."""

from airflow_adaptive.core.sizing import percentile as _percentile  # noqa: F401  (registers)
from airflow_adaptive.core.sizing.base import (
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
