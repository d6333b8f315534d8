"""Adaptive memory sizing, placement and history for Kubernetes-run Airflow tasks."""

__version__ = "0.1.0"
