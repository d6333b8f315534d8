"""Example ``$AIRFLOW_HOME/config/airflow_local_settings.py`` for deployments without entry points.

The installed package registers ``pod_mutation_hook`` and ``task_policy`` through the
``airflow.policy`` entry point already; use this file only where that is disabled, and then on
every scheduler, DAG processor and worker (the KubernetesPodOperator runs the hook inside the
task, and the task policy runs wherever a DAG file is parsed).
"""

from airflow_adaptive.policy import pod_mutation_hook, task_policy

__all__ = ["pod_mutation_hook", "task_policy"]
