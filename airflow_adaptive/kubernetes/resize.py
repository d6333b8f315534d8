"""Growing a running container's memory in place: a PATCH of the ``pods/resize`` subresource
(Kubernetes 1.33+, ``InPlacePodVerticalScaling``), and what the cluster answered.

The request grows with the limit, so the scheduler's books stay true and the kubelet defers a
resize the node cannot fit (``PodResizePending``, reason ``Deferred`` or ``Infeasible``) instead
of overcommitting; such a pod keeps its limit and, if it outgrows it, ends in today's OOM-retry
path. A refusal (RBAC 403) or a cluster without the subresource (404, 405: older than 1.33) turns
growth off for the agent, with one log line; the pods run as they would without it.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client import models as k8s
from kubernetes.client.exceptions import ApiException

from airflow_adaptive.core.growth_plan import LATENCY_BOUND_S, PROFILE_STEPS, GrowthPlan
from airflow_adaptive.core.telemetry import MAX_COUNT
from airflow_adaptive.core.units import MIB, format_bytes
from airflow_adaptive.kubernetes.names import (
    DECISION_ANNOTATION,
    GROW_CONTAINER_ANNOTATION,
    GROW_LABEL,
    GROWN_ANNOTATION,
    HEADROOM_ANNOTATION,
)
from airflow_adaptive.kubernetes.quantity import format_memory

NOT_REQUIRED = k8s.V1ContainerResizePolicy(resource_name="memory", restart_policy="NotRequired")


class Resized(enum.Enum):
    APPLIED = "applied"  # accepted; the kubelet applies it (PodResizeInProgress until done)
    PENDING = "pending"  # PodResizePending: Deferred (no room now) or Infeasible (never on this node)
    REFUSED = "refused"  # 403: RBAC does not let us patch pods/resize
    UNSUPPORTED = "unsupported"  # no pods/resize subresource: a cluster older than 1.33
    GONE = "gone"  # the pod ended or went away meanwhile


@dataclass(frozen=True)
class ResizeAnswer:
    outcome: Resized
    reason: str = ""
    refused: bool = False  # PENDING because the API server refused this pod's resize (admission)


def memory_restart_policy(container: k8s.V1Container | None) -> str | None:
    """The container's own resizePolicy for memory (NotRequired, RestartContainer), or None."""
    policies = (container.resize_policy if container is not None else None) or []
    return next((p.restart_policy for p in policies if p.resource_name == "memory"), None)


def allow_growth(pod: k8s.V1Pod, container_name: str, plan: GrowthPlan | None) -> None:
    """Mark a pod for the agent: the label it selects by and a memory resize policy that needs no
    restart (kept when the user set one); with a learnt ``plan``, start the container there
    (request and limit) and tell the agent the headroom."""
    container = next((c for c in pod.spec.containers if c.name == container_name), None)
    if container is None:
        return
    pod.metadata.labels = {**(pod.metadata.labels or {}), GROW_LABEL: "true"}
    # the agent resizes this container only: a sidecar (a mesh proxy, a log shipper) keeps its own
    pod.metadata.annotations = {**(pod.metadata.annotations or {}), GROW_CONTAINER_ANNOTATION: container_name}
    if memory_restart_policy(container) is None:
        container.resize_policy = [*(container.resize_policy or []), NOT_REQUIRED]
    if plan is None:
        return
    if not plan.rescue_above_bytes:  # else the pod keeps the decision; the agent learns where rescue starts
        start = format_memory(_start_bytes(plan))
        resources = container.resources or k8s.V1ResourceRequirements()
        container.resources = k8s.V1ResourceRequirements(
            requests={**(resources.requests or {}), "memory": start},
            limits={**(resources.limits or {}), "memory": start},
            claims=resources.claims,
        )
    _annotate(pod, plan, f"; {plan_note(plan)}")


def _start_bytes(plan: GrowthPlan) -> int:
    """Where a pod with a plan that is not held starts: its start, at least 1 MiB."""
    return max(plan.start_bytes, MIB)


def plan_note(plan: GrowthPlan) -> str:
    """What the plan does to a pod's memory, for its decision annotation and ``decide``."""
    if plan.rescue_above_bytes:
        lowered = "" if plan.rescue_only else (
            "; once usage stops rising, lowered towards it and grown from there back to the decision, "
            f"{_kept(plan)} (learnt from the family's memory profiles)"
        )  # fmt: skip
        return (f"at the decision, grown in place only as a rescue, once usage passes "
                f"{format_bytes(plan.rescue_above_bytes)} (its family's peaks at the kill budget){lowered}")  # fmt: skip
    start = _start_bytes(plan)
    if plan.young:
        return (
            f"starts at {format_bytes(start)}, is kept {_headrooms(plan, start)} above usage up to "
            f"{format_bytes(plan.decision_bytes)}, also once usage stops rising (learnt from the family's "
            "first memory profiles)"
        )
    fall = (
        ""
        if plan.rebound_bytes is None
        else f", {format_bytes(plan.rebound_bytes)} above its least once it falls below half its most"
    )
    return (
        f"starts at {format_bytes(start)} and grows in place, {_headrooms(plan, start)} above usage{fall} "
        "(learnt from the family's memory profiles)"
    )


def _kept(plan: GrowthPlan) -> str:
    """A held plan's most kept above usage; where no task rose, the step a flat try may creep."""
    creep = f"{100 / PROFILE_STEPS:g} % above usage"  # a profile's step of the level
    return f"up to {format_bytes(plan.headroom_bytes)} above usage" if plan.headroom_bytes else creep


def _headrooms(plan: GrowthPlan, start_bytes: int) -> str:
    """The headroom it keeps, from its start's level to the largest."""
    least, most = format_bytes(plan.headroom_at(start_bytes)), format_bytes(plan.headroom_bytes)
    return most if least == most else f"{least} to {most}"


def _annotate(pod: k8s.V1Pod, plan: GrowthPlan, note: str) -> None:
    """The plan for the agent, and what it means for the pod's decision annotation."""
    annotations = dict(pod.metadata.annotations or {})
    annotations[HEADROOM_ANNOTATION] = plan_text(plan)
    annotations[DECISION_ANNOTATION] = (annotations.get(DECISION_ANNOTATION, "") + note)[-1000:]
    pod.metadata.annotations = annotations


def plan_text(plan: GrowthPlan) -> str:
    """What the agent needs of a plan, for the pod's annotation: the start, the decision its levels
    are steps of, the headroom by level (any try's and a flat one's), the first window, and the
    rebound and the least a lowering keeps when known."""
    # a held plan's headrooms under keys of their own: an agent older than it reads a plan held at
    # the decision and never lowered (rises [] and rescue_above), not a young one (start = decision)
    held = "held_" if plan.rescue_above_bytes else ""
    fields: dict[str, Any] = {
        "start": plan.start_bytes,
        "decision": plan.decision_bytes,
        "rises": [] if held else list(plan.rises_bytes),
        "window_s": plan.window_s,
    }
    if held and plan.rises_bytes:
        fields["held_rises"] = list(plan.rises_bytes)
    if plan.young:
        fields["young"] = True
    if plan.flat_rises_bytes:
        fields[f"{held}flat"] = list(plan.flat_rises_bytes)
    if plan.rebound_bytes is not None:
        fields["rebound"] = plan.rebound_bytes
    if plan.rescue_above_bytes:
        fields["rescue_above"] = plan.rescue_above_bytes
    if plan.floor_bytes:
        fields["floor"] = plan.floor_bytes
    return json.dumps(fields, separators=(",", ":"))


MAX_PLAN_LEVELS = 1000
HELD_KEYS = frozenset(("held_rises", "held_flat"))


def _plan_bytes(value: Any) -> int:
    # bool, float, str: not ours; past MAX_COUNT: beyond any node, so not a plan
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"not a byte count: {value!r}")
    return value


def plan_from_text(text: str | None) -> GrowthPlan | None:
    """The plan an annotation holds; None when absent or unreadable (the agent then only rescues)."""
    try:
        raw = json.loads(text or "")
        rescue_above = _plan_bytes(raw.get("rescue_above", 0))
        held = "held_" if rescue_above else ""  # a held plan's headrooms, if any, are under their own keys
        if (held and (raw["rises"] != [] or "flat" in raw)) or (not held and raw.keys() & HELD_KEYS):
            return None
        rises, flat = raw.get(f"{held}rises", []), raw.get(f"{held}flat", [])
        if not isinstance(rises, list) or len(rises) > MAX_PLAN_LEVELS or not (rises or rescue_above):
            return None  # a plan has a headroom by level, a level to rescue above (a held plan), or both
        if not isinstance(flat, list) or len(flat) not in (0, len(rises)):
            return None
        window_s = raw.get("window_s", 0.0)
        if type(window_s) not in (int, float) or not 0.0 <= window_s < LATENCY_BOUND_S:
            return None
        start, decision = _plan_bytes(raw.get("start", 0)), _plan_bytes(raw["decision"])
        # a young plan written before the flag started at the decision; a held plan is not young
        young = raw.get("young", start >= decision and bool(rises) and not rescue_above)
        if type(young) is not bool or (young and rescue_above):
            return None
        plan = GrowthPlan(
            start,
            tuple(_plan_bytes(r) for r in rises),
            decision,
            float(window_s),
            None if raw.get("rebound") is None else _plan_bytes(raw["rebound"]),
            tuple(_plan_bytes(r) for r in flat),
            young,
            rescue_above,
            _plan_bytes(raw.get("floor", 0)),
        )
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
        return None  # RecursionError: JSON nested deeper than the parser goes
    return plan if plan.decision_bytes > 0 and plan.rescue_above_bytes < plan.decision_bytes else None


def _pending_reason(pod: Any) -> str | None:
    for condition in (pod.status.conditions if pod.status else None) or []:
        if condition.type == "PodResizePending" and condition.status == "True":
            return f"{condition.reason or 'Pending'}: {condition.message or ''}".strip(": ")
    return None


def _status(err: ApiException) -> dict[str, Any]:
    """The Status object the API server answered with, or nothing."""
    try:
        status = json.loads(err.body or "{}")
    except (ValueError, TypeError):
        return {}
    return status if isinstance(status, dict) else {}


def _names_pod(status: dict[str, Any]) -> bool:
    """A 404 about the pod itself (a Status naming kind pods), not about a missing subresource."""
    details = status.get("details") or {}
    return bool(isinstance(details, dict) and details.get("kind") == "pods" and details.get("name"))


def _rbac_refusal(status: dict[str, Any]) -> bool:
    """A 403 from RBAC (the agent may not patch pods/resize anywhere), not from an admission plugin
    refusing this pod's resize: RBAC says what the user "cannot" do (a 403 without a message is
    taken as RBAC's: growth off, pods keep their limits)."""
    message = str(status.get("message") or "")
    return not message or " cannot " in message


def resize_memory(core: CoreV1Api, pod: k8s.V1Pod, container: str, limit_bytes: int) -> ResizeAnswer:
    """Ask for ``limit_bytes`` as the container's memory request and limit."""
    quantity = format_memory(limit_bytes)
    body = {"spec": {"containers": [{"name": container, "resources": {
        "requests": {"memory": quantity}, "limits": {"memory": quantity}}}]}}  # fmt: skip
    try:
        answered = core.patch_namespaced_pod_resize(pod.metadata.name, pod.metadata.namespace, body)
    except ApiException as err:
        status = _status(err)
        if err.status == 403 and _rbac_refusal(status):
            return ResizeAnswer(Resized.REFUSED, f"forbidden: {err.reason}")
        if err.status == 404 and _names_pod(status):
            return ResizeAnswer(Resized.GONE, "the pod is gone")
        if err.status in (404, 405):
            return ResizeAnswer(Resized.UNSUPPORTED, "no pods/resize subresource (Kubernetes < 1.33)")
        # this pod's own refusal: it ended, its resize policy, an admission plugin (a namespace at
        # its ResourceQuota, a LimitRange's maximum: 403; a webhook: 400; the agent's own admission
        # policy, deploy/grow-agent.yaml: 422)
        if err.status in (400, 403, 409, 422):
            said = f"{err.status} {status.get('message') or err.reason}"
            return ResizeAnswer(Resized.PENDING, said, refused=err.status != 409)  # 409: the pod changed
        raise
    pending = _pending_reason(answered)
    return ResizeAnswer(Resized.PENDING, pending) if pending else ResizeAnswer(Resized.APPLIED)


def note_growth(core: CoreV1Api, pod: k8s.V1Pod, notes: list[str]) -> None:
    """Explain the growths on the pod (the recording adds the note to the attempt)."""
    text = "; ".join(notes)
    if len(text) > 1000:
        text = "…" + text[-999:]
    patch = {"metadata": {"annotations": {GROWN_ANNOTATION: text}}}
    try:
        core.patch_namespaced_pod(pod.metadata.name, pod.metadata.namespace, patch)
    except ApiException as err:
        if err.status not in (403, 404, 409, 422):
            raise


def growth_note(old_bytes: int, new_bytes: int, usage_bytes: int, at_s: float, answer: ResizeAnswer) -> str:
    verb = "grown" if new_bytes > old_bytes else "lowered"
    what = (
        verb if answer.outcome is Resized.APPLIED else f"not {verb} ({answer.reason or answer.outcome.value})"
    )
    return (
        f"{what} {format_bytes(old_bytes)} → {format_bytes(new_bytes)} at {at_s:.0f} s, "
        f"using {format_bytes(usage_bytes)}"
    )
