"""The grow agent end to end against the fake API server: pods/resize answered as a 1.33 cluster
answers it, a container whose memory rises sample by sample in a cgroup v2 folder laid out as the
kubelet's cgroupfs driver lays it out, and the kernel's OOM kill above ``memory.max``."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
from kubernetes.client import CoreV1Api

from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.core.model import ExitReason, TaskKey
from airflow_adaptive.core.units import MIB
from airflow_adaptive.kubernetes.grow_agent import GrowthAgent
from airflow_adaptive.kubernetes.names import (
    GROW_CONTAINER_ANNOTATION,
    GROWN_ANNOTATION,
)
from airflow_adaptive.kubernetes.observe import observe_pod
from tests.fake_kubernetes import FakeKubernetesApi
from tests.kubernetes.growing import NAMESPACE, RISE, client, start_pod


def run(api: FakeKubernetesApi, agent: GrowthAgent, name: str) -> Any:
    """Sample by sample: the container moves, then the agent looks; the pod as it ended."""
    while api.step(name):
        agent.cycle()
    return CoreV1Api(client(api)).read_namespaced_pod(name, NAMESPACE)


def agent_for(api: FakeKubernetesApi) -> GrowthAgent:
    # A resize here lands at once; the rule still looks one latency ahead.
    return GrowthAgent(client(api), "node-a", api.cgroup_root, GrowthRule(latency_s=0.0, sample_s=0.5))


def test_a_pod_grows_in_place_and_completes(api: FakeKubernetesApi) -> None:
    start_pod(api, "grows", headroom=16 * MIB)
    pod = run(api, agent_for(api), "grows")
    assert pod.status.phase == "Succeeded"
    assert api.resizes and all(name == "grows" for name, _ in api.resizes)
    limit = pod.spec.containers[0].resources.limits["memory"]
    assert int(limit.removesuffix("Mi")) * MIB >= max(RISE)  # the limit followed the task up
    note = pod.metadata.annotations[GROWN_ANNOTATION]
    assert note.startswith("grown 100 MiB → ") and note.count("grown") == len(api.resizes)
    observed = observe_pod(pod, "base", TaskKey("d", "t", "r", -1, 1), "f")
    assert observed.exit_reason is ExitReason.COMPLETED and (observed.memory_limit_bytes or 0) >= max(RISE)


def test_without_the_agent_the_same_pod_is_oom_killed(api: FakeKubernetesApi) -> None:
    start_pod(api, "alone")
    while api.step("alone"):
        pass
    pod = CoreV1Api(client(api)).read_namespaced_pod("alone", NAMESPACE)
    assert pod.status.container_statuses[0].state.terminated.reason == "OOMKilled"


def test_a_deferred_resize_leaves_the_pod_to_the_oom_retry_with_nothing_lost(api: FakeKubernetesApi) -> None:
    api.resize_mode = "defer"
    start_pod(api, "deferred", headroom=16 * MIB)
    agent = agent_for(api)
    pod = run(api, agent, "deferred")
    assert len(api.resizes) == 1  # asked once, then left alone
    assert pod.status.container_statuses[0].state.terminated.reason == "OOMKilled"
    assert "not grown (Deferred" in pod.metadata.annotations[GROWN_ANNOTATION]
    observed = observe_pod(pod, "base", TaskKey("d", "t", "r", -1, 1), "f")
    # recorded as any OOM kill at its limit: the decision's retry path takes it from here
    assert observed.exit_reason is ExitReason.OOM_KILLED and observed.memory_limit_bytes == 100 * MIB
    assert agent.off_reason is None  # the next pod may still grow


@pytest.mark.parametrize(("mode", "why"), [("forbid", "forbidden"), ("absent", "Kubernetes < 1.33")])
def test_a_refusal_or_an_old_cluster_turns_growth_off_with_one_line(
    api: FakeKubernetesApi, caplog: pytest.LogCaptureFixture, mode: str, why: str
) -> None:
    api.resize_mode = mode
    start_pod(api, "refused", headroom=16 * MIB)
    agent = agent_for(api)
    with caplog.at_level(logging.WARNING, logger="airflow_adaptive.kubernetes.grow_agent"):
        pod = run(api, agent, "refused")
    assert agent.off_reason is not None and why in agent.off_reason
    assert len(api.resizes) == 1 and agent.cycle() == 0  # off: no more asks
    assert [r.message for r in caplog.records if "growth off" in r.message] == [caplog.records[0].message]
    assert pod.status.container_statuses[0].state.terminated.reason == "OOMKilled"  # as without growth
    assert GROWN_ANNOTATION not in (pod.metadata.annotations or {})


def test_an_admission_refusal_leaves_that_pod_alone_and_growth_on(
    api: FakeKubernetesApi, caplog: pytest.LogCaptureFixture
) -> None:
    # a namespace at its ResourceQuota refuses the resize with 403 too: that pod's, not RBAC's
    api.resize_mode = "quota"
    start_pod(api, "quota", headroom=16 * MIB)
    agent = agent_for(api)
    with caplog.at_level(logging.WARNING, logger="airflow_adaptive.kubernetes.grow_agent"):
        pod = run(api, agent, "quota")
    said = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and "quota resize refused by the API server (403" in said[0]  # the operator sees it
    assert agent.off_reason is None and len(api.resizes) == 1  # asked once, then left alone
    assert pod.status.container_statuses[0].state.terminated.reason == "OOMKilled"  # as without growth
    assert "not grown (403 pods" in pod.metadata.annotations[GROWN_ANNOTATION]
    api.resize_mode = "apply"
    start_pod(api, "next", headroom=16 * MIB)
    assert run(api, agent, "next").status.phase == "Succeeded"  # the next pod still grows


def test_the_api_failing_one_pods_resize_does_not_keep_the_others_waiting(api: FakeKubernetesApi) -> None:
    from kubernetes.client.exceptions import ApiException

    api.resize_failing = {"a-failing"}  # listed first
    start_pod(api, "a-failing", headroom=16 * MIB)
    start_pod(api, "b-healthy", headroom=16 * MIB)
    seconds, raised = [0.0], 0  # a second a cycle: an unanswered ask is asked again each cycle
    agent = GrowthAgent(client(api), "node-a", api.cgroup_root, GrowthRule(latency_s=0.0, sample_s=0.5),
                        clock=lambda: seconds[0])  # fmt: skip
    while api.step("b-healthy"):
        api.step("a-failing")  # killed at its limit partway: never grown
        try:
            agent.cycle()
        except ApiException:  # the cycle still says it, for the loop to log once
            raised += 1
        seconds[0] += 1.0
    asked = [name for name, _ in api.resizes]
    # every cycle that asked the failing pod raised, and asked the healthy one as well
    assert raised == asked.count("a-failing") > 0 and asked.count("b-healthy") > 0
    assert asked.index("a-failing") < asked.index("b-healthy") and agent.off_reason is None
    assert CoreV1Api(client(api)).read_namespaced_pod("b-healthy", NAMESPACE).status.phase == "Succeeded"


def test_no_growth_asks_above_the_nodes_allocatable_and_an_unread_node_is_read_again(
    api: FakeKubernetesApi,
) -> None:
    from airflow_adaptive.kubernetes.grow_agent import UNLIMITED_ROOM_BYTES

    agent = GrowthAgent(client(api), "node-b", api.cgroup_root, GrowthRule())
    assert agent.room_bytes() == UNLIMITED_ROOM_BYTES  # not there (yet): no bound, and not kept
    api.add_node("node-b", memory="16283436Ki")  # not whole MiB: an ask rounds up to whole MiB
    assert agent.room_bytes() == 16283436 * 1024 - 16283436 * 1024 % MIB


def test_a_pod_with_a_sidecar_grows_its_task_container_only(api: FakeKubernetesApi) -> None:
    # the sidecar runs beside the task: asked nothing (its cgroup is not even read)
    start_pod(api, "sidecar", headroom=16 * MIB, sidecar=True)
    pod = run(api, agent_for(api), "sidecar")
    assert pod.status.phase == "Succeeded" and api.resizes
    assert {c["name"] for _, body in api.resizes for c in body["spec"]["containers"]} == {"base"}


def test_only_the_tasks_container_is_resized_a_sidecar_keeps_its_memory() -> None:
    from kubernetes.client import models as k8s

    from airflow_adaptive.kubernetes.grow_agent import _task_containers

    not_required = [k8s.V1ContainerResizePolicy(resource_name="memory", restart_policy="NotRequired")]
    containers = [
        k8s.V1Container(name="base", resize_policy=not_required),
        k8s.V1Container(name="istio-proxy"),
    ]

    def pod(annotations: dict[str, str] | None) -> k8s.V1Pod:
        return k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(annotations=annotations), spec=k8s.V1PodSpec(containers=containers)
        )

    assert _task_containers(pod({GROW_CONTAINER_ANNOTATION: "base"})) == {"base"}
    # an annotation naming no container of the pod (a hand edit): as without it
    assert _task_containers(pod({GROW_CONTAINER_ANNOTATION: "nope"})) == {"base"}
    # a pod from before the annotation: the containers whose memory resize needs no restart
    assert _task_containers(pod(None)) == {"base"}


# 50 MiB to 166 MiB, 4 MiB a sample: more than a step (2 %) of its level a window, so not flat
CLIMB = [int((50 + 4 * k) * MIB) for k in range(30)]
PLATEAU = CLIMB + [max(CLIMB)] * 20 + [max(CLIMB) + int(4 * k * MIB) for k in range(1, 41)]  # climbs again


def run_on_a_clock(
    api: FakeKubernetesApi, name: str, series: list[int] = PLATEAU, rebound: int | None = None,
    started_at: str | None = None,
) -> tuple[GrowthAgent, Any]:  # fmt: skip
    """The plateau under an agent whose clock moves one second a sample (a try is flat only for
    as long as its clock says), asking three headrooms when it grows so that a plateau's limit is
    more than one growth step above its level and a quarter headroom more."""
    api.series_for = lambda pod: series
    seconds = [0.0]
    rule = GrowthRule(latency_s=0.0, sample_s=0.5, headrooms=3.0)
    agent = GrowthAgent(client(api), "node-a", api.cgroup_root, rule, clock=lambda: seconds[0])
    start_pod(api, name, headroom=40 * MIB, rebound=rebound)  # asks 182 MiB at 62 MiB used, 262 at 142
    if started_at is not None:  # the container started before the agent did
        api.pods[(NAMESPACE, name)]["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] = (
            started_at
        )
    while api.step(name):
        agent.cycle()
        seconds[0] += 1.0
    return agent, CoreV1Api(client(api)).read_namespaced_pod(name, NAMESPACE)


def _limits_asked(api: FakeKubernetesApi) -> list[int]:
    return [int(body["spec"]["containers"][0]["resources"]["limits"]["memory"].removesuffix("Mi"))
            for _, body in api.resizes]  # fmt: skip


def test_a_pod_that_stops_rising_is_lowered_in_place_grown_again_and_completes(
    api: FakeKubernetesApi,
) -> None:
    agent, pod = run_on_a_clock(api, "plateau")
    assert pod.status.phase == "Succeeded" and agent.off_reason is None
    asked = _limits_asked(api)
    # grown while it climbed, then asked down once to 166 + 1.25 x 40 = 216 MiB, then grown again;
    # past 200 MiB its 4 MiB a sample is within a step of its level (flat): lowered once as it
    # turns flat, then, as it creeps past what it is kept, only grown until it is still (no
    # resize each way)
    down = asked.index(216)
    assert asked[:down] == sorted(asked[:down]) and asked[down - 1] == 262 and asked.count(216) == 1
    after = asked[down + 1 :]
    assert after[0] > 216 and sum(b < a for a, b in itertools.pairwise(after)) == 1
    assert after[2:] == sorted(after[2:])
    assert int(pod.spec.containers[0].resources.limits["memory"].removesuffix("Mi")) * MIB >= max(PLATEAU)
    assert "; lowered 262 MiB → 216 MiB at " in pod.metadata.annotations[GROWN_ANNOTATION]


FALLS = CLIMB + [max(CLIMB)] * 5 + [int(20 * MIB)] * 20 + [int(30 * MIB)] * 10  # falls, rises a little


def test_a_pod_that_falls_is_lowered_by_its_familys_rebound_and_completes(api: FakeKubernetesApi) -> None:
    agent, pod = run_on_a_clock(api, "falls", FALLS, rebound=16 * MIB)
    assert pod.status.phase == "Succeeded" and agent.off_reason is None
    # grown while it climbed, lowered on its plateau to 216 MiB, then, fallen to 20 MiB for a
    # window, to 20 + 1.25 x 16 = 40 MiB; 30 MiB later is within it (30 + 10 % of 40 < 40)
    assert _limits_asked(api)[-2:] == [216, 40]
    assert "; lowered 216 MiB → 40 MiB at " in pod.metadata.annotations[GROWN_ANNOTATION]
    # without a learnt rebound the fall keeps the plateau's limit
    api.resizes.clear()
    _, pod = run_on_a_clock(api, "falls-kept", FALLS)
    assert pod.status.phase == "Succeeded" and _limits_asked(api)[-1] == 216


def test_a_pod_that_started_before_the_agent_is_grown_but_never_lowered(api: FakeKubernetesApi) -> None:
    # an agent restarted mid-run knows the most a try used only since then: a try that had fallen
    # would be lowered below its family's rebound
    _, pod = run_on_a_clock(api, "late", FALLS, rebound=16 * MIB, started_at="2020-01-01T00:00:00Z")
    asked = _limits_asked(api)
    assert pod.status.phase == "Succeeded" and asked and asked == sorted(asked)
    assert "lowered" not in pod.metadata.annotations[GROWN_ANNOTATION]


def test_a_cluster_that_refuses_a_decrease_turns_lowering_off_and_growth_goes_on(
    api: FakeKubernetesApi, caplog: pytest.LogCaptureFixture
) -> None:
    api.resize_mode = "grow-only"  # as Kubernetes 1.33: a memory-limit decrease is 422 Invalid
    with caplog.at_level(logging.WARNING, logger="airflow_adaptive.kubernetes.grow_agent"):
        agent, pod = run_on_a_clock(api, "kept")
    assert pod.status.phase == "Succeeded" and agent.off_reason is None and agent.rule.kept_headrooms == 0
    asked = _limits_asked(api)
    down = asked.index(216)  # asked down once, refused, not again: growth went on from 262
    assert asked.count(216) == 1 and asked[down - 1] == 262 and asked[down + 1] > 262
    assert asked[:down] + asked[down + 1 :] == sorted(asked[:down] + asked[down + 1 :])
    assert int(pod.spec.containers[0].resources.limits["memory"].removesuffix("Mi")) * MIB >= max(PLATEAU)
    assert [r.message for r in caplog.records] == [caplog.records[0].message]
    assert "lowering limits off" in caplog.records[0].message
    assert "memory limits cannot be decreased" in caplog.records[0].message
    assert "lowered" not in pod.metadata.annotations[GROWN_ANNOTATION]


def test_a_container_that_a_memory_resize_would_restart_is_left_alone_once(
    api: FakeKubernetesApi, caplog: pytest.LogCaptureFixture
) -> None:
    start_pod(api, "restarts", headroom=16 * MIB, memory_policy="RestartContainer")
    agent = agent_for(api)
    with caplog.at_level(logging.WARNING, logger="airflow_adaptive.kubernetes.grow_agent"):
        pod = run(api, agent, "restarts")
    assert not api.resizes and agent.off_reason is None
    assert len([r for r in caplog.records if "restarts its container" in r.message]) == 1
    assert pod.status.container_statuses[0].state.terminated.reason == "OOMKilled"  # as without growth


def test_a_pod_without_a_readable_cgroup_is_left_alone_once(
    api: FakeKubernetesApi, caplog: pytest.LogCaptureFixture
) -> None:
    start_pod(api, "hidden")
    agent = GrowthAgent(client(api), "node-a", api.workdir / "elsewhere", GrowthRule())
    with caplog.at_level(logging.WARNING):
        assert agent.cycle() == 0 and agent.cycle() == 0
    assert len([r for r in caplog.records if "left alone" in r.message]) == 1 and not api.resizes
