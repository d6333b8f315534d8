"""Rows of the provider's tables to core values and back; a malformed row is skipped, never read as 0."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, fields
from datetime import datetime, timezone
from operator import attrgetter
from typing import Any

from airflow_adaptive.core.fitted_model import FittedModel
from airflow_adaptive.core.grouping import NodeProfile
from airflow_adaptive.core.growth_plan import PROFILE_FRACTIONS
from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.node_groups import StoredNode
from airflow_adaptive.core.rollup import DayKey, DayTotals, FamilyRollup
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.store.api import FamilyState

log = logging.getLogger(__name__)

KEY_COLUMNS = ("dag_id", "task_id", "run_id", "map_index", "try_number")
ROLLUP_COLUMNS = tuple(f.name for f in fields(FamilyRollup) if f.name != "task_family")


# Each column of adaptive_task_attempt read off an attempt; attrgetter runs in C, so a column of a
# million attempts is one map() call. finished_at is set on every attempt by then: recording stamps
# one without a time of its own (recording.py:_with_time).
_ATTEMPT_COLUMNS: dict[str, Callable[[Observation], Any]] = {
    "dag_id": attrgetter("key.dag_id"),
    "task_id": attrgetter("key.task_id"),
    "run_id": attrgetter("key.run_id"),
    "map_index": attrgetter("key.map_index"),
    "try_number": attrgetter("key.try_number"),
    "task_family": attrgetter("task_family"),
    "memory_request_bytes": attrgetter("memory_request_bytes"),
    "memory_limit_bytes": attrgetter("memory_limit_bytes"),
    "peak_memory_bytes": attrgetter("usage.peak_memory_bytes"),
    "peak_kind": attrgetter("usage.peak_kind.value"),
    "cpu_core_seconds": attrgetter("usage.cpu_core_seconds"),
    "wall_seconds": attrgetter("usage.wall_seconds"),
    "read_bytes": attrgetter("usage.read_bytes"),
    "write_bytes": attrgetter("usage.write_bytes"),
    "input_size_bytes": attrgetter("input_size_bytes"),
    "node_name": attrgetter("node_name"),
    "exit_reason": attrgetter("exit_reason.value"),
    "exit_code": attrgetter("exit_code"),
    "strategy": attrgetter("strategy"),
    "explanation": attrgetter("explanation"),
    "user_request_bytes": attrgetter("user_request_bytes"),
    "image": attrgetter("image"),
    "program": attrgetter("program"),
    "memory_profile": lambda o: list(o.memory_profile_s) if o.memory_profile_s else None,
    "memory_rebound_bytes": attrgetter("memory_rebound_bytes"),
    "finished_at": attrgetter("finished_at"),
}


def attempt_values(obs: Observation) -> dict[str, Any]:
    """The attempt's row of ``adaptive_task_attempt``."""
    return {name: values[0] for name, values in attempt_columns([obs]).items()}


def attempt_columns(observations: Sequence[Observation]) -> dict[str, list[Any]]:
    """The attempts' rows of ``adaptive_task_attempt``, a column at a time."""
    return {name: list(map(get, observations)) for name, get in _ATTEMPT_COLUMNS.items()}


def _utc(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


def _nonnegative(value: Any, kind: type) -> Any:
    if value is None:
        return None
    number = kind(value)
    if number < 0:
        raise ValueError(f"negative value {value!r}")
    return number


def observation(row: Any) -> Observation:
    finished = row.finished_at
    if finished is not None and not isinstance(finished, datetime):
        raise TypeError(f"finished_at is not a time: {finished!r}")
    return Observation(
        key=TaskKey(row.dag_id, row.task_id, row.run_id, int(row.map_index), int(row.try_number)),
        task_family=row.task_family,
        usage=Usage(
            peak_memory_bytes=_nonnegative(row.peak_memory_bytes, int),
            cpu_core_seconds=_nonnegative(row.cpu_core_seconds, float),
            wall_seconds=_nonnegative(row.wall_seconds, float),
            read_bytes=_nonnegative(row.read_bytes, int),
            write_bytes=_nonnegative(row.write_bytes, int),
            peak_kind=PeakKind(row.peak_kind),
        ),
        exit_reason=ExitReason.parse(row.exit_reason),
        exit_code=row.exit_code,
        memory_request_bytes=_nonnegative(row.memory_request_bytes, int),
        memory_limit_bytes=_nonnegative(row.memory_limit_bytes, int),
        input_size_bytes=_nonnegative(row.input_size_bytes, int),
        node_name=row.node_name,
        finished_at=_utc(finished),
        strategy=row.strategy,
        explanation=row.explanation,
        user_request_bytes=_nonnegative(row.user_request_bytes, int),
        image=getattr(row, "image", None),  # absent while a migration rebuilds before they existed
        program=getattr(row, "program", None),
        memory_profile_s=_profile(getattr(row, "memory_profile", None)),
        memory_rebound_bytes=_rebound(getattr(row, "memory_rebound_bytes", None)),
    )


def _rebound(value: Any) -> int | None:
    """A stored rebound, or None when there is none or it is not a byte count (the attempt stays)."""
    return value if isinstance(value, int) and value >= 0 else None


def _profile(value: Any) -> tuple[float, ...] | None:
    """A stored profile, or None when there is none or it is not one non-negative, ascending time per profile step."""
    if not isinstance(value, list) or len(value) != len(PROFILE_FRACTIONS):
        return None
    try:
        times = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return None
    ordered = times[0] >= 0 and all(a <= b for a, b in itertools.pairwise(times))
    return times if ordered else None


def observations(rows: Iterable[Any]) -> list[Observation]:
    result = []
    for row in rows:
        try:
            result.append(observation(row))
        except (ValueError, TypeError, OverflowError) as err:
            log.warning("skipping malformed history row id=%s: %s", getattr(row, "id", "?"), err)
    return result


DAY_KEYS = ("task_family", "dag_id", "day")


def day_rows(totals: dict[DayKey, DayTotals]) -> list[dict[str, Any]]:
    return [
        {"task_family": family, "dag_id": dag_id, "day": day, **asdict(t)}
        for (family, dag_id, day), t in sorted(totals.items())
    ]


def family_values(state: FamilyState, *, with_model: bool = True) -> dict[str, Any]:
    values = {name: getattr(state.rollup, name) for name in ROLLUP_COLUMNS}
    values["peaks"] = state.rollup.peaks.to_json()
    if with_model:
        values["model"] = asdict(state.model) if state.model is not None else None
    return values


def _model(data: Any) -> FittedModel | None:
    """A stored model, or None when the document is missing or not one (it is refitted then)."""
    if not isinstance(data, dict):
        return None
    try:
        return FittedModel(**data)
    except TypeError:
        return None


def family_state(row: Any) -> FamilyState:
    values = {name: getattr(row, name) for name in ROLLUP_COLUMNS}
    values["last_finished_at"] = _utc(row.last_finished_at)
    values["peaks"] = LogHistogram(row.peaks if isinstance(row.peaks, dict) else None)
    for name in ROLLUP_COLUMNS:
        if values[name] is None and name not in ("last_finished_at", "image", "program"):
            values[name] = 0
    return FamilyState(FamilyRollup(row.task_family, **values), _model(row.model))


def node_values(
    profile: NodeProfile, group_id: int | None, ranks: dict[str, int] | None, now: datetime
) -> dict[str, Any]:
    return {
        "node": profile.node,
        "benchmarks": dict(profile.benchmarks),
        "benchmark_noise": dict(profile.noise),
        "cores": profile.cores,
        "memory_bytes": profile.memory_bytes,
        "capabilities": sorted(profile.capabilities),
        "profiled_at": now,
        "group_id": group_id,
        "group_ranks": ranks,
        "grouped_at": now,
    }


def stored_node(row: Any) -> StoredNode:
    profile = NodeProfile(
        row.node, dict(row.benchmarks or {}), row.cores, row.memory_bytes, frozenset(row.capabilities or []),
        dict(row.benchmark_noise or {}),
    )  # fmt: skip
    return StoredNode(profile, row.group_id, dict(row.group_ranks or {}), _utc(row.profiled_at))
