"""Staged inputs in a pod: the cache volume, the staging init container, paths and node preferences.

The cache is a ``hostPath`` directory (``[adaptive] cache_root``) shared by every pod on a node;
a RAM disk is offered by mounting a tmpfs there on the node (then ``cache_budget`` must fit in it):
``emptyDir: {medium: Memory}`` is private to one pod, so it cannot be a shared cache. The main
container sees each declared input through ``ADAPTIVE_INPUT_<NAME>`` (the staged copy's path, or
the URI when it is not staged) and ``ADAPTIVE_INPUT_<NAME>_URI``; a staged path that does not
exist means staging failed and the task reads the URI. The wrapper appends the staging report to
the termination message beside its usage line.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence

from kubernetes.client import models as k8s

from airflow_adaptive.core.locality import DeclaredInput, StagePlan
from airflow_adaptive.core.telemetry import STAGE_PREFIX
from airflow_adaptive.kubernetes.names import PREFIX
from airflow_adaptive.kubernetes.pods import find_container
from airflow_adaptive.kubernetes.stage_script import stage_script

CACHE_VOLUME, CACHE_MOUNT = "adaptive-cache", "/adaptive-cache"
REPORT_VOLUME, REPORT_MOUNT = "adaptive-stage", "/adaptive-stage"
STAGE_CONTAINER = "adaptive-stage"
STAGE_REPORT_ENV = "ADAPTIVE_STAGE_REPORT"
INPUTS_ANNOTATION = f"{PREFIX}/inputs"
LOCALITY_ANNOTATION = f"{PREFIX}/locality"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Fallback when the report is not there: never fail the init container (and so the pod).
_RUN = 'python3 -c "$0" "$1" || echo "adaptive staging did not run; the task reads shared storage"; exit 0'


def env_names(uris: Sequence[str]) -> dict[str, str]:
    """``ADAPTIVE_INPUT_<NAME>`` per URI from its last path segment (made unique with a suffix)."""
    names: dict[str, str] = {}
    for uri in uris:
        base = (
            re.sub(r"[^A-Z0-9]+", "_", posixpath.basename(uri.rstrip("/")).upper()).strip("_")[:40] or "INPUT"
        )
        name, n = f"ADAPTIVE_INPUT_{base}", 2
        while name in names.values():
            name, n = f"ADAPTIVE_INPUT_{base}_{n}", n + 1
        names[uri] = name
    return names


def staged_path(item: DeclaredInput) -> str:
    return f"{CACHE_MOUNT}/{item.key}/data"


def apply_staging(pod: k8s.V1Pod, container_name: str | None, declared: Sequence[DeclaredInput],
                  plan: StagePlan, *, cache_root: str, budget_bytes: int, image: str) -> None:  # fmt: skip
    """Declared inputs into the pod: env for every one; for staged ones the cache volume, the
    staging init container, a read-only mount and the report file the wrapper reads."""
    container = find_container(pod, container_name)
    if container is None:
        return
    staged = {item.uri for item in plan.staged}
    env = list(container.env or [])
    names = env_names([i.uri for i in declared])
    for item in declared:
        name = names[item.uri]
        env.append(k8s.V1EnvVar(name=name, value=staged_path(item) if item.uri in staged else item.uri))
        env.append(k8s.V1EnvVar(name=f"{name}_URI", value=item.uri))
    pod.metadata.annotations = dict(pod.metadata.annotations or {})
    pod.metadata.annotations[INPUTS_ANNOTATION] = json.dumps(
        [{"uri": i.uri, "size": i.size_bytes, "etag": i.etag, "staged": i.uri in staged} for i in declared]
    )[:60000]
    if not plan.staged:
        container.env = env
        return
    env.append(k8s.V1EnvVar(name=STAGE_REPORT_ENV, value=f"{REPORT_MOUNT}/report"))
    container.env = env
    container.volume_mounts = [
        *(container.volume_mounts or []),
        k8s.V1VolumeMount(name=CACHE_VOLUME, mount_path=CACHE_MOUNT, read_only=True),
        k8s.V1VolumeMount(name=REPORT_VOLUME, mount_path=REPORT_MOUNT, read_only=True),
    ]
    pod.spec.volumes = [
        *(pod.spec.volumes or []),
        k8s.V1Volume(name=CACHE_VOLUME, host_path=k8s.V1HostPathVolumeSource(path=cache_root, type="DirectoryOrCreate")),
        k8s.V1Volume(name=REPORT_VOLUME, empty_dir=k8s.V1EmptyDirVolumeSource(size_limit="1Mi")),
    ]  # fmt: skip
    pod.spec.init_containers = [*(pod.spec.init_containers or []), _stager(plan, budget_bytes, image)]


def _stager(plan: StagePlan, budget_bytes: int, image: str) -> k8s.V1Container:
    spec = {
        "root": CACHE_MOUNT,
        "budget": budget_bytes,
        "report": f"{REPORT_MOUNT}/report",
        "inputs": [{"key": i.key, "uri": i.uri, "size": i.size_bytes} for i in plan.staged],
    }
    return k8s.V1Container(
        name=STAGE_CONTAINER,
        image=image,
        command=["/bin/sh", "-c", _RUN, stage_script(STAGE_PREFIX), json.dumps(spec, separators=(",", ":"))],
        resources=k8s.V1ResourceRequirements(
            requests={"cpu": "100m", "memory": "64Mi"}, limits={"memory": "256Mi"}
        ),
        volume_mounts=[
            k8s.V1VolumeMount(name=CACHE_VOLUME, mount_path=CACHE_MOUNT),
            k8s.V1VolumeMount(name=REPORT_VOLUME, mount_path=REPORT_MOUNT),
        ],
        # the image's user (root in python:*-slim), as the kubelet that creates the hostPath folder: it
        # owns the cache, so it needs no capability; a pod-level runAsUser must be able to write it
        security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
    )


def declared_in(pod: k8s.V1Pod) -> list[tuple[DeclaredInput, bool]]:
    """The declared inputs the pod's annotation lists, each with whether it was staged."""
    raw = ((pod.metadata.annotations if pod.metadata else None) or {}).get(INPUTS_ANNOTATION)
    try:
        items = json.loads(raw) if raw else []
        return [
            (
                DeclaredInput(
                    str(i["uri"]),
                    int(i["size"]) if i.get("size") is not None else None,
                    str(i.get("etag", "")),
                ),
                bool(i["staged"]),
            )
            for i in items
        ]
    except (ValueError, TypeError, KeyError):
        return []
