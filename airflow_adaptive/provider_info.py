"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_adaptive.options import provider_config
from airflow_adaptive.version import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-adaptive",
        "name": "Adaptive Kubernetes",
        "description": "Adaptive memory sizing, placement and history for Kubernetes-run tasks.",
        "versions": [__version__],
        "operators": [
            {
                "integration-name": "Adaptive Kubernetes",
                "python-modules": ["airflow_adaptive.operators.pod"],
            }
        ],
        "integrations": [
            {
                "integration-name": "Adaptive Kubernetes",
                "external-doc-url": "https://airflow.apache.org/docs/apache-airflow-providers-cncf-kubernetes/",
                "tags": ["software"],
            }
        ],
        "db-managers": ["airflow_adaptive.store.db_manager.AdaptiveDBManager"],
        "plugins": [{"name": "adaptive", "plugin-class": "airflow_adaptive.plugin.AdaptivePlugin"}],
        "config": provider_config(),
    }
