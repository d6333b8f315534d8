"""Builders shared by the test modules: attempts, migrations' config, simulator nodes and tasks."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from alembic.config import Config

from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.core.units import GIB
from airflow_adaptive.simulation.cluster import REFERENCE_BENCHMARKS, SimNode
from airflow_adaptive.simulation.params import SimParams
from airflow_adaptive.simulation.workload import SimTask
from airflow_adaptive.store.api import HistoryStore
from airflow_adaptive.store.db_manager import AdaptiveDBManager

REF_CPU = REFERENCE_BENCHMARKS["cpu_events_per_s"]
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def attempt(
    n: int, *, family: str = "f", peak: int = 100, try_number: int = 1, run: str | None = None
) -> Observation:
    return Observation(
        key=TaskKey("dag", "task", run or f"run{n}", -1, try_number),
        task_family=family,
        usage=Usage(peak_memory_bytes=peak, wall_seconds=1.0, peak_kind=PeakKind.MEASURED),
        exit_reason=ExitReason.COMPLETED,
        exit_code=0,
        memory_limit_bytes=1000,
        finished_at=T0 + timedelta(minutes=n),
    )


def alembic_config(url: str) -> Config:
    config = Config(AdaptiveDBManager.alembic_file)
    config.set_main_option("script_location", AdaptiveDBManager.migration_dir)
    config.set_main_option("sqlalchemy.url", url)
    return config


# Exact: no start-up time, no interference, no CPU sharing, nodes in the given order, live load fresh.
PLAIN = SimParams(
    pod_startup_s=0.0, interference_per_task=0.0, cpu_sharing=False, shuffle_nodes=False, live_load_ttl_s=0.0
)


def node(name: str, speed: float = 1.0, cores: float = 2, memory_gib: int = 4, **kw: object) -> SimNode:
    return SimNode(name, cores, memory_gib * GIB, {"cpu_events_per_s": REF_CPU * speed}, **kw)  # type: ignore[arg-type]


def task(
    tid: str, runtime_s: float, *parents: str, peak_gib: float = 1.0, request_gib: float = 2.0, **kw: object
) -> SimTask:
    defaults: dict[str, object] = {"request_cores": 2.0, "cpu_cores_used": 1.0}
    defaults.update(kw)
    family = str(defaults.pop("family", tid))
    return SimTask(
        tid,
        family,
        runtime_s,
        int(peak_gib * GIB),
        int(request_gib * GIB),
        parents=parents,
        **defaults,  # type: ignore[arg-type]
    )


def split_scores(store: HistoryStore) -> tuple[dict[str, object], LogHistogram]:
    """The store-wide distributions without the bound scores, and the scores the families' models
    hold, summed (what the store-wide scores must equal: they move with the models, and a rebuild
    that refits the models from scratch may score other peaks than the live, incremental fits)."""
    distributions = store.distributions()
    summed, steady = LogHistogram(), LogHistogram()
    for rollup in store.families(limit=10_000):
        state = store.family(rollup.task_family)
        model = state.model if state is not None else None
        for scores, histogram in (
            ((model.bound_scores, summed), (model.steady_scores, steady)) if model else ()
        ):
            for score in scores:
                histogram.add(score)
    assert distributions.scores == summed and distributions.steady_scores == steady
    return {k: v for k, v in distributions.to_json().items() if k not in ("scores", "steady_scores")}, summed
