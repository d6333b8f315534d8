"""Example ``$AIRFLOW_HOME/config/airflow_local_settings.py`` for deployments without entry points.

The installed package registers ``pod_mutation_hook`` through the ``airflow.policy``
entry point already; use this file only where that is disabled, and then on every
scheduler and worker (the KubernetesPodOperator runs the hook inside the task).
"""

from airflow_adaptive.policy import pod_mutation_hook

__all__ = ["pod_mutation_hook"]
