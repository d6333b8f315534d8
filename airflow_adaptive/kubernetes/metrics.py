"""Peak memory from the metrics API (metrics.k8s.io) for containers we cannot wrap.

Samples miss short spikes, so the result is a lower bound of the true peak.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import Any

from kubernetes.client import ApiClient, CustomObjectsApi

from airflow_adaptive.exceptions import InvalidQuantityError
from airflow_adaptive.kubernetes.quantity import parse_memory_bytes

log = logging.getLogger(__name__)


def container_memory_bytes(pod_metrics: dict[str, Any], container: str) -> int | None:
    """One container's working-set memory from a PodMetrics object, or None."""
    for entry in pod_metrics.get("containers", []):
        if entry.get("name") == container:
            try:
                return parse_memory_bytes(entry.get("usage", {}).get("memory"))
            except InvalidQuantityError:
                return None
    return None


class PeakSampler:
    """Polls one container's memory usage in a background thread; keeps the maximum."""

    def __init__(
        self, api_client: ApiClient, namespace: str, pod_name: str, container: str, interval_seconds: float
    ) -> None:
        self._api = CustomObjectsApi(api_client)
        self._namespace = namespace
        self._pod_name = pod_name
        self._container = container
        self._interval_seconds = interval_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"adaptive-sampler-{pod_name}", daemon=True)
        self.peak_bytes: int | None = None
        self.samples = 0

    def sample(self) -> None:
        try:
            metrics = self._api.get_namespaced_custom_object(
                "metrics.k8s.io", "v1beta1", self._namespace, "pods", self._pod_name
            )
        except Exception as err:  # metrics-server absent or pod not yet scraped: just no sample
            log.debug("no metrics for pod %s: %s", self._pod_name, err)
            return
        used = container_memory_bytes(metrics, self._container)
        if used is not None:
            self.samples += 1
            self.peak_bytes = max(self.peak_bytes or 0, used)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval_seconds)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval_seconds + 5)
        self.sample()  # one last look before the pod is gone
