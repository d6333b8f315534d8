"""The provider's cluster profiling workflow, exposed to the DAG processor from this folder."""

from airflow_adaptive.example_dags.adaptive_profile_cluster import dag

__all__ = ["dag"]
