"""Least-finished-first end to end: real Airflow creates the task instances (our strategy gives
their weights), the real scheduler query orders a one-slot pool by them, and the operator's pods
carry the PriorityClass; with the store down, own weights and unchanged pods."""

from __future__ import annotations

import importlib.util
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import select, text, update

from airflow_adaptive import priority as lff
from airflow_adaptive.core.model import GIB
from airflow_adaptive.core.units import MIB
from airflow_adaptive.kubernetes import priority as classes
from airflow_adaptive.kubernetes.pods import PRIORITY_ANNOTATION
from tests.conftest import sql_store, validate_pod
from tests.factories import attempt
from tests.fake_kubernetes import FakeKubernetesApi

DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

with DAG(dag_id={dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    for name in ("old", "new"):
        AdaptiveKubernetesPodOperator(
            task_id=name, task_family="lff." + name, pool="lff_single", priority_weight=2,
            image="busybox", cmds=["sh", "-c"], arguments=["true"],
            config_file={kubeconfig!r}, in_cluster=False, namespace="default",
            poll_interval=0.1, startup_check_interval_seconds=0, startup_timeout_seconds=5,
        )
"""


def load_dag(airflow_home: Path, api: FakeKubernetesApi, dag_id: str) -> Any:
    path = airflow_home / "dags" / f"{dag_id}.py"
    path.write_text(textwrap.dedent(DAG.format(dag_id=dag_id, kubeconfig=str(api.kubeconfig))))
    spec = importlib.util.spec_from_file_location(dag_id, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def serialise_dag_folder() -> None:
    """Write the DAG folder's DAGs to the metadata database, as the dag-processor does."""
    from airflow import settings
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

    manager = DagBundlesManager()
    assert settings.Session is not None  # Airflow is initialised
    session = settings.Session()
    manager.sync_bundles_to_db(session=session)
    session.commit()
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)


def seed_history(engine: Any) -> None:
    """lff.old: 50 successes; five other families 10 each; lff.new: none."""
    store = sql_store(engine)
    store.record([attempt(i, family="lff.old", peak=GIB // 4, run=f"old{i}") for i in range(50)])
    for f in range(5):
        store.record([attempt(i, family=f"other{f}", peak=GIB // 4, run=f"o{f}-{i}") for i in range(10)])


def one_slot_pool() -> None:
    from airflow import settings
    from airflow.models.pool import Pool

    assert settings.Session is not None  # Airflow is initialised
    session = settings.Session()
    if session.scalar(select(Pool).where(Pool.pool == "lff_single")) is None:
        session.add(Pool(pool="lff_single", slots=1, description="", include_deferred=False))
        session.commit()


def new_run(dag_id: str, run_id: str) -> Any:
    """A DAG run created the way the scheduler and api-server do, from the serialised DAG."""
    from airflow import settings
    from airflow.models.dagbag import DBDagBag
    from airflow.models.dagrun import get_or_create_dagrun
    from airflow.utils.types import DagRunTriggeredByType

    assert settings.Session is not None  # Airflow is initialised
    session = settings.Session()
    now = datetime.now(timezone.utc)
    scheduler_dag = DBDagBag().get_latest_version_of_dag(dag_id, session=session)
    assert scheduler_dag is not None
    run = get_or_create_dagrun(
        dag=scheduler_dag, run_id=run_id, logical_date=now, data_interval=None, run_after=now,
        start_date=now, conf=None, triggered_by=DagRunTriggeredByType.TEST, triggering_user_name="test",
        session=session,
    )  # fmt: skip
    session.commit()
    return run


def mark_scheduled(run: Any) -> Any:
    """The run started and its tasks ready, as the scheduler leaves them before queueing."""
    from airflow import settings
    from airflow.models.dag import DagModel
    from airflow.utils.state import DagRunState, TaskInstanceState

    assert settings.Session is not None  # Airflow is initialised
    session = settings.Session()
    run = session.merge(run)
    run.state = DagRunState.RUNNING  # what the scheduler does first with a queued run
    session.execute(update(DagModel).where(DagModel.dag_id == run.dag_id).values(is_paused=False))
    for ti in run.get_task_instances(session=session):
        ti.state = TaskInstanceState.SCHEDULED
    session.commit()
    return session


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
