"""Runs the node profiler in a pod pinned to one node and returns its profile."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.common.compat.sdk import AirflowException
from kubernetes.client import models as k8s

from airflow_adaptive.kubernetes.names import OPT_OUT_LABEL

TERMINATION_PATH = "/dev/termination-log"
SCRATCH = "/scratch"
PROFILER_UID = 10001  # the user of docker/profiler/Dockerfile


class NodeProfileOperator(KubernetesPodOperator):
    """Profiles ``node_name`` with ``airflow-adaptive profile-node``; the profile comes back as the
    container's termination message and is this task's return value (XCom)."""

    template_fields: Sequence[str] = (*KubernetesPodOperator.template_fields, "node_name")

    def __init__(
        self,
        *,
        node_name: str,
        seconds: float | str = 10.0,
        repeats: int | str = 3,
        fio_size: str = "256M",
        **kwargs: Any,
    ) -> None:
        command = [
            "airflow-adaptive", "profile-node", "--json", "--node", node_name, "--seconds", str(seconds),
            "--repeats", str(repeats), "--fio-size", fio_size, "--fio-dir", SCRATCH, "--output", TERMINATION_PATH,
        ]  # fmt: skip
        kwargs.setdefault("cmds", command)
        kwargs.setdefault("node_selector", {"kubernetes.io/hostname": node_name})
        kwargs.setdefault("labels", {OPT_OUT_LABEL: "true"})  # benchmarks keep their own resources
        kwargs.setdefault("volumes", [k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource())])
        kwargs.setdefault("volume_mounts", [k8s.V1VolumeMount(name="scratch", mount_path=SCRATCH)])
        # sysbench and fio need no privilege: the profiler image's own user, Pod Security "restricted"
        kwargs.setdefault("security_context", {"runAsNonRoot": True, "runAsUser": PROFILER_UID,
                                               "seccompProfile": {"type": "RuntimeDefault"}})  # fmt: skip
        kwargs.setdefault(
            "container_security_context",
            {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        )
        kwargs["deferrable"] = False  # the profile is read from the final pod in this process
        kwargs["do_xcom_push"] = False  # no sidecar: the profile travels in the termination message
        super().__init__(**kwargs)
        self.node_name = node_name

    def execute(self, context: Any) -> dict[str, Any]:
        super().execute(context)
        pod = self.remote_pod
        for status in (pod.status.container_statuses if pod and pod.status else None) or []:
            terminated = status.state.terminated if status.state else None
            if status.name == self.base_container_name and terminated and terminated.message:
                try:
                    profile: dict[str, Any] = json.loads(terminated.message.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    break
                context["ti"].xcom_push(key="return_value", value=profile)
                return profile
        raise AirflowException(
            f"the profiling pod on node {self.node_name!r} left no profile in its termination message"
        )
