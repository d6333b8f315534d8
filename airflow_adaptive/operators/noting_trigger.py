"""The operator's deferrable pod trigger: it notes the attempt as started again once its pod runs
in the triggerer, as ``await_pod_start`` does for a pod awaited on the worker (time Pending is not
time running)."""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.model import TaskKey
from airflow_adaptive.failopen import warn_once
from airflow_adaptive.kubernetes.sampling_trigger import SamplingPodTrigger


class NotingPodTrigger(SamplingPodTrigger):
    """``noted_attempt``: the attempt's ``key`` (its fields) and ``family``."""

    def __init__(self, *args: Any, noted_attempt: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.noted_attempt = noted_attempt

    def serialize(self) -> tuple[str, dict[str, Any]]:
        path, kwargs = super().serialize()
        return path, {**kwargs, "noted_attempt": self.noted_attempt}

    async def _wait_for_pod_start(self) -> Any:
        state = await super()._wait_for_pod_start()
        if self.noted_attempt is not None:  # the store is synchronous: off the triggerer's event loop
            await asyncio.to_thread(note_running, self.noted_attempt)
        return state


def note_running(noted_attempt: dict[str, Any]) -> None:
    """Note the attempt as started now; never raises (the pod runs whatever happens here)."""
    try:
        Advisor(get_settings()).recording.started(
            str(noted_attempt["family"]), TaskKey(**noted_attempt["key"])
        )
    except Exception as err:  # a bad setting or a bug: the note keeps its creation time
        warn_once(f"attempt not noted as running ({type(err).__name__})", "it counts from its pod's creation")
