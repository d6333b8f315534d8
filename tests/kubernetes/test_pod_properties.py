"""Property tests over random pods (issue 16; 10,000 with ADAPTIVE_PROPERTY_EXAMPLES=5000): operator
and policy pods with odd names in any script, any quantities, existing affinities, extreme histories and every strategy are valid for the
API server (strict 1.33 schema plus label and annotation syntax), never above the cap, and building
them never raises. The history is an in-memory store per example (no database is exercised here)."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kubernetes.client import models as k8s

from airflow_adaptive import advisor as advisor_module
from airflow_adaptive.config import AdaptiveSettings, get_settings
from airflow_adaptive.core.grouping import NodeProfile, group_nodes
from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.modes import Mode
from airflow_adaptive.core.sizing import predictor_names
from airflow_adaptive.kubernetes.names import DECISION_ANNOTATION, FAMILY_LABEL, STRATEGY_ANNOTATION
from airflow_adaptive.kubernetes.pods import label_value
from airflow_adaptive.kubernetes.quantity import parse_cpu_millicores, parse_memory_bytes
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
from airflow_adaptive.policy import mutate
from tests.conftest import validate_pod
from tests.memory_store import InMemoryHistoryStore

# Per test. Building an operator pod costs KPO about 0.1 s, so CI runs 300 of each; the 10,000-pod
# run of the issue is ADAPTIVE_PROPERTY_EXAMPLES=5000 (operator and policy pods, 5,000 each).
EXAMPLES = int(os.environ.get("ADAPTIVE_PROPERTY_EXAMPLES", "300"))
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
CONFIG = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

names = st.text(min_size=1, max_size=120)  # any script, controls, emoji, 日本語
UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
quantities = st.sampled_from(sorted(UNITS)).flatmap(
    lambda unit: st.integers(min_value=1, max_value=2**50 // UNITS[unit]).map(lambda n: f"{n}{unit}")
)
peaks = st.one_of(st.integers(min_value=1, max_value=2**62), st.integers(min_value=2**20, max_value=2**36))


@st.composite
def histories(draw: Any, family: str) -> list[Observation]:
    out = []
    for n in range(draw(st.integers(min_value=0, max_value=12))):
        killed = draw(st.booleans()) and n % 3 == 0
        peak = draw(peaks)
        out.append(
            Observation(
                key=TaskKey("d", "t", f"r{n}", -1, 1),
                task_family=family,
                usage=Usage(
                    None if killed else peak,
                    10.0,
                    draw(st.floats(0, 1e6)),
                    None,
                    None,
                    PeakKind.CENSORED if killed else PeakKind.MEASURED,
                ),
                exit_reason=ExitReason.OOM_KILLED if killed else ExitReason.COMPLETED,
                exit_code=137 if killed else 0,
                memory_request_bytes=peak,
                memory_limit_bytes=peak,
                input_size_bytes=draw(st.none() | st.integers(min_value=0, max_value=2**50)),
                finished_at=T0 + timedelta(minutes=n),
            )
        )
    return out


affinities = st.none() | st.builds(
    lambda key, values, required: k8s.V1Affinity(
        node_affinity=k8s.V1NodeAffinity(
            preferred_during_scheduling_ignored_during_execution=[
                k8s.V1PreferredSchedulingTerm(
                    weight=7,
                    preference=k8s.V1NodeSelectorTerm(
                        match_expressions=[
                            k8s.V1NodeSelectorRequirement(key=key, operator="In", values=values)
                        ]
                    ),
                )
            ],
            required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(
                node_selector_terms=[
                    k8s.V1NodeSelectorTerm(
                        match_expressions=[k8s.V1NodeSelectorRequirement(key=key, operator="Exists")]
                    )
                ]
            )
            if required
            else None,
        )
    ),
    st.sampled_from(["zone", "example.com/disk", "kubernetes.io/arch"]),
    st.lists(st.sampled_from(["a", "b", "amd64"]), min_size=1, max_size=2),
    st.booleans(),
)


def settings_for(strategy: str, size_cpu: bool = False) -> AdaptiveSettings:
    base = get_settings()
    return replace(base, mode=Mode.ENFORCE, priority_classes=False,
                   sizing=replace(base.sizing, strategy=strategy, size_cpu=size_cpu))  # fmt: skip


def cpu_within(pod: k8s.V1Pod, *bounds_millicores: int | None) -> None:
    """A CPU request size_cpu set (its annotation says so) is within every known bound."""
    sized = "; cpu: P" in (pod.metadata.annotations or {}).get(DECISION_ANNOTATION, "")
    event(f"CPU request sized: {sized}")
    if not sized:
        return
    request = parse_cpu_millicores(pod.spec.containers[0].resources.requests["cpu"])
    assert all(request <= bound for bound in bounds_millicores if bound), (request, bounds_millicores)


def check(pod: k8s.V1Pod, cap_bytes: int, killed_bytes: int = 0) -> None:
    """Valid for the API server; memory we decided (not the user's own, kept) is within the cap; a
    retry's at most what a try was already killed at, where that was more (a request above the cap
    is never lowered by a retry)."""
    data = validate_pod(pod)
    assert data["metadata"]["labels"][FAMILY_LABEL] is not None  # the pod was decided, not skipped
    strategy = data["metadata"]["annotations"][STRATEGY_ANNOTATION]
    if strategy == "user":
        return
    if "+" in strategy:  # a retry: <strategy>+<retry policy>
        cap_bytes = max(cap_bytes, killed_bytes)
    for container in data["spec"]["containers"]:
        for kind in ("requests", "limits"):
            memory = ((container.get("resources") or {}).get(kind) or {}).get("memory")
            assert memory is None or parse_memory_bytes(memory) <= cap_bytes, (kind, memory)


def _largest_killed_limit(history: list[Any], user_memory: str | None) -> int:
    """The most a try died at (its limit, else its request, else the user's, as the retry reads it)."""
    user_bytes = parse_memory_bytes(user_memory) if user_memory else 0
    killed = [o.memory_limit_bytes or o.memory_request_bytes or user_bytes for o in history if o.oom_killed]
    return max(killed, default=0)


@CONFIG
@given(st.data(), names, st.sampled_from(predictor_names()), st.none() | quantities, affinities)
def test_operator_pods_are_valid_and_within_the_cap(
    data: Any, family: str, strategy: str, memory: str | None, affinity: k8s.V1Affinity | None
) -> None:
    store = InMemoryHistoryStore()
    history = data.draw(histories(family))
    store.record(history)
    current = settings_for(strategy, size_cpu=data.draw(st.booleans()))
    node_cores = data.draw(st.lists(st.integers(min_value=1, max_value=96), max_size=3))
    profiles = [
        NodeProfile(f"n{i}", {"cpu_events_per_s": 100.0 + i}, c, 2**30) for i, c in enumerate(node_cores)
    ]
    if profiles:
        store.save_nodes(profiles, group_nodes(profiles))
    cpu_limit = data.draw(st.none() | st.sampled_from(["250m", "1", "2500m", "64"]))
    limits = {k: v for k, v in (("memory", memory), ("cpu", cpu_limit)) if v}
    resources = k8s.V1ResourceRequirements(
        requests={"memory": memory} if memory else None, limits=limits or None
    )
    inputs = data.draw(st.lists(st.sampled_from(["s3://refs/genome.fa", "s3://refs/日本語.idx", "s3://x/..."]),
                                max_size=2))  # fmt: skip
    with mock.patch.object(advisor_module, "open_store", lambda _settings: store), \
         mock.patch("airflow_adaptive.operators.pod.get_settings", lambda: current):  # fmt: skip
        operator = AdaptiveKubernetesPodOperator(
            task_id="t", image="busybox", cmds=["sh", "-c", "true"], task_family=family,
            container_resources=resources, affinity=affinity, shared_inputs=inputs,
        )  # fmt: skip
        pod = operator.build_pod_request_obj(None, dry_run=True)
    check(pod, current.sizing.cap_bytes, _largest_killed_limit(history, memory))
    cpu_within(pod, max(node_cores, default=0) * 1000, parse_cpu_millicores(cpu_limit) if cpu_limit else None)


@CONFIG
@given(st.data(), names, names, names, st.sampled_from(predictor_names()), st.none() | quantities)
def test_policy_pods_are_valid_and_within_the_cap(
    data: Any, dag_id: str, task_id: str, run_id: str, strategy: str, memory: str | None
) -> None:
    store = InMemoryHistoryStore()
    history = data.draw(histories(f"{dag_id}.{task_id}"))
    store.record(history)
    current = settings_for(strategy)
    try_number = data.draw(st.integers(min_value=1, max_value=9))
    resources = (
        k8s.V1ResourceRequirements(requests={"memory": memory}, limits={"memory": memory}) if memory else None
    )
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(
            name="etl-task-abc",
            # Airflow's own make_safe_label_value can yield invalid values (":" gives "-853ae90f0"); the
            # policy never touches Airflow's labels, so the stand-ins here are valid ones.
            labels={k: label_value(v) for k, v in
                    {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "try_number": str(try_number)}.items()},
            annotations={"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "try_number": str(try_number)},
        ),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="base", image="apache/airflow", resources=resources)]),
    )  # fmt: skip
    with mock.patch.object(advisor_module, "open_store", lambda _settings: store), \
         mock.patch("airflow_adaptive.config.get_settings", lambda: current):  # fmt: skip
        mutate(pod)  # the hook's body: a failure here would be hidden by the hook's own fail-open
    check(pod, current.sizing.cap_bytes, _largest_killed_limit(history, memory))


def test_what_a_container_runs_is_read_from_any_command_shape() -> None:
    from airflow_adaptive.kubernetes.pods import tool_of

    assert tool_of("repo/bwa:1", ["sh", "-c"], ["bwa mem ref.fa"]) == ("repo/bwa:1", "bwa mem")
    assert tool_of("busybox", "true", None) == ("busybox", "true")  # a string, not a list
    assert tool_of(None, None, None) == (None, None)
