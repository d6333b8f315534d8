"""The Airflow plugin: read-only API for allocation statistics (nothing runs at import)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_adaptive.plugin.app import create_app


class AdaptivePlugin(AirflowPlugin):
    name = "adaptive"
    fastapi_apps = [{"app": create_app(), "url_prefix": "/adaptive", "name": "airflow-adaptive"}]
