"""The work of the profiling DAG's Python tasks (kept out of the DAG file so parsing stays cheap)."""

from __future__ import annotations

from typing import Any

from airflow_adaptive.config import get_settings
from airflow_adaptive.core.grouping import group_nodes
from airflow_adaptive.kubernetes.nodes import label_patch
from airflow_adaptive.nodebench.files import grouping_json, profile_from_json
from airflow_adaptive.store.access import open_store


def kubernetes_hook(params: dict[str, Any]) -> Any:
    """The DAG's cluster; where none is configured at all, the task fails at once, without retries
    (``airflow dags test`` on a laptop would retry a ``ConfigException`` for minutes)."""
    from types import SimpleNamespace

    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_adaptive.operators.cluster_check import missing_cluster

    where = SimpleNamespace(
        config_file=params.get("config_file") or None,
        in_cluster=None,
        kubernetes_conn_id=params.get("kubernetes_conn_id") or None,
    )
    reason = missing_cluster(where)
    if reason is not None:
        raise AirflowFailException(f"{reason}: nothing to profile")
    return KubernetesHook(
        conn_id=params.get("kubernetes_conn_id") or None, config_file=params.get("config_file") or None
    )


def group_and_label(
    nodes: list[dict[str, Any]], profiles: list[dict[str, Any]], params: dict[str, Any]
) -> dict[str, Any]:
    """Group the measured nodes, store profiles and groups, and patch every node's labels."""
    facts = {n["name"]: n for n in nodes}
    merged = []
    for i, raw in enumerate(profiles):
        fact = facts.get(raw.get("node"), {})
        raw = {
            **raw,
            "cores": fact.get("cores") or raw.get("cores"),
            "memory_bytes": fact.get("memory_bytes") or raw.get("memory_bytes"),
            "capabilities": sorted(set(raw.get("capabilities", [])) | set(fact.get("capabilities", []))),
        }
        merged.append(profile_from_json(raw, f"profile #{i}"))
    store = open_store(get_settings())
    previous = {n.name: n.group_id for n in store.nodes() if n.group_id is not None}  # no label churn
    grouping = group_nodes(merged, previous=previous)
    store.save_nodes(merged, grouping)
    api = kubernetes_hook(params).core_v1_client
    for node in api.list_node().items:
        profile = next((p for p in merged if p.node == node.metadata.name), None)
        capabilities = profile.capabilities if profile else frozenset()
        api.patch_node(
            node.metadata.name,
            label_patch(node.metadata.labels or {}, grouping, node.metadata.name, capabilities),
        )
    return grouping_json(grouping)


def ensure_priority_classes(params: dict[str, Any]) -> list[str]:
    """Create the missing ``adaptive-lff-*`` PriorityClasses; without the right (RBAC: create
    priorityclasses, cluster-scoped) the task logs why and succeeds: pods then go without a class."""
    import logging

    from kubernetes.client.exceptions import ApiException

    from airflow_adaptive.kubernetes.priority_classes import create_missing

    if not params.get("create_priority_classes", True):
        return []
    try:
        return create_missing(kubernetes_hook(params).api_client)
    except ApiException as err:
        if err.status not in (401, 403):
            raise
        logging.getLogger(__name__).warning(
            "airflow-adaptive: not allowed to create PriorityClasses (%s %s); apply them with "
            "`airflow-adaptive priority-classes | kubectl apply -f -`",
            err.status,
            err.reason,
        )
        return []
