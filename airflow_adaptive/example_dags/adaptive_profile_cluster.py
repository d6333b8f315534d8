"""Profile every schedulable node, group the nodes, store the groups and label the nodes; create
the least-finished-first PriorityClasses when they are missing and the DAG may.

Run it when nodes are added or replaced: groups and labels are recomputed and
labels of nodes that changed group, or capabilities they lost, are removed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_adaptive.operators.profile import NodeProfileOperator

with DAG(
    dag_id="adaptive_profile_cluster",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["adaptive", "profiling"],
    params={
        "kubernetes_conn_id": Param("kubernetes_default", type="string"),
        "config_file": Param(
            None, type=["null", "string"], description="kubeconfig path, when not in cluster"
        ),
        "namespace": Param("airflow", type="string"),
        "image": Param("airflow-adaptive-profiler:0.1.0", type="string"),
        "seconds": Param(
            10,
            type="integer",
            minimum=1,
            description="seconds per benchmark run (sysbench counts whole seconds)",
        ),
        "repeats": Param(3, type="integer", minimum=1, description="runs per benchmark (mean and CV)"),
        "fio_size": Param("256M", type="string"),
        "create_priority_classes": Param(
            True, type="boolean", description="create the least-finished-first PriorityClasses if missing"
        ),
    },
) as dag:

    @task
    def list_nodes(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        from airflow_adaptive.kubernetes.nodes import node_facts, schedulable
        from airflow_adaptive.operators.profile_tasks import kubernetes_hook

        api = kubernetes_hook(params or {}).core_v1_client
        return [node_facts(n) for n in api.list_node().items if schedulable(n)]

    @task
    def node_names(nodes: list[dict[str, Any]]) -> list[str]:
        return [n["name"] for n in nodes]

    nodes = list_nodes()
    profiles = NodeProfileOperator.partial(
        task_id="profile_node",
        image="{{ params.image }}",
        namespace="{{ params.namespace }}",
        kubernetes_conn_id="{{ params.kubernetes_conn_id }}",
        config_file="{{ params.config_file or '' }}",
        seconds="{{ params.seconds }}",
        repeats="{{ params.repeats }}",
        fio_size="{{ params.fio_size }}",
        max_active_tis_per_dagrun=4,
        get_logs=False,
    ).expand(node_name=node_names(nodes))  # type: ignore[arg-type]  # XComArgs resolve at run time

    @task
    def group_and_label(
        nodes: list[dict[str, Any]], profiles: list[dict[str, Any]], params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        from airflow_adaptive.operators.profile_tasks import group_and_label as run

        return run(nodes, list(profiles), params or {})

    group_and_label(nodes, profiles.output)  # type: ignore[arg-type]  # XComArgs resolve at run time

    @task
    def priority_classes(params: dict[str, Any] | None = None) -> list[str]:
        from airflow_adaptive.operators.profile_tasks import ensure_priority_classes

        return ensure_priority_classes(params or {})

    priority_classes()
