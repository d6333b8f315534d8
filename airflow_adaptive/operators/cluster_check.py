"""Fail fast where no Kubernetes cluster is configured at all: ``airflow dags test`` on a laptop
would otherwise retry a ``ConfigException`` for minutes. The decision is logged before."""

from __future__ import annotations

import os
from typing import Any

from airflow_adaptive.kubernetes.kubeconfig import names_a_file


def missing_cluster(operator: Any) -> str | None:
    """Why no cluster can be reached from here, or None when some configuration exists (whether
    it works is the client's to find out)."""
    files = [operator.config_file or "", os.environ.get("KUBECONFIG", ""), "~/.kube/config"]
    if names_a_file(os.pathsep.join(files)):  # a folder (a mistyped path) is no kubeconfig
        return None
    if operator.in_cluster is not False and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    if _connection_configured(operator.kubernetes_conn_id):
        return None
    return (
        "no Kubernetes cluster is configured here (no config_file, $KUBECONFIG, ~/.kube/config, "
        f"in-cluster service account or connection {operator.kubernetes_conn_id!r})"
    )


def _connection_configured(conn_id: str | None) -> bool:
    if not conn_id:
        return False
    try:
        from airflow.sdk import BaseHook

        BaseHook.get_connection(conn_id)
    except Exception:  # not found, or no way to look: nothing configured that we can see
        return False
    return True
