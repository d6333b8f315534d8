"""Label values the API server accepts, for any task family or strategy name (property-based)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.client import models as k8s

from airflow_adaptive.core.model import Decision
from airflow_adaptive.kubernetes.apply import apply_decision
from airflow_adaptive.kubernetes.names import FAMILY_LABEL
from airflow_adaptive.kubernetes.pods import label_value
from tests.conftest import check_label_syntax, validate_pod


@settings(max_examples=3000, deadline=None)
@given(st.text(max_size=300))
def test_any_text_becomes_a_valid_label_value(text: str) -> None:
    check_label_syntax("adaptive.airflow.io/task-family", label_value(text), is_label=True)


@settings(max_examples=300, deadline=None)
@given(family=st.text(min_size=1, max_size=300), strategy=st.text(min_size=1, max_size=80))
def test_pods_of_any_family_and_strategy_name_are_valid(family: str, strategy: str) -> None:
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p", labels={"dag_id": "d"}),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="base", image="busybox")]),
    )
    decision = Decision(2**30, 2**30, strategy, "why")
    validate_pod(apply_decision(pod, decision, family, "base", managed_by="operator"))


def test_distinct_unreadable_names_stay_distinct_and_readable_ones_stay_readable() -> None:
    assert len({label_value(t) for t in ("日本語", "中文", "...", "_", "—", "-")}) == 6
    assert label_value("genomics.align") == "genomics.align"
    assert label_value("NFCORE:ALIGN (1)").startswith("NFCOREALIGN1")
    assert len(label_value("x" * 300)) <= 63 and apply_family("x" * 300) != apply_family("x" * 299)


def apply_family(family: str) -> str:
    pod = k8s.V1Pod(metadata=k8s.V1ObjectMeta(name="p"), spec=k8s.V1PodSpec(containers=[]))
    return apply_decision(
        pod, Decision(None, None, "user", ""), family, None, managed_by="policy"
    ).metadata.labels[FAMILY_LABEL]


@given(st.text(min_size=0, max_size=600), st.text(min_size=1, max_size=5))
def test_fit_key_fits_keeps_short_names_and_separates_long_ones(text: str, suffix: str) -> None:
    from airflow_adaptive.core.normalise import MAX_KEY_CHARS, fit_key

    fitted = fit_key(text)
    clean = text.replace("\x00", "\ufffd")  # PostgreSQL text holds no NUL
    assert len(fitted) <= MAX_KEY_CHARS and "\x00" not in fitted
    assert fitted == clean if len(text) <= MAX_KEY_CHARS else fitted.startswith(clean[:200])
    long = text.ljust(MAX_KEY_CHARS, "x")
    assert fit_key(long + suffix) != fit_key(long + suffix + "!")
