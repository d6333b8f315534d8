"""The HTTP side of FakeKubernetesApi: routes requests of the Kubernetes client to its state."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, urlparse

if TYPE_CHECKING:
    from tests.fake_kubernetes import FakeKubernetesApi


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json_patch(pod: dict[str, Any], operations: list[dict[str, Any]]) -> bool:
    """RFC 6902 test, add and replace on ``/metadata/...`` paths; False when a test fails."""
    for op in operations:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].strip("/").split("/")]
        target = pod
        for part in parents:
            target = target.setdefault(part, {})
        if op["op"] == "test" and target.get(last) != op["value"]:
            return False
        if op["op"] in ("add", "replace"):
            target[last] = op["value"]
    return True


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


class Handler(BaseHTTPRequestHandler):
    """Routes the Kubernetes client's requests to ``api``'s pods, nodes and priority classes."""

    api: ClassVar[FakeKubernetesApi]

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
        with self.api._lock:
            self.api.requests.append((method, url.path))
            self.api.user_agents.append(self.headers.get("User-Agent", ""))
        if parts[:2] == ["apis", "metrics.k8s.io"] and len(parts) == 7:
            return self._metrics(parts[4], parts[6])
        if parts == ["api", "v1", "pods"] and method == "GET":
            return self._list_all(query.get("fieldSelector", ""), query.get("labelSelector", ""))
        if parts[:4] == ["apis", "scheduling.k8s.io", "v1", "priorityclasses"]:
            return self._priority_class(method, query.get("labelSelector", ""))
        if parts[:4] == ["apis", "coordination.k8s.io", "v1", "namespaces"] and len(parts) >= 6:
            return self._lease(method, parts[4], parts[6] if len(parts) > 6 else None)
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
        with self.api._lock:
            pod = self.api.pods.get(key)
        if pod is None:
            return self._not_found()
        if sub == "log":
            return self._log(key, query)
        if sub == "resize" and method == "PATCH":
            return self._resize(key, pod)
        if method == "GET":
            read = self._read(key, pod)
            with self.api._lock:  # a container thread may be changing it
                read = copy.deepcopy(read)
            return self._send(200, read)
        if method == "PATCH":
            return self._patch(key, pod)
        if method == "DELETE":
            with self.api._lock:
                self.api.deletions.append(key[1])
                if pod["metadata"].get("finalizers"):  # deleted once every finalizer is removed
                    pod["metadata"]["deletionTimestamp"] = now()
                else:
                    self.api.pods.pop(key, None)
            return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return self._not_found()

    def _patch(self, key: tuple[str, str], pod: dict[str, Any]) -> None:
        """A merge patch of labels and annotations, or a JSON patch (test, add, replace) of the metadata."""
        patch = self._body()
        with self.api._lock:
            self.api.patches.append((key[1], patch))
            if isinstance(patch, dict):
                for field in ("labels", "annotations"):
                    pod["metadata"].setdefault(field, {}).update(
                        (patch.get("metadata") or {}).get(field) or {}
                    )
            elif not _json_patch(pod, patch):
                return self._send(422, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                        "reason": "Invalid", "code": 422, "message": "test failed"})  # fmt: skip
            if pod["metadata"].get("deletionTimestamp") and not pod["metadata"].get("finalizers"):
                self.api.pods.pop(key, None)
        return self._send(200, pod)

    def _resize(self, key: tuple[str, str], pod: dict[str, Any]) -> None:
        """pods/resize: applied, pending (Deferred or Infeasible), forbidden, or no such subresource."""
        body = self._body()
        mode = self.api.resize_mode
        with self.api._lock:
            self.api.resizes.append((key[1], body))
        if mode == "forbid":
            return self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                                    "code": 403, "message": "pods \"x\" is forbidden: cannot patch resource \"pods/resize\""})  # fmt: skip
        if key[1] in self.api.resize_failing:
            return self._send(500, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "reason": "InternalError", "code": 500, "message": "etcd timed out"})  # fmt: skip
        if mode == "quota":  # a ResourceQuota's admission refuses this pod's resize, not RBAC the agent's
            return self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                                    "code": 403, "message": "pods \"x\" is forbidden: exceeded quota: mem, requested: "
                                    "limits.memory=1Gi, used: limits.memory=4Gi, limited: limits.memory=4Gi"})  # fmt: skip
        if mode == "absent":  # an API server without the subresource names no pod
            return self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                    "code": 404, "message": "the server could not find the requested resource"})  # fmt: skip
        if mode == "grow-only" and self.api.lowers_a_limit(pod, body):
            return self._send(422, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid",
                                    "code": 422, "message": "Pod \"x\" is invalid: spec.containers[0].resources.limits[memory]: "
                                    "Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer"})  # fmt: skip
        with self.api._lock:
            conditions = [
                c for c in pod["status"].get("conditions") or [] if not c["type"].startswith("PodResize")
            ]
            if mode in ("apply", "grow-only"):
                self.api.resize(pod, body)
                conditions.append({"type": "PodResizeInProgress", "status": "True"})
            else:
                reason = "Deferred" if mode == "defer" else "Infeasible"
                conditions.append({"type": "PodResizePending", "status": "True", "reason": reason,
                                   "message": "Node didn't have enough capacity: memory"})  # fmt: skip
            pod["status"]["conditions"] = conditions
            answer = copy.deepcopy(pod)
        return self._send(200, answer)

    def _lease(self, method: str, namespace: str, name: str | None) -> None:
        """coordination.k8s.io Leases: read, create, replace with optimistic concurrency."""
        with self.api._lock:
            lease = self.api.leases.get((namespace, name or ""))
            if method == "GET" and self.api.forbid_lease_reads:
                return self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                        "reason": "Forbidden", "code": 403, "message": "leases is forbidden"})  # fmt: skip
            if method == "GET":
                return self._send(200, lease) if lease else self._not_found()
            body = self._body()
            key = (namespace, body["metadata"]["name"])
            stale = (
                lease is None
                or body["metadata"].get("resourceVersion") != lease["metadata"]["resourceVersion"]
            )
            if (method == "POST" and key in self.api.leases) or (method == "PUT" and stale):
                return self._send(409, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                        "reason": "Conflict", "code": 409})  # fmt: skip
            version = int((lease or {"metadata": {"resourceVersion": "0"}})["metadata"]["resourceVersion"])
            body["metadata"]["resourceVersion"] = str(version + 1)
            self.api.leases[key] = body
        return self._send(201 if method == "POST" else 200, body)

    def _node(self, method: str, name: str | None) -> None:
        if name is None and method == "GET":
            with self.api._lock:
                items = list(self.api.nodes.values())
            return self._send(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})
        with self.api._lock:
            node = self.api.nodes.get(name or "")
        if node is None:
            return self._not_found()
        if method == "PATCH":
            patch = self._body()
            with self.api._lock:
                self.api.node_patches.append((name or "", patch))
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
            with self.api._lock:
                self.api.priority_classes[body["metadata"]["name"]] = body
            return self._send(201, body)
        with self.api._lock:
            items = [
                c for c in self.api.priority_classes.values()
                if _selector_matches(selector, c["metadata"].get("labels") or {})
            ]  # fmt: skip
        self._send(200, {"kind": "PriorityClassList", "apiVersion": "scheduling.k8s.io/v1",
                         "metadata": {}, "items": items})  # fmt: skip

    def _create(self, namespace: str) -> None:
        pod = self._body()
        wanted = pod.get("spec", {}).get("priorityClassName")
        if wanted and wanted not in self.api.priority_classes:  # the Priority admission plugin
            return self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "reason": "Forbidden", "code": 403,
                                    "message": f"no PriorityClass with name {wanted} was found"})  # fmt: skip
        with self.api._lock:
            self.api.created.append(copy.deepcopy(pod))
        pod.setdefault("metadata", {})["namespace"] = namespace
        pod["metadata"].update(
            uid=f"uid-{len(self.api.created)}", creationTimestamp=now(), resourceVersion="1"
        )
        pod["status"] = {"phase": "Pending"}
        with self.api._lock:
            self.api.pods[(namespace, pod["metadata"]["name"])] = pod
        self._send(201, pod)

    def _read(self, key: tuple[str, str], pod: dict[str, Any]) -> dict[str, Any]:
        """Pending on the first read, then the container has run to its end."""
        with self.api._lock:
            self.api._reads[key] = self.api._reads.get(key, 0) + 1
            first = self.api._reads[key] == 1
        if not first and pod["status"].get("phase") == "Pending":
            if self.api.schedulable(pod) and self.api.series_for is not None:
                self.api.start_series(pod)
            elif self.api.schedulable(pod):
                self.api._run_container(pod)
            else:
                pod["status"]["conditions"] = [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": "0/1 nodes are available: node affinity did not match"}
                ]  # fmt: skip
        return pod

    def _list(self, namespace: str, selector: str) -> None:
        with self.api._lock:
            items = [
                p for (ns, _), p in self.api.pods.items()
                if ns == namespace and _selector_matches(selector, p["metadata"].get("labels") or {})
            ]  # fmt: skip
        self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    def _list_all(self, field_selector: str, label_selector: str = "") -> None:
        """Pods of every namespace; understands ``status.phase!=X``, ``status.phase=X`` and
        ``spec.nodeName=X`` field terms and label selectors."""
        terms = [t for t in field_selector.split(",") if t]
        excluded = {t.split("!=", 1)[1] for t in terms if t.startswith("status.phase!=")}
        wanted = dict(t.split("=", 1) for t in terms if "!=" not in t and "=" in t)

        def fits(p: dict[str, Any]) -> bool:
            phase, node = p.get("status", {}).get("phase"), p.get("spec", {}).get("nodeName")
            return (phase not in excluded and wanted.get("status.phase", phase) == phase
                    and wanted.get("spec.nodeName", node) == node
                    and _selector_matches(label_selector, p["metadata"].get("labels") or {}))  # fmt: skip

        with self.api._lock:
            items = [copy.deepcopy(p) for p in self.api.pods.values() if fits(p)]
        self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    def _log(self, key: tuple[str, str], query: dict[str, str]) -> None:
        if self.api.on_log is not None:
            self.api.on_log(key)
        lines = self.api.logs.get(key, "").splitlines()
        stamp = "2026-11-25T00:00:00.000000000Z "
        text = "".join(f"{stamp if query.get('timestamps') == 'true' else ''}{line}\n" for line in lines)
        self._send(200, text, "text/plain")

    def _metrics(self, namespace: str, name: str) -> None:
        with self.api._lock:
            pod = self.api.pods.get((namespace, name))
        if pod is None or self.api.metrics_memory is None:
            return self._not_found()
        containers = [
            {"name": c["name"], "usage": {"cpu": "100m", "memory": self.api.metrics_memory}}
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

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")


def handler_for(api: FakeKubernetesApi) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``api``."""
    return type("BoundHandler", (Handler,), {"api": api})
