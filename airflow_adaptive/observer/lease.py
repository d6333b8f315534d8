"""Leader election through a coordination.k8s.io Lease, and the hook's view of whether an
observer is alive (so that no pod waits on a finalizer nobody removes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kubernetes.client import ApiClient, CoordinationV1Api
from kubernetes.client import models as k8s
from kubernetes.client.exceptions import ApiException

from airflow_adaptive.advice.session import Clock, utc_now

LEASE_NAME = "airflow-adaptive-observer"
LEASE_SECONDS = 30  # a leader that has not renewed for this long has gone
ALIVE_CACHE_S = 10.0  # the hook asks the API server at most this often per namespace


def _expired(spec: k8s.V1LeaseSpec, now: datetime) -> bool:
    if spec.renew_time is None or not spec.holder_identity:
        return True
    return spec.renew_time + timedelta(seconds=spec.lease_duration_seconds or LEASE_SECONDS) < now


@dataclass
class LeaderLease:
    """This replica's claim on the Lease: ``hold()`` acquires or renews it, True while it leads.
    Optimistic concurrency (the Lease's resourceVersion) makes two replicas never both lead."""

    api_client: ApiClient
    namespace: str
    identity: str
    lease_seconds: int = LEASE_SECONDS
    clock: Clock = field(default=utc_now)

    def hold(self) -> bool:
        api = CoordinationV1Api(self.api_client)
        now = self.clock()
        try:
            lease = api.read_namespaced_lease(LEASE_NAME, self.namespace)
        except ApiException as err:
            if err.status != 404:
                raise
            return self._create(api, now)
        spec = lease.spec or k8s.V1LeaseSpec()
        if spec.holder_identity != self.identity:
            if not _expired(spec, now):
                return False
            spec.holder_identity = self.identity
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.renew_time = now
        spec.lease_duration_seconds = self.lease_seconds
        lease.spec = spec
        try:
            api.replace_namespaced_lease(LEASE_NAME, self.namespace, lease)
        except ApiException as err:
            if err.status == 409:  # another replica wrote it first
                return False
            raise
        return True

    def _create(self, api: CoordinationV1Api, now: datetime) -> bool:
        body = k8s.V1Lease(
            metadata=k8s.V1ObjectMeta(name=LEASE_NAME, namespace=self.namespace),
            spec=k8s.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=self.lease_seconds,
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            api.create_namespaced_lease(self.namespace, body)
        except ApiException as err:
            if err.status == 409:
                return False
            raise
        return True


_alive: dict[str, tuple[float, bool]] = {}
_alive_lock = threading.Lock()


def observer_alive(client: Callable[[], Any], namespace: str, clock: Clock = utc_now) -> bool:
    """Whether an observer leads in the namespace now (cached briefly); False when it cannot be told."""
    with _alive_lock:
        cached = _alive.get(namespace)
    if cached is not None and time.monotonic() - cached[0] < ALIVE_CACHE_S:
        return cached[1]
    try:
        lease = CoordinationV1Api(client()).read_namespaced_lease(LEASE_NAME, namespace)
        alive = lease.spec is not None and not _expired(lease.spec, clock())
    except Exception as err:  # no Lease, no API server, no permission: nobody to wait for
        alive = False
        if getattr(err, "status", None) != 404:  # no Lease is no observer; anything else is said once
            from airflow_adaptive.failopen import failure_reason, warn_once

            reason = failure_reason(err)
            if getattr(err, "status", None) == 403:
                reason += "; the scheduler needs get on it, deploy/observer.yaml, if an observer runs"
            warn_once(
                f"cannot read the observer's Lease {LEASE_NAME!r} in {namespace!r} ({reason})",
                "worker pods get no finalizer, and one OOM-killed may go unrecorded",
            )
    with _alive_lock:
        _alive[namespace] = (time.monotonic(), alive)
    return alive


def forget() -> None:
    """Ask the API server again on the next pod (tests)."""
    with _alive_lock:
        _alive.clear()
