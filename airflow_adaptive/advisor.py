"""One attempt's advice: the store session it shares, its roles, and its pod's whole Decision.

Every edge (the operator, the pod-mutation hook, the weight strategy, the UI, the commands, the
replay) builds one :class:`Advisor` per attempt and goes through its roles; the pod's Decision
(memory, placement, priority) is assembled in :meth:`Advisor.pod_decision` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from airflow_adaptive.advice.input_advice import InputAdvice
from airflow_adaptive.advice.memory_advice import MemoryAdvice, keep_user
from airflow_adaptive.advice.placement_advice import PlacementAdvice
from airflow_adaptive.advice.recording_advice import RecordingAdvice
from airflow_adaptive.advice.session import Clock, StoreSession, utc_now
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.lff import PriorityChoice
from airflow_adaptive.core.model import Decision, MemoryRequest, Observation, TaskKey
from airflow_adaptive.core.placement import GroupLoad
from airflow_adaptive.store.access import open_store
from airflow_adaptive.store.api import HistoryStore

__all__ = ["Advisor", "PodAsk", "keep_user"]

# (the choice) -> (the PriorityClass to set, a note): the cluster's answer, from the edge that has a client
ClassOf = Callable[[PriorityChoice | None], tuple[str | None, str]]


@dataclass(frozen=True)
class PodAsk:
    """What a pod asks for and runs, as its edge read it."""

    task_family: str
    user: MemoryRequest
    key: TaskKey | None = None
    size_memory: bool = True  # False: the user's memory stands (the operator's ``adaptive=False``)
    previous_attempt: Observation | None = None
    input_size_bytes: int | None = None
    cpu_limit_millicores: int | None = None
    cpu_request_millicores: int | None = None  # the user's
    image: str | None = None
    program: str | None = None
    required_capabilities: frozenset[str] = frozenset()
    static_weight: int = 0
    group_loads: Mapping[int, GroupLoad] | None = None  # per node group, when live load is known


def required_note(capabilities: frozenset[str]) -> str:
    if not capabilities:
        return ""
    return f"; requires {', '.join(sorted(capabilities))} (required node affinity: Pending until a node offers it)"


class Advisor:
    """One attempt's (or one command's) advice, by role, over one store session."""

    def __init__(
        self,
        settings: AdaptiveSettings,
        store_factory: Callable[[], HistoryStore] | None = None,
        *,
        refit_stale: bool = True,
        clock: Clock = utc_now,
    ) -> None:
        self.settings = settings
        self.session = StoreSession(store_factory or (lambda: open_store(settings)), clock)
        self.memory = MemoryAdvice(settings, self.session, refit_stale=refit_stale)
        self.placement = PlacementAdvice(settings, self.session)
        self.inputs = InputAdvice(self.session)
        self.recording = RecordingAdvice(settings, self.session)

    def pod_decision(self, ask: PodAsk, class_of: ClassOf) -> Decision:
        """Memory, node groups and priority for one pod; never raises for store or cluster trouble."""
        if ask.size_memory:
            decision = self.memory.decide(
                ask.task_family,
                ask.user,
                ask.key,
                input_size_bytes=ask.input_size_bytes,
                previous_attempt=ask.previous_attempt,
                cpu_limit_millicores=ask.cpu_limit_millicores,
                image=ask.image,
                program=ask.program,
            )
        else:
            decision = keep_user(ask.user, "adaptive sizing is off for this task")
        # Without a request Kubernetes requests the limit.
        cpu_millicores = (
            decision.cpu_request_millicores or ask.cpu_request_millicores or ask.cpu_limit_millicores or 0
        )
        limit = ask.cpu_limit_millicores
        placement = self.placement.place(
            ask.task_family,
            ask.required_capabilities,
            decision.memory_request_bytes,
            ask.group_loads,
            ask.input_size_bytes,
            request_cores=cpu_millicores / 1000,
            limit_cores=limit / 1000 if limit else None,
        )
        choice = self.placement.priority(ask.task_family, ask.static_weight)
        priority_class, note = class_of(choice)
        return replace(
            decision,
            preferred_groups=placement.preferred_groups,
            required_capabilities=ask.required_capabilities,
            placement=placement.explain() + required_note(ask.required_capabilities),
            busy_cores=placement.busy_cores,
            priority_class=priority_class,
            priority=choice.explain() + note if choice else "",
        )
