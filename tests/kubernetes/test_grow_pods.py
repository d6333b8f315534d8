"""Pods that may grow in place: what ``[adaptive] grow_in_place`` changes in an enforced pod, from a
family's imported memory profiles."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

from kubernetes.client import models as k8s

from airflow_adaptive import advisor as advisor_module
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.modes import Mode
from airflow_adaptive.kubernetes.names import GROW_LABEL, HEADROOM_ANNOTATION
from airflow_adaptive.kubernetes.quantity import parse_memory_bytes
from airflow_adaptive.kubernetes.resize import plan_from_text
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
from airflow_adaptive.traces.series import read_series_history
from tests.conftest import validate_pod
from tests.evaluation.test_series import family, write_folder
from tests.memory_store import InMemoryHistoryStore

USER = k8s.V1ResourceRequirements(requests={"memory": "4Gi"}, limits={"memory": "4Gi"})


def build(store: Any, *, grow: bool) -> dict[str, Any]:
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
        return validate_pod(operator.build_pod_request_obj(None, dry_run=True))


def imported(tmp_path: Path, *, profiles: bool = True) -> InMemoryHistoryStore:
    result = read_series_history(write_folder(tmp_path / "t", family(10)) / "tasks.csv")
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


def test_the_plan_annotation_reads_back_and_bad_text_only_turns_the_plan_off() -> None:
    from airflow_adaptive.core.growth_plan import GrowthPlan
    from airflow_adaptive.kubernetes.resize import plan_text

    plan = GrowthPlan(5 << 20, (1 << 20, 4 << 20, 2 << 20), 96 << 20, 7.0)
    back = plan_from_text(plan_text(plan))
    assert back == plan
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
        '{"decision":9,"rises":[1],"window_s":Infinity}', None,
    )  # fmt: skip
    for text in bad:
        assert plan_from_text(text) is None, text
