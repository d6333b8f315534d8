"""Adaptive memory sizing, placement and history for Kubernetes-run Airflow tasks."""

from typing import Any

from airflow_adaptive.version import __version__

__all__ = ["LeastFinishedFirst", "__version__"]


def __getattr__(name: str) -> Any:
    # ``weight_rule="airflow_adaptive.LeastFinishedFirst"``, imported only when asked for (PEP 562).
    if name == "LeastFinishedFirst":
        from airflow_adaptive.weight_rule import LeastFinishedFirst

        return LeastFinishedFirst
    raise AttributeError(f"module 'airflow_adaptive' has no attribute {name!r}")
