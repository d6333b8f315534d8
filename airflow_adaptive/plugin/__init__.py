"""The Airflow plugin: the allocation-statistics page in Airflow's navigation, a per-task tab, its
read-only API, and the least-finished-first priority weight strategy (nothing runs at import but
building the FastAPI app)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_adaptive.plugin.app import create_app
from airflow_adaptive.weight_rule import LeastFinishedFirst

PREFIX = "/adaptive"


class AdaptivePlugin(AirflowPlugin):
    name = "adaptive"
    priority_weight_strategies = [LeastFinishedFirst]
    fastapi_apps = [{"app": create_app(), "url_prefix": PREFIX, "name": "airflow-adaptive"}]
    external_views = [
        {  # a top-level navigation item, rendered inside the UI at /plugin/adaptive
            "name": "Adaptive",
            "href": f"{PREFIX}/ui#/overview",
            "url_route": "adaptive",
            "destination": "nav",
        },
        {  # a tab on every task's page that opens its family's page
            "name": "Adaptive sizing",
            "href": f"{PREFIX}/ui#/task/{{DAG_ID}}/{{TASK_ID}}",
            "url_route": "adaptive-task",
            "destination": "task",
        },
    ]
