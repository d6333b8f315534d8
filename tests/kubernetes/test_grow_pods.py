"""Pods that may grow in place: what ``[adaptive] grow_in_place`` changes in an enforced pod, from a
family's imported memory profiles."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from kubernetes.client import models as k8s

from airflow_adaptive import advisor as advisor_module
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.modes import Mode
from airflow_adaptive.kubernetes.names import GROW_CONTAINER_ANNOTATION, GROW_LABEL, HEADROOM_ANNOTATION
from airflow_adaptive.kubernetes.quantity import parse_memory_bytes
from airflow_adaptive.kubernetes.resize import plan_from_text
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
from airflow_adaptive.traces.series import read_series_history
from tests.conftest import validate_pod
from tests.evaluation.test_series import family, write_folder
from tests.memory_store import InMemoryHistoryStore

USER = k8s.V1ResourceRequirements(requests={"memory": "4Gi"}, limits={"memory": "4Gi"})


def build(store: Any, *, grow: bool, context: Any = None) -> dict[str, Any]:
    current = replace(get_settings(), mode=Mode.ENFORCE, priority_classes=False, grow_in_place=grow)
    with mock.patch.object(advisor_module, "open_store", lambda _settings: store), \
         mock.patch("airflow_adaptive.operators.pod.get_settings", lambda: current):  # fmt: skip
        operator = AdaptiveKubernetesPodOperator(
            task_id="t",
            image="busybox",
            cmds=["sh", "-c", "true"],
            task_family="wf:align",
            container_resources=USER,
        )
        return validate_pod(operator.build_pod_request_obj(context, dry_run=True))


def imported(
    tmp_path: Path, *, profiles: bool = True, tasks: int = 10, series: dict[str, list[float]] | None = None
) -> InMemoryHistoryStore:
    result = read_series_history(write_folder(tmp_path / "t", series or family(tasks)) / "tasks.csv")
    store = InMemoryHistoryStore()
    store.record([o if profiles else replace(o, memory_profile_s=None) for o in result.observations])
    return store


def memory(pod: dict[str, Any], kind: str) -> int:
    return parse_memory_bytes(pod["spec"]["containers"][0]["resources"][kind]["memory"])


def test_a_family_with_profiles_starts_below_the_decision_and_tells_the_agent_its_headroom(
    tmp_path: Path,
) -> None:
    store = imported(tmp_path)
    static = build(store, grow=False)
    grown = build(store, grow=True)
    assert (
        GROW_LABEL not in static["metadata"]["labels"]
        and "resizePolicy" not in static["spec"]["containers"][0]
    )
    assert grown["metadata"]["labels"][GROW_LABEL] == "true"
    # the agent resizes the task's container only, not a sidecar
    assert (
        grown["metadata"]["annotations"][GROW_CONTAINER_ANNOTATION] == grown["spec"]["containers"][0]["name"]
    )
    assert grown["spec"]["containers"][0]["resizePolicy"] == [
        {"resourceName": "memory", "restartPolicy": "NotRequired"}
    ]
    # the family sits at 30 % of its peak for its first 100 s: the start is well below the decision
    assert memory(grown, "limits") == memory(grown, "requests") < 0.6 * memory(static, "limits")
    plan = plan_from_text(grown["metadata"]["annotations"][HEADROOM_ANNOTATION])
    assert (
        plan is not None and abs(plan.decision_bytes - memory(static, "limits")) < 1 << 20
    )  # the decision, unrounded
    assert 0 < plan.headroom_at(memory(grown, "limits")) < memory(static, "limits") / 2
    assert "grows in place" in grown["metadata"]["annotations"]["adaptive.airflow.io/decision"]


def test_without_profiles_the_pod_keeps_the_decision_and_may_still_grow(tmp_path: Path) -> None:
    store = imported(tmp_path, profiles=False)
    static, grown = build(store, grow=False), build(store, grow=True)
    assert memory(grown, "limits") == memory(static, "limits")
    assert grown["metadata"]["labels"][GROW_LABEL] == "true"
    assert HEADROOM_ANNOTATION not in grown["metadata"]["annotations"]


def test_a_family_at_its_peak_from_the_start_is_held_at_the_decision_and_lowered_once_flat(
    tmp_path: Path,
) -> None:
    # ten tasks at 1,000-1,018 MB from their first sample: no start below the decision can hold them
    at_once = {f"align-{i}": [1000.0 + 2 * i] * 30 for i in range(10)}
    store = imported(tmp_path, series=at_once)
    static, grown = build(store, grow=False), build(store, grow=True)
    assert memory(grown, "limits") == memory(static, "limits")
    plan = plan_from_text(grown["metadata"]["annotations"][HEADROOM_ANNOTATION])
    assert plan is not None and plan.start_bytes == plan.decision_bytes and not plan.young
    assert 1_000_000_000 <= plan.rescue_above_bytes <= 1_018_000_000  # its peaks at the budget
    assert plan.flat_rises_bytes and plan.rises_bytes  # lowered once flat, and grown from there
    explained = grown["metadata"]["annotations"]["adaptive.airflow.io/decision"]
    assert "only as a rescue" in explained and "once usage stops rising, lowered" in explained


def test_a_young_family_starts_low_and_tells_the_agent_its_headroom(tmp_path: Path) -> None:
    store = imported(tmp_path, tasks=2)  # two profiles: too few to say where its tasks rise
    static, grown = build(store, grow=False), build(store, grow=True)
    plan = plan_from_text(grown["metadata"]["annotations"][HEADROOM_ANNOTATION])
    assert plan is not None and plan.young
    at_start = plan.headroom_at(plan.start_bytes, 0.0)
    assert 0 <= memory(static, "limits") - plan.decision_bytes < 1 << 20  # the pod's, rounded up to MiB
    # where its first window's memory and the headroom there fit under the decision, it starts there
    assert plan.start_bytes + at_start < memory(static, "limits")
    assert abs(memory(grown, "limits") - plan.start_bytes) < 1 << 20  # pods round up to whole MiB
    assert min(plan.rises_bytes) >= 0.1 * plan.decision_bytes  # at least a rescue's headroom
    assert "is kept" in grown["metadata"]["annotations"]["adaptive.airflow.io/decision"]


def test_the_plan_annotation_reads_back_and_bad_text_only_turns_the_plan_off() -> None:
    from airflow_adaptive.core.growth_plan import GrowthPlan
    from airflow_adaptive.kubernetes.resize import plan_text

    plan = GrowthPlan(5 << 20, (1 << 20, 4 << 20, 2 << 20), 96 << 20, 7.0)
    back = plan_from_text(plan_text(plan))
    assert back == plan
    with_flat = GrowthPlan(5 << 20, (1 << 20, 4 << 20, 2 << 20), 96 << 20, 7.0, None, (1 << 20,) * 3)
    assert plan_from_text(plan_text(with_flat)) == with_flat
    floored = GrowthPlan(5 << 20, (1 << 20,), 96 << 20, 7.0, floor_bytes=64 << 20)
    assert plan_from_text(plan_text(floored)) == floored
    assert plan_from_text(plan_text(floored).replace(str(64 << 20), '"64Mi"')) is None
    young = GrowthPlan(5 << 20, (4 << 20,), 96 << 20, 7.0, young=True)
    assert plan_from_text(plan_text(young)) == young and not back.young
    # a young plan written before the flag started at its decision
    assert plan_from_text('{"start":9,"decision":9,"rises":[1]}') == GrowthPlan(9, (1,), 9, young=True)
    # a rescue plan: no headroom, rescued above 7 bytes; not young, though it starts at the decision
    rescue = GrowthPlan(9, (), 9, rescue_above_bytes=7)
    assert plan_text(rescue) == '{"start":9,"decision":9,"rises":[],"window_s":0.0,"rescue_above":7}'
    assert plan_from_text(plan_text(rescue)) == rescue and rescue.rescue_only
    # a held plan: its headrooms under keys of their own, so that an older agent reads a rescue
    # plan (held, never lowered) and not a young one; not young, though it starts at the decision
    held = GrowthPlan(9, (1,), 9, 2.0, None, (1,), rescue_above_bytes=7)
    held_text = plan_text(held)
    assert '"rises":[]' in held_text and '"held_rises":[1]' in held_text and '"held_flat":[1]' in held_text
    assert plan_from_text(held_text) == held and not held.rescue_only
    assert plan_from_text(held_text.replace('"held_flat":[1],', "")) == replace(held, flat_rises_bytes=())
    # no headroom and no rescue level; a rescue level at or above the decision; headrooms of a held
    # plan where an older agent would read them, or without a rescue level; a young held plan
    for held_bad in (
        '{"start":9,"decision":9,"rises":[]}',
        '{"start":9,"decision":9,"rises":[],"rescue_above":9}',
        '{"start":9,"decision":9,"rises":[1],"rescue_above":7}',
        '{"start":9,"decision":9,"rises":[],"flat":[1],"held_rises":[1],"rescue_above":7}',
        '{"start":9,"decision":9,"rises":[1],"held_rises":[1]}',
        '{"start":9,"decision":9,"rises":[],"held_rises":[1],"rescue_above":7,"young":true}',
    ):
        assert plan_from_text(held_bad) is None, held_bad
    # levels of 32 MiB: at 70 MiB, the third; within the first 7 s, the largest up to the level
    # (or the start, where higher): 4 MiB at 70 MiB, 1 MiB at 20 MiB
    assert back.headroom_at(70 << 20) == 2 << 20 and back.headroom_at(70 << 20, elapsed_s=1.0) == 4 << 20
    assert back.headroom_at(20 << 20, elapsed_s=1.0) == 1 << 20
    # the provider's older plain headroom, a hand edit, non-finite or huge numbers, booleans, a
    # string, a negative or missing field: rescue only, no error
    bad = (
        "16777216", "{", '{"decision":0,"rises":[1]}', '{"decision":9,"rises":[-1]}',
        '{"start":-1,"decision":9,"rises":[1]}', '{"rises":[1]}', '{"decision":Infinity,"rises":[1]}',
        '{"decision":9,"rises":[1e400]}', '{"decision":9,"rises":[NaN]}',
        '{"decision":1' + "0" * 400 + ',"rises":[1]}', '{"decision":true,"rises":[true]}',
        '{"decision":9,"rises":"123"}', '{"decision":9,"rises":{"1":2}}',
        '{"decision":9,"rises":[1],"window_s":Infinity}', '{"decision":9,"rises":[1],"flat":[1,2]}',
        '{"decision":9,"rises":[1],"flat":[-1]}', '{"decision":9,"rises":[1],"flat":7}', None,
        '{"decision":9,"rises":[1],"young":1}', '{"decision":9,"rises":[1],"young":"true"}',
        "[" * 100_000,  # nested deeper than the parser goes
    )  # fmt: skip
    for text in bad:
        assert plan_from_text(text) is None, text


def test_a_family_whose_tasks_fall_tells_the_agent_its_rebound(tmp_path: Path) -> None:
    # each task falls to 10 % of its peak after it and rises again by 5 % of it: imported, each
    # attempt records that rebound, and the plan the pod carries has one
    tasks = {
        name: [*series, *[0.1 * max(series)] * 10, *[0.15 * max(series)] * 5]
        for name, series in family(10).items()
    }
    result = read_series_history(write_folder(tmp_path / "t", tasks) / "tasks.csv")
    for o in result.observations:
        assert o.memory_rebound_bytes == pytest.approx(0.05 * (o.usage.peak_memory_bytes or 0), rel=1e-6)
    store = InMemoryHistoryStore()
    store.record(result.observations)
    plan = plan_from_text(build(store, grow=True)["metadata"]["annotations"][HEADROOM_ANNOTATION])
    assert plan is not None and plan.rebound_bytes is not None
    assert 0 < plan.rebound_bytes < plan.decision_bytes / 10
    assert "above its least once it falls below half its most" in build(store, grow=True)["metadata"][
        "annotations"]["adaptive.airflow.io/decision"]  # fmt: skip
    assert plan_from_text(build(imported(tmp_path / "no"), grow=True)["metadata"]["annotations"][
        HEADROOM_ANNOTATION]).rebound_bytes is None  # type: ignore[union-attr]  # fmt: skip


@pytest.mark.parametrize("reason", ["Completed", "OOMKilled"])
def test_the_recorded_attempt_keeps_the_rebound_the_wrapper_reported(reason: str) -> None:
    from datetime import datetime, timezone

    from airflow_adaptive.core.model import TaskKey
    from airflow_adaptive.core.telemetry import USAGE_PREFIX
    from airflow_adaptive.kubernetes.observe import observe_pod

    profile = ",".join(str(float(k)) for k in range(50))
    message = f'{USAGE_PREFIX}{{"v":1,"exit_code":0,"peak_memory_bytes":900,"memory_profile_s":[{profile}],' \
              '"memory_rebound_bytes":120}'  # fmt: skip
    now = datetime(2026, 12, 3, tzinfo=timezone.utc)
    state = k8s.V1ContainerState(terminated=k8s.V1ContainerStateTerminated(
        exit_code=0 if reason == "Completed" else 137, reason=reason, message=message,
        started_at=now, finished_at=now))  # fmt: skip
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p"),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="base")]),
        status=k8s.V1PodStatus(
            phase="Succeeded" if reason == "Completed" else "Failed",
            container_statuses=[k8s.V1ContainerStatus(
                name="base", state=state, image="busybox", image_id="", ready=False, restart_count=0)],
        ),
    )  # fmt: skip
    observed = observe_pod(pod, "base", TaskKey("d", "t", "r", -1, 1), "f")
    killed = reason == "OOMKilled"
    assert observed.memory_rebound_bytes == (None if killed else 120)  # a killed try's shape is cut short
    assert (observed.memory_profile_s is None) == killed


def test_the_retry_of_a_try_killed_below_its_decision_starts_at_its_retry_decision(tmp_path: Path) -> None:
    """As the replay's grow: growth could not save the killed try (no room, a jump within the
    latency, or no agent on its node), so its retry starts at the retry's decision, rescued only."""
    from types import SimpleNamespace

    from airflow_adaptive.core.model import ExitReason, Observation, TaskKey, Usage

    store = imported(tmp_path)
    first = build(store, grow=True)
    start = memory(first, "limits")
    key = TaskKey("wf", "t", "run-1", -1, 1)
    store.record(
        [Observation(key, "wf:align", Usage(start), ExitReason.OOM_KILLED, 137, memory_limit_bytes=start)]
    )
    ti = SimpleNamespace(dag_id="wf", task_id="t", run_id="run-1", map_index=-1, try_number=2)
    retry = build(store, grow=True, context={"ti": ti, "run_id": "run-1", "dag": SimpleNamespace()})
    decision = retry["metadata"]["annotations"]["adaptive.airflow.io/decision"]
    assert "OOM-killed" in decision and "grows in place" not in decision, decision
    assert memory(retry, "limits") > start and retry["metadata"]["labels"][GROW_LABEL] == "true"  # rescued
    assert HEADROOM_ANNOTATION not in retry["metadata"]["annotations"]


def test_a_pods_note_gives_the_headroom_from_its_starts_level_to_the_largest() -> None:
    from airflow_adaptive.core.growth_plan import GrowthPlan
    from airflow_adaptive.kubernetes.resize import allow_growth

    def note(plan: GrowthPlan) -> str:
        pod = k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(name="p"),
            spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="base", resources=USER)]),
        )
        allow_growth(pod, "base", plan)
        return str(pod.metadata.annotations["adaptive.airflow.io/decision"])

    by_level = tuple((k + 1) << 24 for k in range(50))  # 16 MiB a level, up to 800 MiB
    young = GrowthPlan(200 << 20, by_level, 4 << 30, 7.0, young=True)  # a level is 4 GiB / 50: 81.9 MiB
    assert "starts at 200 MiB, is kept 48 MiB to 800 MiB above usage up to 4 GiB" in note(young)
    assert "is kept 16 MiB above usage" in note(GrowthPlan(64 << 20, (16 << 20,), 4 << 30, 7.0, young=True))
    held = GrowthPlan(4 << 30, (0,) * 50, 4 << 30, 7.0, rescue_above_bytes=3 << 30)  # no task rose
    assert "grown from there back to the decision, 2 % above usage (learnt" in note(held), note(held)
