"""Adaptive memory sizing, placement and history for Kubernetes-run Airflow tasks."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # ``weight_rule="airflow_adaptive.LeastFinishedFirst"``, imported only when asked for (PEP 562).
    if name == "LeastFinishedFirst":
        from airflow_adaptive.priority import LeastFinishedFirst

        return LeastFinishedFirst
    raise AttributeError(f"module 'airflow_adaptive' has no attribute {name!r}")
