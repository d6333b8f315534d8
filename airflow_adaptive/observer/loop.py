"""The observer's loop: each cycle, while this replica leads, record every ended worker pod not
recorded yet, then release it (its finalizer removed, a ``recorded`` label added). While the store
is down nothing is released: the pods wait, held by their finalizers, and are recorded when it is
back (the attempt spooled meanwhile is written too: recording is an upsert by attempt, so nothing
is written twice, also after a restart)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client import models as k8s
from kubernetes.client.exceptions import ApiException

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.attempt import airflow_task_of, record_final_pod, recorded_mode
from airflow_adaptive.failopen import LoopFailures, failure_reason
from airflow_adaptive.kubernetes.names import MANAGED_LABEL, PREFIX, RECORD_FINALIZER
from airflow_adaptive.observer.lease import LeaderLease, observer_alive

log = logging.getLogger(__name__)
BASE_CONTAINER = "base"
RECORDED_LABEL = f"{PREFIX}/recorded"
# Worker pods the hook decided (the executor's ``airflow-worker`` label) not yet recorded.
SELECTOR = f"{MANAGED_LABEL}=policy,airflow-worker,!{RECORDED_LABEL}"


def keep_for_observer(pod: k8s.V1Pod, client: Callable[[], Any]) -> None:
    """Give a worker pod the record finalizer while an observer leads in its namespace."""
    namespace = (pod.metadata.namespace if pod.metadata else None) or "default"
    if observer_alive(client, namespace):
        pod.metadata.finalizers = [*(pod.metadata.finalizers or []), RECORD_FINALIZER]


def _ended(pod: k8s.V1Pod) -> bool:
    phase = pod.status.phase if pod.status else None
    return phase in ("Succeeded", "Failed")


class Observer:
    """Records ended worker pods of one namespace; one cycle per ``interval_seconds``."""

    def __init__(self, api_client: Any, lease: LeaderLease, advisor: Callable[[], Advisor]) -> None:
        self.core = CoreV1Api(api_client)
        self.lease = lease
        self.advisor = advisor
        self.stop = threading.Event()

    def cycle(self) -> int:
        """Record what has ended; the number of pods recorded (0 on a standby replica)."""
        if not self.lease.hold():
            return 0
        pods = self.core.list_namespaced_pod(self.lease.namespace, label_selector=SELECTOR).items
        advisor = self.advisor()  # one store session per cycle: a down store is waited for once
        done = 0
        for pod in pods:
            if _ended(pod) or pod.metadata.deletion_timestamp is not None:
                if not self._record(pod, advisor):
                    break  # the store is down: the rest wait for the next cycle
                done += 1
        return done

    def _record(self, pod: k8s.V1Pod, advisor: Advisor) -> bool:
        """Record and release the pod; False, and the pod kept, while the store is down."""
        found = airflow_task_of(pod)
        mode = recorded_mode(pod)
        if found is not None and mode is not None and mode.records:
            family, key, _ = found
            if _ended(pod):
                record_final_pod(advisor, pod, BASE_CONTAINER, key, family)
            else:  # deleted while it ran: its state says nothing about its memory
                advisor.recording.ended_unrecorded(key)
            if advisor.session.down:
                return False
        self._release(pod)
        return True

    def _release(self, pod: k8s.V1Pod) -> None:
        """Remove our finalizer (a JSON patch tests the list, so a concurrent edit is not lost)
        and label the pod recorded."""
        finalizers = list(pod.metadata.finalizers or [])
        patch: list[dict[str, Any]] = [
            {"op": "add", "path": f"/metadata/labels/{RECORDED_LABEL.replace('/', '~1')}", "value": "true"}
        ]
        if RECORD_FINALIZER in finalizers:
            patch = [
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {"op": "replace", "path": "/metadata/finalizers",
                 "value": [f for f in finalizers if f != RECORD_FINALIZER]},
                *patch,
            ]  # fmt: skip
        try:
            self.core.patch_namespaced_pod(pod.metadata.name, pod.metadata.namespace, patch)
        except ApiException as err:
            if err.status not in (404, 409, 422):  # gone, or changed: the next cycle sees it again
                raise

    def run(self, interval_seconds: float) -> None:
        """Cycle until stopped; an API or store error is logged once while it lasts, and the next
        cycle tries again."""
        failures = LoopFailures(log, "airflow-adaptive observer: a cycle")
        while not self.stop.is_set():
            try:
                recorded = self.cycle()
                failures.worked()
                if recorded:
                    log.info("airflow-adaptive observer: %d ended pods recorded", recorded)
            except Exception as err:
                failures.failed(failure_reason(err))
            self.stop.wait(interval_seconds)
