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
without ``pods/resize`` turns the agent off with one log line; a cluster that refuses a
memory-limit decrease (before Kubernetes 1.34) turns lowering off, with one log line, and growth
goes on; a decrease the kubelet skips (it compares it with memory.current, page cache included)
is taken back and that container is not lowered again; an unreadable cgroup, or a container a
memory resize would restart, is left alone, logged once. It never creates, deletes or restarts a
pod.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client import models as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from airflow_adaptive.agent.cgroup import CgroupUnavailable, MemoryCgroup, pod_cgroups
from airflow_adaptive.agent.watch import GrowthWatch
from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.core.units import MIB
from airflow_adaptive.failopen import LoopFailures, failure_reason
from airflow_adaptive.kubernetes.names import GROW_CONTAINER_ANNOTATION, GROW_LABEL, HEADROOM_ANNOTATION
from airflow_adaptive.kubernetes.quantity import parse_memory_bytes
from airflow_adaptive.kubernetes.resize import (
    Resized,
    growth_note,
    memory_restart_policy,
    note_growth,
    plan_from_text,
    resize_memory,
)

log = logging.getLogger(__name__)
UNLIMITED_ROOM_BYTES = 1 << 62
DECREASE_REFUSED = "cannot be decreased"  # what a 1.33 API server says of any memory-limit decrease


def _container_id(status: Any) -> str:
    return (status.container_id or "").rsplit("://", 1)[-1]


def _task_containers(pod: k8s.V1Pod) -> set[str]:
    """The containers the agent may resize: the task's, as ``allow_growth`` named it (a sidecar keeps
    its own memory); on a pod from before that annotation (or one naming no container of the pod),
    those whose memory resize needs no restart, as ``allow_growth`` set the task's."""
    named = (pod.metadata.annotations or {}).get(GROW_CONTAINER_ANNOTATION)
    if named and any(c.name == named for c in pod.spec.containers):
        return {named}
    return {c.name for c in pod.spec.containers if memory_restart_policy(c) == "NotRequired"}


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
        self._room_unread = False  # said once
        self._since = datetime.now(timezone.utc)  # what started before it, it saw only in part

    def room_bytes(self) -> int:
        """The node's allocatable memory: no growth goes above it (the kubelet defers what the node
        cannot fit now)."""
        if self._room is None:
            try:
                node = self.core.read_node(self.node_name)
                allocatable = parse_memory_bytes((node.status.allocatable or {}).get("memory"))
            except Exception as err:  # unreadable: the kubelet still defers what does not fit
                if not self._room_unread:
                    log.warning("grow-agent: node %s unreadable (%s); no room bound", self.node_name, err)
                self._room_unread = True
                return UNLIMITED_ROOM_BYTES  # read again for the next container
            # whole MiB, as an ask is written (rounded up): never an ask above allocatable
            self._room = allocatable - allocatable % MIB if allocatable else UNLIMITED_ROOM_BYTES
            for watch in self._watches.values():  # those made while the node was unread
                watch.room_bytes = min(watch.room_bytes, self._room)
        return self._room

    def pods(self) -> list[k8s.V1Pod]:
        return self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self.node_name},status.phase=Running",
            label_selector=f"{GROW_LABEL}=true",
        ).items

    def cycle(self) -> int:
        """One look at every labelled running pod of the node; the resizes asked. The API's or the
        network's trouble with one pod (a 5xx) does not keep the others waiting: the cycle goes on,
        and then raises the first, for the loop to say once."""
        if self.off_reason is not None:
            return 0
        asked = 0
        running = set()
        trouble: Exception | None = None
        for pod in self.pods():
            uid = pod.metadata.uid
            running.add(uid)
            if uid in self._left_alone:
                continue
            self._started.setdefault(uid, self.clock())
            task = _task_containers(pod)
            for status in (pod.status.container_statuses if pod.status else None) or []:
                if status.name in task and status.state and status.state.running and self.off_reason is None:
                    try:
                        asked += self._guarded(pod, status)
                    except (ApiException, HTTPError, OSError) as err:
                        trouble = trouble or err
        self._forget(running)
        if trouble is not None:
            raise trouble
        return asked

    def _guarded(self, pod: k8s.V1Pod, status: Any) -> int:
        """One container; a pod this cannot handle is left alone, with one log line, not the node."""
        try:
            return self._container(pod, status)
        except (ApiException, HTTPError, OSError):
            raise  # the API's or the network's trouble, not this pod's: the cycle says it
        except Exception as err:  # this pod's: the others still grow (a bug shows its traceback once)
            odd = isinstance(err, (ValueError, ArithmeticError))
            log.warning("grow-agent: %s/%s left alone: %s", pod.metadata.namespace, pod.metadata.name, err,
                        exc_info=not odd)  # fmt: skip
            self._left_alone.add(pod.metadata.uid)
            return 0

    def _container(self, pod: k8s.V1Pod, status: Any) -> int:
        read = self._read(pod, status)
        watch = self._watch(pod, status) if read is not None else None
        if read is None or watch is None:
            return 0
        usage, charged, limit = read
        wanted = watch.observe(self.clock(), usage, limit, charged)
        if wanted is None or limit is None:
            return 0
        answer = resize_memory(self.core, pod, status.name, wanted)
        at_s = self.clock() - self._started[pod.metadata.uid]
        if wanted <= limit:
            note = growth_note(limit, wanted, usage, at_s, answer) if wanted < limit else None
            return self._lowering_answered(pod, watch, note, answer)
        if answer.outcome in (Resized.REFUSED, Resized.UNSUPPORTED):
            self.off_reason = answer.reason
            log.warning("grow-agent: growth off: %s; pods keep their limits and OOM retries", answer.reason)
            return 0
        if answer.outcome is not Resized.GONE:
            self._note(pod, growth_note(limit, wanted, usage, at_s, answer))
        if answer.outcome is Resized.PENDING:  # a refusal (quota, admission policy) is the operator's to see
            said = "refused by the API server" if answer.refused else "pending"
            (log.warning if answer.refused else log.info)(
                "grow-agent: %s/%s resize %s (%s): left to the OOM retry",
                pod.metadata.namespace, pod.metadata.name, said, answer.reason,
            )  # fmt: skip
            self._left_alone.add(pod.metadata.uid)
        return 1

    def _read(self, pod: k8s.V1Pod, status: Any) -> tuple[int, int, int | None] | None:
        """The container's working set, memory.current and limit; None (left alone, logged once)
        when its cgroup cannot be read."""
        uid = pod.metadata.uid
        paths = [p for p in pod_cgroups(self.cgroup_root, uid) if _container_id(status) in p.name]
        try:
            if len(paths) != 1:
                raise CgroupUnavailable(f"no single cgroup for container {status.name} of pod {uid}")
            cgroup = MemoryCgroup(paths[0])
            # growth follows the working set (page cache can be dropped); the kubelet compares a
            # decrease with memory.current
            usage, working_set = cgroup.usage_and_working_set_bytes()
            return working_set, usage, cgroup.limit_bytes()
        except CgroupUnavailable as err:
            log.warning("grow-agent: %s/%s left alone: %s", pod.metadata.namespace, pod.metadata.name, err)
            self._left_alone.add(uid)
            return None

    def _watch(self, pod: k8s.V1Pod, status: Any) -> GrowthWatch | None:
        """The container's watch; None (left alone, logged once) when a memory resize would restart
        it (its own resizePolicy says RestartContainer): a restart loses the task's work. A container
        that started more than a window before this agent did (the agent restarted, or came late) is
        never lowered: its level is the most used since then, and a try that fell would be lowered
        below its rebound."""
        name = status.name
        key = (pod.metadata.uid, name)
        if key not in self._watches:
            spec = next((c for c in pod.spec.containers if c.name == name), None)
            if memory_restart_policy(spec) == "RestartContainer":
                log.warning("grow-agent: %s/%s left alone: a memory resize restarts its container %s",
                            pod.metadata.namespace, pod.metadata.name, name)  # fmt: skip
                self._left_alone.add(pod.metadata.uid)
                return None
            plan = plan_from_text((pod.metadata.annotations or {}).get(HEADROOM_ANNOTATION))
            self._watches[key] = GrowthWatch(self.rule, self.room_bytes(), plan)
            started = status.state.running.started_at  # cycle() watches running containers only
            # startedAt is in whole seconds: up to one early
            if started is not None and (self._since - started).total_seconds() > self.rule.window_s + 1.0:
                self._watches[key].not_lowered()
        return self._watches[key]

    def _lowering_answered(self, pod: k8s.V1Pod, watch: GrowthWatch, note: str | None, answer: Any) -> int:
        """A decrease, or the take-back of one the kubelet skipped, answered. Never turns growth
        off: a 1.33 refusal turns lowering off for the agent, any other answer that did not apply it
        (the pod ended, an admission limit) for this container."""
        if answer.outcome is Resized.APPLIED:
            if note is not None:  # a take-back changes nothing to say
                self._note(pod, note)
            return 1
        if answer.outcome is not Resized.GONE:
            if DECREASE_REFUSED in (answer.reason or ""):
                self._stop_lowering(answer.reason or DECREASE_REFUSED)
            watch.not_lowered()
        return 0

    def _note(self, pod: k8s.V1Pod, text: str) -> None:
        self._notes.setdefault(pod.metadata.uid, []).append(text)
        note_growth(self.core, pod, self._notes[pod.metadata.uid])

    def _stop_lowering(self, reason: str) -> None:
        """Kubernetes before 1.34 refuses any decrease: lower no limit again (growth goes on), said
        once."""
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
        """Cycle every sample interval until stopped. A failed cycle (the API unreachable, a refusal)
        is logged once per reason and tried again; once growth is off the agent idles until stopped,
        as a DaemonSet would only restart an agent that exits, to be turned off again."""
        failures = LoopFailures(log, "grow-agent: a cycle")
        while not self.stop.is_set():
            try:
                self.cycle()
                failures.worked()
            except Exception as err:
                failures.failed(failure_reason(err))
            self.stop.wait(self.rule.sample_s)
