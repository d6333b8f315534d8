"""Operators of the provider (imported lazily: the task policy imports ``operators.callback`` while
Airflow parses every DAG file, and the operator's module loads the sizing libraries)."""

from __future__ import annotations

from typing import Any

__all__ = ["AdaptiveKubernetesPodOperator", "AdaptiveMemoryCapReached", "AdaptiveOOMKilled"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from airflow_adaptive.operators import pod

        return getattr(pod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
