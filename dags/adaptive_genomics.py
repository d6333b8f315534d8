"""The provider's example workflow, exposed to the DAG processor from this folder."""

from airflow_adaptive.example_dags.adaptive_genomics import dag

__all__ = ["dag"]
