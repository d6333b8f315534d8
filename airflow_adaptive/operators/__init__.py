"""Operators of the provider."""

from airflow_adaptive.operators.pod import (
    AdaptiveKubernetesPodOperator,
    AdaptiveMemoryCapReached,
    AdaptiveOOMKilled,
)

__all__ = ["AdaptiveKubernetesPodOperator", "AdaptiveMemoryCapReached", "AdaptiveOOMKilled"]
