"""Pure policy: the import rule, the decision, and the termination-message parser."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from airflow_adaptive.core.decide import SizingSettings, decide_memory
from airflow_adaptive.core.model import ExitReason, MemoryRequest, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.sizing import make_predictor, predictor_names
from airflow_adaptive.core.telemetry import USAGE_PREFIX, parse_memory_rebound, parse_usage
from airflow_adaptive.core.units import GIB, MIB
from airflow_adaptive.exceptions import UnknownStrategyError

CORE = Path(__file__).resolve().parents[2] / "airflow_adaptive" / "core"
FORBIDDEN = {"airflow", "kubernetes", "sqlalchemy"}


def test_core_imports_nothing_from_airflow_kubernetes_or_sqlalchemy() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )  # fmt: skip
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
    assert len(list(CORE.rglob("*.py"))) >= 5  # the rule really looked at the package


def obs(peak: int | None, *, reason: ExitReason = ExitReason.COMPLETED, limit: int | None = None,
        kind: PeakKind = PeakKind.MEASURED, try_number: int = 1) -> Observation:  # fmt: skip
    return Observation(
        key=TaskKey("d", "t", f"r{peak}", -1, try_number),
        task_family="d.t",
        usage=Usage(peak_memory_bytes=peak, peak_kind=kind),
        exit_reason=reason,
        memory_request_bytes=limit,
        memory_limit_bytes=limit,
    )


SETTINGS = SizingSettings(min_observations=3, cap_bytes=64 * GIB)
USER = MemoryRequest(8 * GIB, 8 * GIB)


def test_too_little_history_keeps_the_users_request() -> None:
    d = decide_memory([obs(1 * GIB), obs(2 * GIB)], USER, SETTINGS)
    assert (d.memory_request_bytes, d.memory_limit_bytes, d.adaptive) == (8 * GIB, 8 * GIB, False)
    assert "fewer than 3" in d.explanation


def test_a_limit_ratio_past_any_memory_gives_the_cap_as_the_limit() -> None:
    """limit_to_request_ratio = 1e308 is a number >= 1 as the setting asks; the limit is then the cap,
    not an overflow (the product was infinity)."""
    peaks = [i * 100 * MIB for i in range(1, 21)]
    settings = SizingSettings(strategy="percentile-margin", limit_to_request_ratio=1e308)
    d = decide_memory([obs(p) for p in peaks], USER, settings)
    assert d.memory_limit_bytes == settings.cap_bytes and d.memory_request_bytes == int(1905 * MIB * 1.15)


def test_enough_history_gives_p95_plus_margin_and_says_so() -> None:
    peaks = [i * 100 * MIB for i in range(1, 21)]
    d = decide_memory([obs(p) for p in peaks], USER, SizingSettings(strategy="percentile-margin"))
    p95 = 1905 * MIB  # numpy's linear interpolation between 1900 and 2000 MiB
    assert d.memory_request_bytes == int(p95 * 1.15)
    assert d.memory_limit_bytes == d.memory_request_bytes
    assert d.strategy == "percentile-margin" and d.observations == 20
    assert "P95 of 20 peaks" in d.explanation and "+15% margin" in d.explanation


def test_oom_kill_in_history_counts_as_a_bumped_lower_bound() -> None:
    history = [obs(1 * GIB)] * 5 + [
        obs(None, reason=ExitReason.OOM_KILLED, limit=2 * GIB, kind=PeakKind.CENSORED)
    ]
    d = decide_memory(history, USER, SizingSettings(min_observations=3, strategy="pc95"))
    assert d.memory_request_bytes is not None and d.memory_request_bytes > 2 * GIB  # once needed more
    assert "lower bounds" in d.explanation


def test_previous_oom_escalates_by_the_retry_policy_and_is_capped() -> None:
    killed = obs(None, reason=ExitReason.OOM_KILLED, limit=4 * GIB, try_number=1)
    doubled = decide_memory([], USER, replace(SETTINGS, retry_policy="double"), previous_attempt=killed)
    assert doubled.memory_request_bytes == 8 * GIB and doubled.strategy.endswith("+double")
    cold = decide_memory([], USER, SETTINGS, previous_attempt=killed)  # a cold strategy's own retry doubles
    assert cold.memory_request_bytes == 8 * GIB and cold.strategy == "adaptive+strategy"
    bumped = decide_memory([], USER, SizingSettings(retry_policy="vpa-bump"), previous_attempt=killed)
    assert bumped.memory_request_bytes == int(4 * GIB * 1.2)
    capped = decide_memory([], USER, SizingSettings(cap_bytes=6 * GIB), previous_attempt=killed)
    assert capped.memory_request_bytes == 6 * GIB and "capped" in capped.explanation
    # A request above the cap was scheduled and OOM-killed: the retry never gets less than it asked.
    above = decide_memory([], USER, SizingSettings(cap_bytes=3 * GIB), previous_attempt=killed)
    assert above.memory_request_bytes == above.memory_limit_bytes == 4 * GIB
    assert "its request was above the largest allocatable 3 GiB: the retry keeps it" in above.explanation
    # Only its limit was above the cap: the retry gets the cap, which a node has.
    small_request = replace(killed, memory_request_bytes=1 * GIB)
    capped = decide_memory([], USER, SizingSettings(cap_bytes=3 * GIB), previous_attempt=small_request)
    assert (
        capped.memory_request_bytes == 3 * GIB and "capped at the largest allocatable" in capped.explanation
    )


def test_oom_without_any_memory_limit_escalates_instead_of_repeating() -> None:
    # The container had no request and no limit: the node ran out. The same unset memory would fail
    # again, so the retry gets memory of its own.
    killed = obs(None, reason=ExitReason.OOM_KILLED, limit=None, kind=PeakKind.CENSORED)
    cold = decide_memory([], MemoryRequest(), SETTINGS, previous_attempt=killed)
    assert cold.memory_request_bytes == cold.memory_limit_bytes == 64 * GIB  # nothing known: the cap
    assert "no memory limit" in cold.explanation and cold.adaptive
    warm = decide_memory([obs(3 * GIB)] * 5, MemoryRequest(), SETTINGS, previous_attempt=killed)
    history_says = decide_memory([obs(3 * GIB)] * 5, USER, SETTINGS).memory_request_bytes
    assert history_says is not None and warm.memory_request_bytes == 2 * history_says
    assert "twice what history says" in warm.explanation


def test_a_decimal_cap_is_never_exceeded_after_rounding_to_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_adaptive.config import load_settings
    from airflow_adaptive.kubernetes.quantity import format_memory, parse_memory_bytes

    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MAX_ALLOCATABLE_MEMORY", "64G")
    cap = load_settings().sizing.cap_bytes
    assert cap <= 64 * 10**9 and cap % MIB == 0
    assert parse_memory_bytes(format_memory(cap)) == cap <= 64 * 10**9


def test_history_above_the_cap_is_capped_and_tiny_history_is_floored() -> None:
    big = decide_memory([obs(100 * GIB)] * 3, USER, SETTINGS)
    assert big.memory_request_bytes == 64 * GIB
    assert "; at most the largest allocatable memory, 64 GiB -> request 64 GiB" in big.explanation
    tiny = decide_memory([obs(1000)] * 3, USER, SizingSettings(floor_bytes=64 * MIB))
    assert tiny.memory_request_bytes == 64 * MIB
    assert "; at least min_memory, 64 MiB -> request 64 MiB" in tiny.explanation
    # 100M is not a whole MiB (95.4 MiB): the explanation says what the pod's quantity holds, 96Mi.
    decimal = decide_memory([obs(1000)] * 3, USER, SizingSettings(floor_bytes=100 * 10**6))
    assert decimal.memory_request_bytes == 100 * 10**6
    assert decimal.explanation.endswith("-> request 96 MiB (user asked 8 GiB)"), decimal.explanation


def test_unknown_strategy_is_a_typed_error_naming_the_known_ones() -> None:
    with pytest.raises(UnknownStrategyError, match="percentile-margin"):
        make_predictor("nope")
    assert {"pc50", "pc95", "percentile-margin"} <= set(predictor_names())


@pytest.mark.parametrize(
    ("message", "peak"),
    [
        (f'{USAGE_PREFIX}{{"peak_memory_bytes": 123, "cpu_core_seconds": 1.5}}', 123),
        (f'user text\n{USAGE_PREFIX}{{"peak_memory_bytes": 1}}\n{USAGE_PREFIX}{{"peak_memory_bytes": 7}}', 7),
        (f'{USAGE_PREFIX}{{"peak_memory_bytes": -5}}', None),
        (f'{USAGE_PREFIX}{{"peak_memory_bytes": "12"}}', None),
        (f'{USAGE_PREFIX}{{"peak_memory_bytes": true}}', None),
        (f'{USAGE_PREFIX}{{"peak_memory_bytes": 1e30, "memory_rebound_bytes": 1e30}}', None),  # not real
        (f'{USAGE_PREFIX}{{"peak_memory_bytes": 9, "memory_rebound_bytes": 4}}', 9),
    ],
)
def test_usage_line_parsing(message: str, peak: int | None) -> None:
    usage = parse_usage(message)
    assert usage is not None and usage.peak_memory_bytes == peak
    assert usage.peak_kind is (PeakKind.MEASURED if peak else PeakKind.NONE)
    assert parse_memory_rebound(message) == (4 if 'rebound_bytes": 4' in message else None)


@pytest.mark.parametrize(
    "message", [None, "", "no usage here", f"{USAGE_PREFIX}{{not json", f"{USAGE_PREFIX}[1, 2]"]
)
def test_missing_or_malformed_usage_is_none_not_zero(message: str | None) -> None:
    assert parse_usage(message) is None


def test_a_dag_tag_sets_its_mode_whatever_its_case_and_a_bad_mode_is_an_error() -> None:
    from airflow_adaptive.core.modes import Mode, dag_mode

    assert dag_mode(["etl", "Adaptive:Enforce"]) is Mode.ENFORCE
    assert dag_mode(["ADAPTIVE:observe"]) is Mode.OBSERVE and dag_mode(["adaptive"]) is None
    with pytest.raises(ValueError, match="'enforced' is not a mode"):
        dag_mode(["Adaptive:enforced"])
