"""The pod trigger for deferrable mode that also samples memory for containers we cannot wrap."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.providers.cncf.kubernetes.triggers.pod import KubernetesPodTrigger
from airflow.triggers.base import TriggerEvent
from kubernetes_asyncio import client as async_client

from airflow_adaptive.kubernetes.metrics import container_memory_bytes

log = logging.getLogger(__name__)

SAMPLED_PEAK_KEY = "adaptive_sampled_peak_memory_bytes"


class SamplingPodTrigger(KubernetesPodTrigger):
    """KubernetesPodTrigger that polls metrics.k8s.io while waiting and adds the peak to its event
    (``sample_interval_seconds`` None: no sampling)."""

    def __init__(self, *args: Any, sample_interval_seconds: float | None = 10.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sample_interval_seconds = sample_interval_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        _, kwargs = super().serialize()
        kwargs["sample_interval_seconds"] = self.sample_interval_seconds
        return (f"{type(self).__module__}.{type(self).__name__}", kwargs)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        interval_s = self.sample_interval_seconds
        if interval_s is None:
            async for event in super().run():
                yield event
            return
        peak: list[int] = []  # at most one: the largest sample so far
        sampler = asyncio.create_task(self._sample(peak, interval_s))
        try:
            async for event in super().run():
                sampler.cancel()
                yield TriggerEvent({**event.payload, SAMPLED_PEAK_KEY: max(peak, default=None)})
        finally:
            sampler.cancel()

    async def _sample(self, peak: list[int], interval_s: float) -> None:
        async with self.hook.get_conn() as api_client:
            api = async_client.CustomObjectsApi(api_client)
            while True:
                try:
                    metrics = await api.get_namespaced_custom_object(
                        "metrics.k8s.io", "v1beta1", self.pod_namespace, "pods", self.pod_name
                    )
                except Exception as err:  # metrics-server absent or pod not yet scraped: no sample
                    log.debug("no metrics for pod %s: %s", self.pod_name, err)
                else:
                    used = container_memory_bytes(metrics, self.base_container_name)
                    if used is not None:
                        peak[:] = [max([used, *peak])]
                await asyncio.sleep(interval_s)
