"""The operator's deferrable pod trigger: what it carries to the triggerer, and its note."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_adaptive.failopen import forget_warnings
from airflow_adaptive.operators.noting_trigger import NotingPodTrigger, note_running

NOTED = {
    "key": {"dag_id": "d", "task_id": "t", "run_id": "r", "map_index": -1, "try_number": 1},
    "family": "d.t",
}


def trigger(**kw: Any) -> NotingPodTrigger:
    return NotingPodTrigger(
        pod_name="p", pod_namespace="default", trigger_start_time=None, base_container_name="base", **kw
    )


def test_what_the_triggerer_rebuilds_it_from_keeps_the_note_and_the_sampling() -> None:
    path, kwargs = trigger(sample_interval_seconds=None, noted_attempt=NOTED).serialize()
    rebuilt = NotingPodTrigger(**kwargs)
    assert path == "airflow_adaptive.operators.noting_trigger.NotingPodTrigger"
    assert (rebuilt.sample_interval_seconds, rebuilt.noted_attempt) == (None, NOTED)


def test_a_note_that_cannot_be_written_is_logged_once_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    forget_warnings()
    note_running({"family": "d.t"})  # no key fields: a bug upstream, not the pod's problem
    note_running({"family": "d.t"})
    said = [
        r.getMessage() for r in caplog.records if "attempt not noted as running (KeyError)" in r.getMessage()
    ]
    assert len(said) == 1
