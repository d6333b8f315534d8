"""``normalise``'s fast path (``is_normal``) against the field-by-field checks, over arbitrary attempts."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.normalise import _fitted, is_normal, normalise

TEXT = st.one_of(st.text(max_size=8), st.text(min_size=240, max_size=300), st.just("a\x00b"))
NUMBER: Any = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=0, max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=1e6),
)
WHEN = st.one_of(
    st.none(), st.datetimes(), st.datetimes(timezones=st.just(timezone.utc)), st.just("2026-01-01")
)


@st.composite
def attempts(draw: st.DrawFn) -> Observation:
    key = TaskKey(draw(TEXT), draw(TEXT), draw(TEXT), draw(st.integers(-1, 5)), draw(st.integers(1, 3)))
    n: list[Any] = [draw(NUMBER) for _ in range(9)]  # any number where a count is expected: on purpose
    usage = Usage(n[0], n[1], n[2], n[3], n[4], peak_kind=draw(st.sampled_from(PeakKind)))
    return Observation(
        key,
        draw(TEXT),
        usage,
        draw(st.sampled_from(ExitReason)),
        n[5],
        n[6],
        n[7],
        n[8],
        node_name=draw(st.one_of(st.none(), TEXT)),
        finished_at=cast(Any, draw(WHEN)),  # text too: a timestamp kept as text
        strategy=draw(st.one_of(st.none(), TEXT)),
        explanation=draw(st.one_of(st.none(), TEXT)),
        user_request_bytes=draw(NUMBER),
    )


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(attempts())
def test_the_fast_path_never_skips_a_fix_and_normal_is_a_fixed_point(obs: Observation) -> None:
    if is_normal(obs):
        assert _fitted(obs) == obs  # nothing the checks would change was let through
        assert normalise(obs) is obs
    fixed = normalise(obs)
    assert is_normal(fixed)  # what normalise returns takes the fast path next time
    assert normalise(fixed) is fixed


def test_an_imported_attempt_is_normal_as_it_is() -> None:
    obs = Observation(
        TaskKey("trace", "FASTQC", "trace:a.csv@0123456789", 7, 1),
        "FASTQC",
        Usage(1_000_000, 12.5, 10.0, 5, 6, PeakKind.MEASURED),
        ExitReason.COMPLETED,
        0,
        2**30,
        2**30,
        finished_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )
    assert is_normal(obs) and normalise(obs) is obs
    assert not is_normal(Observation(obs.key, obs.task_family, Usage(2**50), obs.exit_reason))
