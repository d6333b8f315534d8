"""FakeKubernetesApi: a test double of the Kubernetes API server, for end-to-end operator tests.

It speaks just enough of the core/v1 pods API (create, read, list with label
selectors, log, patch, delete, events), nodes, metrics.k8s.io and
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
from collections.abc import Callable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from kubernetes.utils import parse_quantity

PeakFor = Callable[[dict[str, Any]], int]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(container: dict[str, Any], terminated: dict[str, Any]) -> dict[str, Any]:
    """A container's status once it has ended."""
    return {"name": container["name"], "image": container.get("image", ""), "imageID": "", "ready": False,
            "restartCount": 0, "state": {"terminated": terminated}}  # fmt: skip


def _selector_matches(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


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
        self.finished: dict[str, dict[str, Any]] = {}  # pod name -> the pod when its container ended
        self.metrics_memory: str | None = None  # served by metrics.k8s.io when set
        self.nodes: dict[str, dict[str, Any]] = {}  # name -> V1Node JSON
        self.node_patches: list[tuple[str, dict[str, Any]]] = []
        self.priority_classes: dict[str, dict[str, Any]] = {}  # name -> PriorityClass JSON
        self._reads: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
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
                owner_kind: str | None = None) -> None:  # fmt: skip
        """A pod some other workload runs on ``node`` (for live-load listings)."""
        owners = (
            [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner", "uid": "u"}] if owner_kind else []
        )
        self.pods[(namespace, name)] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": owners},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
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
    def _run_container(self, pod: dict[str, Any]) -> None:
        container = pod["spec"]["containers"][0]
        limit = (container.get("resources") or {}).get("limits", {}).get("memory")
        peak = self.peak_for(pod)
        started = _now()
        pinned = (pod["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")
        node = pinned or self.node_name
        init_statuses = []
        with tempfile.TemporaryDirectory(dir=self.workdir) as pod_dir:
            volumes = self._volumes(pod, node, Path(pod_dir))
            for init in pod["spec"].get("initContainers") or []:
                state, _ = self._execute(init, 0, volumes, Path(pod_dir, init["name"]))
                init_statuses.append(_status(init, state))
            if limit is not None and peak > parse_quantity(limit):
                terminated = {
                    "exitCode": 137,
                    "reason": "OOMKilled",
                    "startedAt": started,
                    "finishedAt": _now(),
                }
                output = ""
            else:
                terminated, output = self._execute(container, peak, volumes, Path(pod_dir, "main"))
                terminated.update(startedAt=started, finishedAt=_now())
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

    # -- HTTP ------------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _not_found(self) -> None:
                self._send(
                    404,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "NotFound",
                        "code": 404,
                    },
                )

            def _body(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                parts = url.path.strip("/").split("/")
                with api._lock:
                    api.requests.append((method, url.path))
                    api.user_agents.append(self.headers.get("User-Agent", ""))
                if parts[:2] == ["apis", "metrics.k8s.io"] and len(parts) == 7:
                    return self._metrics(parts[4], parts[6])
                if parts == ["api", "v1", "pods"] and method == "GET":
                    return self._list_all(query.get("fieldSelector", ""))
                if parts[:4] == ["apis", "scheduling.k8s.io", "v1", "priorityclasses"]:
                    return self._priority_class(method, query.get("labelSelector", ""))
                if parts[:3] == ["api", "v1", "nodes"]:
                    return self._node(method, parts[3] if len(parts) > 3 else None)
                if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 5:
                    return self._not_found()
                namespace, kind = parts[3], parts[4]
                if kind == "events":
                    return self._send(200, {"kind": "EventList", "apiVersion": "v1", "items": []})
                if kind != "pods":
                    return self._not_found()
                name = parts[5] if len(parts) > 5 else None
                sub = parts[6] if len(parts) > 6 else None
                if method == "POST" and name is None:
                    return self._create(namespace)
                if method == "GET" and name is None:
                    return self._list(namespace, query.get("labelSelector", ""))
                key = (namespace, name or "")
                with api._lock:
                    pod = api.pods.get(key)
                if pod is None:
                    return self._not_found()
                if sub == "log":
                    return self._log(key, query)
                if method == "GET":
                    return self._send(200, self._read(key, pod))
                if method == "PATCH":
                    patch = self._body()
                    with api._lock:
                        api.patches.append((name or "", patch))
                        pod["metadata"].setdefault("labels", {}).update(
                            (patch.get("metadata") or {}).get("labels") or {}
                        )
                    return self._send(200, pod)
                if method == "DELETE":
                    with api._lock:
                        api.pods.pop(key, None)
                    return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                return self._not_found()

            def _node(self, method: str, name: str | None) -> None:
                if name is None and method == "GET":
                    with api._lock:
                        items = list(api.nodes.values())
                    return self._send(
                        200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items}
                    )
                with api._lock:
                    node = api.nodes.get(name or "")
                if node is None:
                    return self._not_found()
                if method == "PATCH":
                    patch = self._body()
                    with api._lock:
                        api.node_patches.append((name or "", patch))
                        labels = node["metadata"].setdefault("labels", {})
                        for key, value in ((patch.get("metadata") or {}).get("labels") or {}).items():
                            if value is None:
                                labels.pop(key, None)  # JSON merge patch: null deletes
                            else:
                                labels[key] = value
                return self._send(200, node)

            def _priority_class(self, method: str, selector: str) -> None:
                if method == "POST":
                    body = self._body()
                    with api._lock:
                        api.priority_classes[body["metadata"]["name"]] = body
                    return self._send(201, body)
                with api._lock:
                    items = [
                        c for c in api.priority_classes.values()
                        if _selector_matches(selector, c["metadata"].get("labels") or {})
                    ]  # fmt: skip
                self._send(200, {"kind": "PriorityClassList", "apiVersion": "scheduling.k8s.io/v1",
                                 "metadata": {}, "items": items})  # fmt: skip

            def _create(self, namespace: str) -> None:
                pod = self._body()
                wanted = pod.get("spec", {}).get("priorityClassName")
                if wanted and wanted not in api.priority_classes:  # the Priority admission plugin
                    return self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                            "reason": "Forbidden", "code": 403,
                                            "message": f"no PriorityClass with name {wanted} was found"})  # fmt: skip
                with api._lock:
                    api.created.append(copy.deepcopy(pod))
                pod.setdefault("metadata", {})["namespace"] = namespace
                pod["metadata"].update(
                    uid=f"uid-{len(api.created)}", creationTimestamp=_now(), resourceVersion="1"
                )
                pod["status"] = {"phase": "Pending"}
                with api._lock:
                    api.pods[(namespace, pod["metadata"]["name"])] = pod
                self._send(201, pod)

            def _read(self, key: tuple[str, str], pod: dict[str, Any]) -> dict[str, Any]:
                """Pending on the first read, then the container has run to its end."""
                with api._lock:
                    api._reads[key] = api._reads.get(key, 0) + 1
                    first = api._reads[key] == 1
                if not first and pod["status"].get("phase") == "Pending":
                    if api.schedulable(pod):
                        api._run_container(pod)
                    else:
                        pod["status"]["conditions"] = [
                            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                             "message": "0/1 nodes are available: node affinity did not match"}
                        ]  # fmt: skip
                return pod

            def _list(self, namespace: str, selector: str) -> None:
                with api._lock:
                    items = [
                        p for (ns, _), p in api.pods.items()
                        if ns == namespace and _selector_matches(selector, p["metadata"].get("labels") or {})
                    ]  # fmt: skip
                self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

            def _list_all(self, field_selector: str) -> None:
                """Pods of every namespace; understands ``status.phase!=X`` terms only."""
                excluded = {
                    t.split("!=", 1)[1] for t in field_selector.split(",") if t.startswith("status.phase!=")
                }
                with api._lock:
                    items = [p for p in api.pods.values() if p.get("status", {}).get("phase") not in excluded]
                self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

            def _log(self, key: tuple[str, str], query: dict[str, str]) -> None:
                lines = api.logs.get(key, "").splitlines()
                stamp = "2026-11-25T00:00:00.000000000Z "
                text = "".join(
                    f"{stamp if query.get('timestamps') == 'true' else ''}{line}\n" for line in lines
                )
                self._send(200, text, "text/plain")

            def _metrics(self, namespace: str, name: str) -> None:
                with api._lock:
                    pod = api.pods.get((namespace, name))
                if pod is None or api.metrics_memory is None:
                    return self._not_found()
                containers = [
                    {"name": c["name"], "usage": {"cpu": "100m", "memory": api.metrics_memory}}
                    for c in pod["spec"]["containers"]
                ]
                self._send(200, {"kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                                 "metadata": {"name": name, "namespace": namespace}, "containers": containers})  # fmt: skip

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PATCH(self) -> None:
                self._route("PATCH")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        return Handler
