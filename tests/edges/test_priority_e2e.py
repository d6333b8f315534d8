"""Least-finished-first end to end: real Airflow creates the task instances (our strategy gives
their weights), the real scheduler query orders a one-slot pool by them, and the operator's pods
carry the PriorityClass; with the store down, own weights and unchanged pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select, text

from airflow_adaptive import weight_rule as lff
from airflow_adaptive.core.units import MIB
from airflow_adaptive.kubernetes import priority_classes as classes
from airflow_adaptive.kubernetes.names import PRIORITY_ANNOTATION
from tests.conftest import validate_pod
from tests.fake_kubernetes import FakeKubernetesApi
from tests.scheduling import load_dag, mark_scheduled, new_run, seed_history


def one_slot_pool() -> None:
    from airflow import settings
    from airflow.models.pool import Pool

    assert settings.Session is not None  # Airflow is initialised
    session = settings.Session()
    if session.scalar(select(Pool).where(Pool.pool == "lff_single")) is None:
        session.add(Pool(pool="lff_single", slots=1, description="", include_deferred=False))
        session.commit()


def queued_by_scheduler(run: Any) -> list[str]:
    """The task ids the real scheduler queues from this run's scheduled tasks (pool: one slot)."""
    from airflow.jobs.job import Job
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner

    session = mark_scheduled(run)
    runner = SchedulerJobRunner(job=Job(), executors=[_executor()])
    queued = runner._executable_task_instances_to_queued(max_tis=32, session=session)
    session.rollback()
    return [ti.task_id for ti in queued]


def _executor() -> Any:
    from airflow.executors.local_executor import LocalExecutor

    return LocalExecutor()


def weights(run: Any) -> dict[str, int]:

    return {ti.task_id: ti.priority_weight for ti in run.get_task_instances(session=_session())}


def test_new_family_runs_first_and_its_pod_gets_the_high_class(
    airflow_home: Path, tmp_path: Path, engine: Any
) -> None:
    seed_history(engine)
    one_slot_pool()
    with FakeKubernetesApi(tmp_path, lambda pod: 100 * MIB) as api:
        for manifest in classes.manifests():
            api.priority_classes[manifest["metadata"]["name"]] = manifest
        dag = load_dag(airflow_home, api, "lff_e2e")
        done = dag.test()  # serialises the DAG, creates the task instances, runs both pods
    assert done.state == "success"
    pods = {p["metadata"]["labels"]["task_id"]: validate_pod(p) for p in api.created}
    assert pods["new"]["spec"]["priorityClassName"] == "adaptive-lff-high"
    assert pods["old"]["spec"]["priorityClassName"] == "adaptive-lff-low"
    assert "0 successful attempts" in pods["new"]["metadata"]["annotations"][PRIORITY_ANNOTATION]
    assert "50 successful attempts" in pods["old"]["metadata"]["annotations"][PRIORITY_ANNOTATION]

    lff.forget()
    run = new_run("lff_e2e", "lff_order")
    got = weights(run)
    assert got["new"] > got["old"] > 2  # own weight 2 plus the rank; fewer successes weigh more
    assert queued_by_scheduler(run) == ["new"]


def test_store_down_gives_own_weights_and_plain_pods(airflow_home: Path, tmp_path: Path, engine: Any) -> None:
    seed_history(engine)
    one_slot_pool()
    with FakeKubernetesApi(tmp_path, lambda pod: 100 * MIB) as api:
        dag = load_dag(airflow_home, api, "lff_down")
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE adaptive_family RENAME TO adaptive_family_away"))
        try:
            done = dag.test()
            lff.forget()
            run = new_run("lff_down", "lff_down_order")  # the savepoint kept the run's transaction alive
            got = weights(run)
        finally:
            with engine.begin() as conn:
                conn.execute(text("ALTER TABLE adaptive_family_away RENAME TO adaptive_family"))
    assert done.state == "success" and len(api.created) == 2
    for pod in api.created:
        assert "priorityClassName" not in validate_pod(pod)["spec"]
    assert got == {"old": 2, "new": 2}


def _session() -> Any:
    from airflow import settings

    assert settings.Session is not None  # Airflow is initialised
    return settings.Session()
