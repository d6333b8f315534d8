"""FakeKubernetesApi: a test double of the Kubernetes API server, for end-to-end operator tests.

It speaks just enough of the core/v1 pods API (create, read, list with label
selectors, log, merge and JSON patch, delete, which waits for finalizers as the API
server does, events), coordination.k8s.io Leases (optimistic concurrency), nodes, metrics.k8s.io and
scheduling.k8s.io PriorityClasses (list, create; a pod naming a missing class is
refused with 403 as the Priority admission plugin does) for
KubernetesPodOperator, its trigger and our sampler. Instead of a kubelet it
*runs* the container command locally with ``sh`` and a fake cgroup folder
whose ``memory.peak`` is the peak the test scripted for that task: a peak above
the memory limit ends the container ``OOMKilled`` (exit 137, no message), as
the kernel would; otherwise the command's exit code and termination-message
file become the container's terminated state.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes.utils import parse_quantity

from tests.fake_kubernetes_http import handler_for, now

PeakFor = Callable[[dict[str, Any]], int]


def _status(container: dict[str, Any], terminated: dict[str, Any]) -> dict[str, Any]:
    """A container's status once it has ended."""
    return {"name": container["name"], "image": container.get("image", ""), "imageID": "", "ready": False,
            "restartCount": 0, "state": {"terminated": terminated}}  # fmt: skip


class FakeKubernetesApi:
    """Start with ``with FakeKubernetesApi(tmp_path, peak_for) as api:``; ``api.kubeconfig`` points at it."""

    def __init__(self, workdir: Path, peak_for: PeakFor, node_name: str = "node-a") -> None:
        self.workdir = workdir
        self.peak_for = peak_for
        self.node_name = node_name
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []  # every pod body as POSTed, in order
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[tuple[str, str]] = []
        self.user_agents: list[str] = []  # per request: tells the task's client from the triggerer's
        self.logs: dict[tuple[str, str], str] = {}
        self.on_log: Callable[[tuple[str, str]], None] | None = None  # called as a pod's log is read
        self.finished: dict[str, dict[str, Any]] = {}  # pod name -> the pod when its container ended
        self.metrics_memory: str | None = None  # served by metrics.k8s.io when set
        self.nodes: dict[str, dict[str, Any]] = {}  # name -> V1Node JSON
        self.node_patches: list[tuple[str, dict[str, Any]]] = []
        self.priority_classes: dict[str, dict[str, Any]] = {}  # name -> PriorityClass JSON
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> Lease JSON
        self.forbid_lease_reads = False  # a reader without RBAC for Leases: 403 on GET
        self.deletions: list[str] = []  # pod names, as DELETE was asked
        # In-place resize (pods/resize): "apply", "defer", "infeasible", "forbid" (403, RBAC), "quota"
        # (403, a ResourceQuota refusing this pod's resize), "absent"
        # (404, a cluster older than 1.33) or "grow-only" (a 1.33 cluster: a memory-limit decrease is
        # 422 Invalid, an increase applied); every request body, in order.
        self.resize_mode = "apply"
        self.resize_failing: set[str] = set()  # pod names whose resize the API server fails (500)
        self.resizes: list[tuple[str, dict[str, Any]]] = []
        # Memory over time: when set, a container runs in a thread through these usage samples (bytes,
        # one per ``series_step_s``), writing them to a cgroup v2 folder under ``cgroup_root`` as the
        # kubelet's cgroupfs driver lays it out; a sample above ``memory.max`` is an OOM kill.
        self.series_for: Callable[[dict[str, Any]], list[int]] | None = None
        self.series_step_s: float | None = 0.05
        self._series: dict[str, tuple[dict[str, Any], Path, Iterator[int]]] = {}
        self.cgroup_root = workdir / "cgroups"
        self._reads: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(self))
        self.kubeconfig = workdir / "kubeconfig.yaml"

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> FakeKubernetesApi:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "fake", "user": {"token": "fake-token"}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                    "current-context": "fake",
                }
            )
        )
        return self

    def refused_kubeconfig(self) -> Path:
        """A kubeconfig like ``kubeconfig`` whose server refuses every connection (port 1)."""
        refused = self.workdir / "refused.yaml"
        refused.write_text(self.kubeconfig.read_text().replace(self.url, "http://127.0.0.1:1"))
        return refused

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_node(self, name: str, *, cores: int = 2, memory: str = "8Gi", labels: dict[str, str] | None = None,
                 ready: bool = True, unschedulable: bool = False, gpus: int = 0) -> None:  # fmt: skip
        allocatable = {"cpu": str(cores), "memory": memory, "pods": "110"}
        if gpus:
            allocatable["nvidia.com/gpu"] = str(gpus)
        self.nodes[name] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64", **(labels or {})},
            },
            "spec": {"unschedulable": unschedulable},
            "status": {
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }

    def add_pod(self, namespace: str, name: str, node: str, *, phase: str = "Running",
                owner_kind: str | None = None, cpu: str | None = None,
                annotations: dict[str, str] | None = None) -> None:  # fmt: skip
        """A pod some other workload runs on ``node`` (for live-load listings)."""
        owners = (
            [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner", "uid": "u"}] if owner_kind else []
        )
        container: dict[str, Any] = {"name": "c", "image": "busybox"}
        if cpu is not None:
            container["resources"] = {"requests": {"cpu": cpu}}
        metadata = {"name": name, "namespace": namespace, "ownerReferences": owners}
        self.pods[(namespace, name)] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**metadata, "annotations": annotations} if annotations else metadata,
            "spec": {"nodeName": node, "containers": [container]},
            "status": {"phase": phase},
        }

    def schedulable(self, pod: dict[str, Any]) -> bool:
        """A node satisfies the pod's required node affinity (any term, all its expressions)."""
        required = (((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))  # fmt: skip
        if not required or not self.nodes:
            return True
        for node in self.nodes.values():
            labels = node["metadata"].get("labels") or {}
            for term in required.get("nodeSelectorTerms") or []:
                if all(
                    labels.get(e["key"]) in e.get("values", [])
                    if e["operator"] == "In"
                    else e["key"] not in labels
                    for e in term.get("matchExpressions") or []
                ):
                    return True
        return False

    # -- the kubelet stand-in --------------------------------------------------------------------
    def container_cgroup(self, pod: dict[str, Any]) -> Path:
        uid = pod["metadata"]["uid"]
        return self.cgroup_root / "kubepods" / "burstable" / f"pod{uid}" / f"c{uid}"

    def start_series(self, pod: dict[str, Any]) -> None:
        """Start the pod's container on its usage samples (``series_for``): in a thread, one sample
        per ``series_step_s``, or (``series_step_s`` None) one per :meth:`step` the test calls."""
        container = pod["spec"]["containers"][0]
        limit = (container.get("resources") or {}).get("limits", {}).get("memory")
        cgroup = self.container_cgroup(pod)
        cgroup.mkdir(parents=True)
        (cgroup / "memory.max").write_text(f"{parse_quantity(limit) if limit else 'max'}\n")
        (cgroup / "memory.current").write_text("0\n")
        (cgroup / "memory.events").write_text("oom 0\noom_kill 0\n")
        (cgroup / "memory.stat").write_text("anon 0\nfile 0\ninactive_file 0\n")
        pod["spec"]["nodeName"] = self.node_name
        uid = pod["metadata"]["uid"]
        pod["status"] = {"phase": "Running", "containerStatuses": [{  # a sidecar runs too, with no cgroup here
            "name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "restartCount": 0,
            "containerID": f"containerd://c{uid}" if i == 0 else f"containerd://s{uid}{i}",
            "state": {"running": {"startedAt": now()}}} for i, c in enumerate(pod["spec"]["containers"])]}  # fmt: skip
        self._series[pod["metadata"]["name"]] = (
            pod,
            cgroup,
            iter(self.series_for(pod) if self.series_for else []),
        )
        if self.series_step_s is not None:
            threading.Thread(target=self._run_series, args=(pod["metadata"]["name"],), daemon=True).start()

    def _run_series(self, name: str) -> None:
        while self.step(name):
            threading.Event().wait(self.series_step_s or 0.0)

    def step(self, name: str) -> bool:
        """The next usage sample of a running pod; False once it has ended (completed, or OOM-killed
        for a sample above its cgroup's ``memory.max``)."""
        if name not in self._series:
            return False
        pod, cgroup, samples = self._series[name]
        usage = next(samples, None)
        if usage is not None:
            (cgroup / "memory.current").write_text(f"{usage}\n")
            raw = (cgroup / "memory.max").read_text().strip()
            if raw == "max" or usage <= int(raw):
                return True
            (cgroup / "memory.events").write_text("oom 1\noom_kill 1\n")
        del self._series[name]
        with self._lock:
            self._run_container(pod, oom=usage is not None)
        return False

    @staticmethod
    def lowers_a_limit(pod: dict[str, Any], body: dict[str, Any]) -> bool:
        """Whether a pods/resize body asks any container for a lower memory limit than it has."""
        wanted = {c["name"]: (c.get("resources") or {}).get("limits", {}) for c in body["spec"]["containers"]}
        for container in pod["spec"]["containers"]:
            now = (container.get("resources") or {}).get("limits", {}).get("memory")
            new = wanted.get(container["name"], {}).get("memory")
            if now and new and parse_quantity(new) < parse_quantity(now):
                return True
        return False

    def resize(self, pod: dict[str, Any], body: dict[str, Any]) -> None:
        """Apply a pods/resize body as the kubelet would: new resources in the spec and the status,
        the new limit in the container's cgroup."""
        wanted = {c["name"]: c.get("resources") or {} for c in body["spec"]["containers"]}
        for container in pod["spec"]["containers"]:
            for kind, values in wanted.get(container["name"], {}).items():
                container.setdefault("resources", {}).setdefault(kind, {}).update(values)
            limit = (container.get("resources") or {}).get("limits", {}).get("memory")
            cgroup = self.container_cgroup(pod)
            if container["name"] in wanted and limit and cgroup.is_dir():
                (cgroup / "memory.max").write_text(f"{parse_quantity(limit)}\n")

    def _run_container(self, pod: dict[str, Any], oom: bool | None = None) -> None:
        """Run the container to its end (``oom``: the series decided whether it was killed)."""
        container = pod["spec"]["containers"][0]
        limit = (container.get("resources") or {}).get("limits", {}).get("memory")
        peak = self.peak_for(pod)
        started = now()
        pinned = (pod["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")
        node = pinned or self.node_name
        init_statuses = []
        with tempfile.TemporaryDirectory(dir=self.workdir) as pod_dir:
            volumes = self._volumes(pod, node, Path(pod_dir))
            for init in pod["spec"].get("initContainers") or []:
                state, _ = self._execute(init, 0, volumes, Path(pod_dir, init["name"]))
                init_statuses.append(_status(init, state))
            if oom or (oom is None and limit is not None and peak > parse_quantity(limit)):
                terminated = {
                    "exitCode": 137,
                    "reason": "OOMKilled",
                    "startedAt": started,
                    "finishedAt": now(),
                }
                output = ""
            else:
                terminated, output = self._execute(container, peak, volumes, Path(pod_dir, "main"))
                terminated.update(startedAt=started, finishedAt=now())
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.logs[key] = output
        pod["spec"]["nodeName"] = node
        pod["status"] = {
            "phase": "Succeeded" if terminated["exitCode"] == 0 else "Failed",
            "initContainerStatuses": init_statuses,
            "containerStatuses": [_status(container, terminated)],
        }
        self.finished[pod["metadata"]["name"]] = copy.deepcopy(pod)

    def _volumes(self, pod: dict[str, Any], node: str, pod_dir: Path) -> dict[str, str]:
        """Host folders per pod volume: a hostPath is the node's own folder (shared by its pods),
        anything else a fresh folder of this pod."""
        out = {}
        for volume in pod["spec"].get("volumes") or []:
            host_path = (volume.get("hostPath") or {}).get("path")
            if host_path:
                folder = self.workdir / "nodes" / node / host_path.strip("/")
                folder.mkdir(parents=True, exist_ok=True)
            else:
                folder = pod_dir / "volumes" / volume["name"]
                folder.mkdir(parents=True)
            out[volume["name"]] = str(folder)
        return out

    def _execute(
        self, container: dict[str, Any], peak: int, volumes: dict[str, str], run_dir: Path
    ) -> tuple[dict[str, Any], str]:
        command = [*(container.get("command") or []), *(container.get("args") or [])]
        if not command:  # the image's entrypoint would run: nothing to execute here
            return {"exitCode": 0, "reason": "Completed"}, ""
        cgroup = run_dir / "cgroup"
        cgroup.mkdir(parents=True)
        (cgroup / "memory.peak").write_text(f"{peak}\n")
        (cgroup / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
        (cgroup / "io.stat").write_text("8:0 rbytes=4096 wbytes=8192 rios=1 wios=2\n")
        message_file = run_dir / "termination-log"
        message_file.touch()
        # The kubelet mounts a host file at terminationMessagePath and each volume at its mount
        # path; this stand-in maps those container paths to host paths in the command and env.
        mounts = {container.get("terminationMessagePath") or "/dev/termination-log": str(message_file)}
        for i, mount in enumerate(container.get("volumeMounts") or []):
            host = volumes.get(mount["name"])
            if host is None:
                host = str(run_dir / f"volume-{i}")
                Path(host).mkdir()
            mounts[mount["mountPath"]] = host

        def mapped(text: str) -> str:
            for path, host_path in mounts.items():
                text = text.replace(path, host_path)
            return text

        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "ADAPTIVE_CGROUP_ROOT": str(cgroup),
            "ADAPTIVE_TERMINATION_FILE": str(message_file),
        }
        env.update(
            {
                e["name"]: mapped(e.get("value", ""))
                for e in container.get("env") or []
                if e["name"] != "ADAPTIVE_TERMINATION_FILE"
            }
        )
        done = subprocess.run(
            [mapped(arg) for arg in command], env=env, capture_output=True, text=True, timeout=120
        )
        message = message_file.read_text()
        reason = "Completed" if done.returncode == 0 else "Error"
        state: dict[str, Any] = {"exitCode": done.returncode, "reason": reason}
        if message:
            state["message"] = message
        return state, done.stdout + done.stderr
