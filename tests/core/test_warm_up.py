"""``min_observations`` above 1: the user's request is kept until a family has that many finished
tasks, in the decision and in the replay (fewer OOM kills for more memory)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.decide import Fitted, SizingSettings, decide_memory, decide_with, fresh_predictor
from airflow_adaptive.core.model import MemoryRequest
from airflow_adaptive.core.sizing.base import Sample
from airflow_adaptive.core.sizing.prior import PeakPrior
from airflow_adaptive.core.sizing.similar import Donor
from airflow_adaptive.core.units import GIB, MIB
from airflow_adaptive.evaluation.replay import ReplayConfig, replay
from airflow_adaptive.exceptions import InvalidSettingError
from airflow_adaptive.store.api import HistoryStore
from airflow_adaptive.traces.runs import TaskRun
from tests.core.test_core import obs
from tests.factories import attempt

USER = MemoryRequest(8 * GIB, 8 * GIB)


def ready_prior() -> PeakPrior:
    prior = PeakPrior()
    for _ in range(30):
        prior.add(1 * GIB)  # other families' tasks used 1 GiB
    return prior


def test_a_cold_family_starts_at_its_request_by_default_and_keeps_it_while_warming_up() -> None:
    prior = ready_prior()
    cold = decide_memory([], USER, SizingSettings(), prior=prior)
    assert (cold.memory_request_bytes, cold.adaptive) == (8 * GIB, False)
    assert "no history yet (the family's first tasks" in cold.explanation
    warming = decide_memory([], USER, SizingSettings(min_observations=3), prior=prior)
    assert (warming.memory_request_bytes, warming.adaptive) == (8 * GIB, False)
    assert "0 usable observation(s), fewer than 3" in warming.explanation
    two = decide_memory([obs(1 * GIB), obs(1 * GIB)], USER, SizingSettings(min_observations=3), prior=prior)
    assert (two.memory_request_bytes, two.adaptive) == (8 * GIB, False)
    three = decide_memory([obs(1 * GIB)] * 3, USER, SizingSettings(min_observations=3), prior=prior)
    assert three.adaptive and three.memory_request_bytes is not None and three.memory_request_bytes < 8 * GIB


def test_a_similar_familys_model_is_not_borrowed_while_warming_up() -> None:
    settings = SizingSettings(min_observations=3)
    donor_model = fresh_predictor(settings).fit([Sample(1 * GIB)] * 50)  # past the small-sample bound
    fitted = Fitted(donor_model, 0, 0, donor=Donor("dag_a.align", 1.0, 50))
    borrowed = decide_with(fitted, USER, SizingSettings()).memory_request_bytes
    assert borrowed == donor_model.predict(None, USER.request_bytes) < 8 * GIB
    kept = decide_with(fitted, USER, settings)
    assert (kept.memory_request_bytes, kept.adaptive) == (8 * GIB, False)


def test_the_advisor_keeps_the_request_until_the_family_has_enough_history(store: HistoryStore) -> None:
    # 100 tasks: past the small-sample bound of the default 1 % target
    store.record([attempt(n, family="rnaseq.fastqc", peak=2 * GIB) for n in range(100)])
    store.record([attempt(n, family="chipseq.fastqc", peak=1 * GIB, run=f"c{n}") for n in range(2)])
    settings = get_settings()
    warm_up = replace(settings, sizing=replace(settings.sizing, min_observations=3))
    default = Advisor(settings, lambda: store).memory.decide("atacseq.fastqc", USER)
    assert default.details["borrowed_from"] == "rnaseq.fastqc"  # by default a similar family's model
    for family in ("atacseq.fastqc", "chipseq.fastqc"):  # no history, and 2 finished tasks of 3
        kept = Advisor(warm_up, lambda: store).memory.decide(family, USER)
        assert (kept.memory_request_bytes, kept.adaptive) == (8 * GIB, False)
        assert "borrowed_from" not in kept.details and "fewer than 3" in kept.explanation
    sized = Advisor(warm_up, lambda: store).memory.decide("rnaseq.fastqc", USER)
    assert sized.adaptive and sized.memory_request_bytes == 2 * GIB


def growing(families: int = 3, tasks: int = 30, request_bytes: int | None = 16 * GIB) -> list[TaskRun]:
    """Families whose peaks grow from task to task: every new one outgrows the history before it."""
    return [
        TaskRun(f"f{f}", (200 + 40 * i) * MIB, 60.0, user_request_bytes=request_bytes)
        for i in range(tasks)
        for f in range(families)
    ]


def test_the_replay_keeps_the_request_for_a_familys_first_tasks_trading_memory_for_kills() -> None:
    runs = growing()
    # a budget of 1 has no small-sample bound, which would also keep these kills off
    default = replay(runs, "adaptive", ReplayConfig(history="sequential", max_oom_rate=1.0))
    warm_up = replay(
        runs, "adaptive", ReplayConfig(history="sequential", min_observations=10, max_oom_rate=1.0)
    )
    firsts = [alloc for _, alloc, _ in warm_up.first_allocations]
    # the 16 GiB request kept, at most the trace's largest node (2 GiB: a larger pod would run nowhere)
    assert firsts[: 3 * 10] == [2 * GIB] * 30 and all(a < 2 * GIB for a in firsts[30:])
    assert warm_up.retries < default.retries and warm_up.waste_byte_s > default.waste_byte_s
    unrequested = replay(growing(request_bytes=None), "adaptive", ReplayConfig(min_observations=2))
    assert unrequested.first_allocations[0][1] == 2 * GIB  # nothing asked: the whole node (the cap)
    anchors = [replay(runs, "pc95", ReplayConfig(min_observations=n)).first_allocations for n in (1, 10)]
    assert anchors[0] != anchors[1]  # a decision setting: every strategy waits, as in `decide`


def test_a_warm_up_below_one_task_is_refused(monkeypatch: Any) -> None:
    from airflow_adaptive.config import load_settings
    from airflow_adaptive.exceptions import InvalidConfigError

    with pytest.raises(InvalidSettingError, match="min_observations must be at least 1"):
        ReplayConfig(min_observations=0)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MIN_OBSERVATIONS", "0")
    with pytest.raises(
        InvalidConfigError, match=r"^\[adaptive\] min_observations = '0' is not an integer >= 1$"
    ):
        load_settings()
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MIN_OBSERVATIONS", "5")
    assert load_settings().sizing.min_observations == 5
