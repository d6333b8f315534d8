"""What the grow agent's tests share: a fake cluster whose containers rise sample by sample, and a
pod labelled for growth with a plan by annotation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, CoreV1Api

from airflow_adaptive.core.growth_plan import flat_plan
from airflow_adaptive.core.units import MIB
from airflow_adaptive.kubernetes.names import GROW_CONTAINER_ANNOTATION, GROW_LABEL, HEADROOM_ANNOTATION
from airflow_adaptive.kubernetes.resize import plan_text
from tests.fake_kubernetes import FakeKubernetesApi

NAMESPACE = "airflow"
RISE = [int((50 + 2 * k) * MIB) for k in range(60)]  # 50 MiB to 168 MiB, 2 MiB a sample


@contextmanager
def growing_api(tmp_path: Path) -> Iterator[FakeKubernetesApi]:
    """A fake cluster of one 8 GiB node whose containers rise along ``RISE``, stepped by the test."""
    with FakeKubernetesApi(tmp_path, lambda pod: max(RISE)) as fake:
        fake.add_node("node-a", memory="8Gi")
        fake.series_for = lambda pod: RISE
        fake.series_step_s = None  # the test steps the container: no race with the agent
        yield fake


def client(api: FakeKubernetesApi) -> ApiClient:
    return kube_config.new_client_from_config(str(api.kubeconfig))


def start_pod(
    api: FakeKubernetesApi, name: str, *, headroom: int | None = None, memory_policy: str = "NotRequired",
    rebound: int | None = None, sidecar: bool = False,
) -> CoreV1Api:  # fmt: skip
    core = CoreV1Api(client(api))
    # one headroom at every level
    plan = replace(flat_plan(0, headroom, 1 << 40), rebound_bytes=rebound) if headroom else None
    annotations = {GROW_CONTAINER_ANNOTATION: "base"}  # as allow_growth writes it
    annotations |= {HEADROOM_ANNOTATION: plan_text(plan)} if plan else {}
    core.create_namespaced_pod(NAMESPACE, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {GROW_LABEL: "true"}, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "base", "image": "busybox", "command": ["true"],
            "resources": {"requests": {"memory": "100Mi"}, "limits": {"memory": "100Mi"}},
            "resizePolicy": [{"resourceName": "memory", "restartPolicy": memory_policy}]},
            *([{"name": "istio-proxy", "image": "proxy", "resources": {"limits": {"memory": "1Gi"}}}] if sidecar else [])]},
    })  # fmt: skip
    core.read_namespaced_pod(name, NAMESPACE)  # Pending
    assert core.read_namespaced_pod(name, NAMESPACE).status.phase == "Running"
    return core
