"""The node agent that grows running pods' memory in place (``airflow-adaptive grow-agent``).

One per node (a DaemonSet, ``deploy/grow-agent.yaml``). Why a node agent: the rule needs usage
every couple of seconds with a resize latency of a few seconds (``replay --time-series``); the
metrics API refreshes every 15 to 60 s, too slow for tasks that rise in seconds, and a sidecar per
pod would cost every pod memory. The agent reads the containers' own cgroup files (v2
``memory.current``/``memory.max``, v1 ``memory.usage_in_bytes``/``memory.limit_in_bytes``) of the
pods on its node that carry the grow label, runs ``core/growth.py``'s rule, and PATCHes
``pods/resize``; the kubelet then sets the new limit in the cgroup.

It fails open: a pod whose resize is pending (Deferred, Infeasible) is left alone and, if it
outgrows its limit, is OOM-killed and retried as without growth; an RBAC refusal or a cluster
without ``pods/resize`` turns the agent off with one log line; a lowered limit the cluster does
not apply (a memory-limit decrease is refused before Kubernetes 1.34) turns lowering off, with
one log line, and growth goes on; an unreadable cgroup skips that container once, logged. It
never creates, deletes or restarts a pod.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client import models as k8s
from kubernetes.client.exceptions import ApiException

from airflow_adaptive.agent.cgroup import CgroupUnavailable, MemoryCgroup, pod_cgroups
from airflow_adaptive.agent.watch import GrowthWatch
from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.kubernetes.names import GROW_LABEL, HEADROOM_ANNOTATION
from airflow_adaptive.kubernetes.quantity import parse_memory_bytes
from airflow_adaptive.kubernetes.resize import (
    Resized,
    growth_note,
    note_growth,
    plan_from_text,
    resize_memory,
)

log = logging.getLogger(__name__)
UNLIMITED_ROOM_BYTES = 1 << 62


def _container_id(status: Any) -> str:
    return (status.container_id or "").rsplit("://", 1)[-1]


class GrowthAgent:
    """Grows the labelled pods of one node; :meth:`cycle` once per sample interval."""

    def __init__(
        self, api_client: Any, node_name: str, cgroup_root: Path, rule: GrowthRule,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.core = CoreV1Api(api_client)
        self.node_name = node_name
        self.cgroup_root = cgroup_root
        self.rule = rule
        self.clock = clock
        self.off_reason: str | None = None
        self.stop = threading.Event()
        self._watches: dict[tuple[str, str], GrowthWatch] = {}
        self._started: dict[str, float] = {}  # pod uid -> when first seen
        self._notes: dict[str, list[str]] = {}
        self._left_alone: set[str] = set()  # pods with a pending resize, or unreadable cgroups
        self._room: int | None = None

    def room_bytes(self) -> int:
        """The node's allocatable memory: no growth goes above it (the kubelet defers what the node
        cannot fit now)."""
        if self._room is None:
            try:
                node = self.core.read_node(self.node_name)
                self._room = parse_memory_bytes((node.status.allocatable or {}).get("memory"))
            except Exception as err:  # unreadable: the kubelet still defers what does not fit
                log.warning("grow-agent: node %s unreadable (%s); no room bound", self.node_name, err)
                self._room = UNLIMITED_ROOM_BYTES
        return self._room

    def pods(self) -> list[k8s.V1Pod]:
        return self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self.node_name},status.phase=Running",
            label_selector=f"{GROW_LABEL}=true",
        ).items

    def cycle(self) -> int:
        """One look at every labelled running pod of the node; the resizes asked."""
        if self.off_reason is not None:
            return 0
        asked = 0
        running = set()
        for pod in self.pods():
            uid = pod.metadata.uid
            running.add(uid)
            if uid in self._left_alone:
                continue
            self._started.setdefault(uid, self.clock())
            for status in (pod.status.container_statuses if pod.status else None) or []:
                if status.state and status.state.running and self.off_reason is None:
                    asked += self._guarded(pod, status)
        self._forget(running)
        return asked

    def _guarded(self, pod: k8s.V1Pod, status: Any) -> int:
        """One container; a pod this cannot handle is left alone, with one log line, not the node."""
        try:
            return self._container(pod, status)
        except (ValueError, ArithmeticError) as err:
            log.warning("grow-agent: %s/%s left alone: %s", pod.metadata.namespace, pod.metadata.name, err)
            self._left_alone.add(pod.metadata.uid)
            return 0

    def _container(self, pod: k8s.V1Pod, status: Any) -> int:
        uid = pod.metadata.uid
        paths = [p for p in pod_cgroups(self.cgroup_root, uid) if _container_id(status) in p.name]
        try:
            if len(paths) != 1:
                raise CgroupUnavailable(f"no single cgroup for container {status.name} of pod {uid}")
            cgroup = MemoryCgroup(paths[0])
            usage, limit = cgroup.working_set_bytes(), cgroup.limit_bytes()  # page cache can be dropped
        except CgroupUnavailable as err:
            log.warning("grow-agent: %s/%s left alone: %s", pod.metadata.namespace, pod.metadata.name, err)
            self._left_alone.add(uid)
            return 0
        watch = self._watches.get((uid, status.name))
        if watch is None:
            plan = plan_from_text((pod.metadata.annotations or {}).get(HEADROOM_ANNOTATION))
            watch = self._watches[(uid, status.name)] = GrowthWatch(self.rule, self.room_bytes(), plan)
        wanted = watch.observe(self.clock(), usage, limit)
        if wanted is None or limit is None:
            return 0
        answer = resize_memory(self.core, pod, status.name, wanted)
        at_s = self.clock() - self._started[uid]
        if wanted < limit and answer.outcome is Resized.PENDING:
            self._stop_lowering(answer.reason)
            return 0
        if answer.outcome in (Resized.REFUSED, Resized.UNSUPPORTED):
            self.off_reason = answer.reason
            log.warning("grow-agent: growth off: %s; pods keep their limits and OOM retries", answer.reason)
            return 0
        if answer.outcome is not Resized.GONE:
            self._notes.setdefault(uid, []).append(growth_note(limit, wanted, usage, at_s, answer))
            note_growth(self.core, pod, self._notes[uid])
        if answer.outcome is Resized.PENDING:
            log.info("grow-agent: %s/%s resize pending (%s): left to the OOM retry",
                     pod.metadata.namespace, pod.metadata.name, answer.reason)  # fmt: skip
            self._left_alone.add(uid)
        return 1

    def _stop_lowering(self, reason: str | None) -> None:
        """A decrease not applied: lower no limit again (growth goes on), said once."""
        log.warning("grow-agent: lowering limits off (%s); grown limits stay until the pod ends", reason)
        self.rule = replace(self.rule, kept_headrooms=0.0)
        for watch in self._watches.values():
            watch.rule = self.rule

    def _forget(self, running: set[str]) -> None:
        """Drop the state of pods that no longer run here."""
        for key in [k for k in self._watches if k[0] not in running]:
            del self._watches[key]
        for table in (self._started, self._notes):
            for uid in [u for u in table if u not in running]:
                del table[uid]
        self._left_alone &= running

    def run(self) -> None:
        """Cycle every sample interval until stopped or off; an API error is logged and retried."""
        while not self.stop.is_set() and self.off_reason is None:
            try:
                self.cycle()
            except ApiException as err:
                log.warning("grow-agent: cycle failed (%s %s)", err.status, err.reason)
            self.stop.wait(self.rule.sample_s)
