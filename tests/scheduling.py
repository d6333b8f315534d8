"""Real Airflow scheduling for tests: a DAG of two adaptive pods written to the DAG folder and
serialised as the dag-processor does, runs created and marked scheduled as the scheduler does,
and a history where one family has many successes and the other none."""

from __future__ import annotations

import importlib.util
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import update

from airflow_adaptive.core.units import GIB
from tests.conftest import sql_store
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
