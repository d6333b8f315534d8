"""Example ``$AIRFLOW_HOME/config/airflow_local_settings.py`` for deployments without entry points.

The installed package registers ``pod_mutation_hook`` through the
``airflow.policy`` entry point already; use this only where that is disabled,
and then on every scheduler and worker.
"""

from airflow_adaptive.policy import mutate


def pod_mutation_hook(pod):  # type: ignore[no-untyped-def]
    """Apply the adaptive decision; leave the pod as it was on any error."""
    from airflow_adaptive.policy import pod_mutation_hook as adaptive_hook

    adaptive_hook(pod)


__all__ = ["mutate", "pod_mutation_hook"]
