"""For deployments that load plugins from ``$AIRFLOW_HOME/plugins`` instead of entry points.

Copy this file there. With the ``airflow-adaptive`` package installed, the
entry point already registers the plugin; keep only one of the two.
"""

from airflow_adaptive.plugin import AdaptivePlugin

__all__ = ["AdaptivePlugin"]
