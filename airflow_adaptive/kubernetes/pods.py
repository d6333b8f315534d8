"""What apply and observe read and write on pods: valid label values, capability labels, and the
user's resources read off a container (our label and annotation names are in ``names.py``)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value
from kubernetes.client import models as k8s

from airflow_adaptive.core.model import MemoryRequest
from airflow_adaptive.core.sizing.similar import program_of
from airflow_adaptive.exceptions import InvalidCapabilityError, InvalidQuantityError
from airflow_adaptive.kubernetes.names import CAPABILITY_PREFIX, USER_MEMORY_ANNOTATION
from airflow_adaptive.kubernetes.quantity import parse_cpu_millicores, parse_memory_bytes

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def label_value(text: str) -> str:
    """A valid label value for any text (empty, at most 63 characters, alphanumeric at both ends).

    Airflow's own ``make_safe_label_value`` when that is valid; otherwise the text's label-safe
    characters (a readable prefix) and a hash of the whole text, so different texts stay apart.
    """
    safe = make_safe_label_value(text)
    if _NAME.match(safe) or safe == "":
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    readable = re.sub(r"[^-A-Za-z0-9_.]", "", text).strip("-_.")[:52].rstrip("-_.")
    return f"{readable}-{digest}" if readable else f"h{digest}"


def has_own_priority(pod: k8s.V1Pod) -> bool:
    """Whether the pod names a priority class or a fixed priority: the user's choice wins."""
    spec = pod.spec
    return spec is not None and bool(spec.priority_class_name or spec.priority is not None)


def capability_label(capability: str) -> str:
    """The node label key that offers a capability; the name must be a valid label name."""
    if not isinstance(capability, str) or not _NAME.match(capability):
        raise InvalidCapabilityError(
            f"capability {capability!r} is not a valid label name (letters, digits, '-', '_', '.'; at most 63)"
        )
    return CAPABILITY_PREFIX + capability


def find_container(pod: k8s.V1Pod, name: str | None) -> k8s.V1Container | None:
    containers = (pod.spec.containers if pod.spec else None) or []
    if name is not None:
        for container in containers:
            if container.name == name:
                return container
    return containers[0] if containers else None


def tool_of(
    image: str | None, command: Sequence[str] | str | None, args: Sequence[str] | str | None
) -> tuple[str | None, str | None]:
    """What a container runs, for warm starts: its image, and the program its command starts
    (``program_of`` of the command and its arguments)."""
    words = [str(w) for part in (command, args) for w in ([part] if isinstance(part, str) else part or ())]
    return (str(image) if image else None), program_of(words)


def memory_of(resources: k8s.V1ResourceRequirements | dict | None, *, what: str = "memory") -> MemoryRequest:
    """The memory request and limit in bytes; bad quantities raise InvalidQuantityError."""
    if resources is None:
        return MemoryRequest()
    if isinstance(resources, dict):
        requests, limits = resources.get("requests"), resources.get("limits")
    else:
        requests, limits = resources.requests, resources.limits
    req = (requests or {}).get("memory")
    lim = (limits or {}).get("memory")
    return MemoryRequest.asked(
        parse_memory_bytes(req, what=f"{what} request") if req is not None else None,
        parse_memory_bytes(lim, what=f"{what} limit") if lim is not None else None,
    )


def cpu_limit_of(resources: k8s.V1ResourceRequirements | dict | None) -> int | None:
    """The container's CPU limit in millicores (None: none set, or not a quantity)."""
    return _cpu_of(resources, "limits")


def cpu_request_of(resources: k8s.V1ResourceRequirements | dict | None) -> int | None:
    """The container's CPU request in millicores (None: none set, or not a quantity)."""
    return _cpu_of(resources, "requests")


def _cpu_of(resources: k8s.V1ResourceRequirements | dict | None, kind: str) -> int | None:
    if isinstance(resources, dict):
        values = resources.get(kind)
    else:
        values = getattr(resources, kind) if resources else None
    value = (values or {}).get("cpu")
    try:
        return parse_cpu_millicores(value) if value is not None else None
    except InvalidQuantityError:
        return None  # the API server refuses the pod for it; the request then stays the user's


def user_memory_note(resources: k8s.V1ResourceRequirements) -> str:
    """The user's memory request and limit as asked, for the pod's annotation (JSON)."""
    parts = {"requests": resources.requests, "limits": resources.limits}
    return json.dumps({part: {"memory": v["memory"]} for part, v in parts.items() if v and "memory" in v})


def user_memory_of(pod: k8s.V1Pod, container_name: str | None) -> MemoryRequest:
    """The user's memory: the annotation written when the pod was decided, else the pod's own."""
    note = ((pod.metadata.annotations if pod.metadata else None) or {}).get(USER_MEMORY_ANNOTATION)
    try:
        return memory_of(json.loads(note)) if note else _own_memory(pod, container_name)
    except (ValueError, TypeError, AttributeError):  # someone edited it: the pod's own then
        return _own_memory(pod, container_name)


def _own_memory(pod: k8s.V1Pod, container_name: str | None) -> MemoryRequest:
    container = find_container(pod, container_name)
    return memory_of(container.resources if container else None)
