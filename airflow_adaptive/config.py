"""The ``[adaptive]`` config section: declared once, read once into a frozen object."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.defaults import MAX_OOM_RATE
from airflow_adaptive.core.lff import check_failure_mode
from airflow_adaptive.core.locality import BIG_FROM_BYTES, SMALL_BELOW_BYTES
from airflow_adaptive.core.retention import DAYS_RULE, check_keep_days
from airflow_adaptive.core.sizing import RETRY_POLICIES
from airflow_adaptive.core.sizing.base import PREDICTORS
from airflow_adaptive.core.sizing.retry import STRATEGY_RETRY
from airflow_adaptive.core.units import MIB
from airflow_adaptive.exceptions import InvalidConfigError, UnknownStrategyError

SECTION = "adaptive"

# name -> (type, default, description). The provider info and the docs are generated from this.
OPTIONS: dict[str, tuple[str, str, str]] = {
    "history_conn_id": (
        "string",
        "adaptive_history_default",
        "Airflow connection whose SQLAlchemy URL (extra ``sqlalchemy_url``, or host/login/schema) reaches "
        "the history store from task processes, where Airflow blocks its own ORM.",
    ),
    "store_timeout_seconds": (
        "float",
        "5.0",
        "Connect and statement timeout for the history store. Past it the pod keeps the user's resources.",
    ),
    "strategy": ("string", "adaptive", "Registered name of the memory sizing strategy."),
    "min_observations": (
        "integer",
        "1",
        "Completed attempts of a task family needed before its memory is sized from history. Above 1, "
        "a family with fewer keeps the user's request, with no cold or warm start: fewer OOM kills for "
        "more memory (README, Memory sizing).",
    ),
    "history_window": ("integer", "500", "Most recent attempts of a task family that a decision reads."),
    "retention_attempts": (
        "integer",
        "5000",
        "``airflow-adaptive history prune`` keeps this many newest attempts per task family (0: no limit). "
        "Rollups keep their totals.",
    ),
    "retention_days": (
        "float",
        "0",
        "``airflow-adaptive history prune`` removes attempts older than this many days (0: no limit).",
    ),
    "max_oom_rate": (
        "float",
        str(MAX_OOM_RATE),
        "OOM-kill budget of the ``adaptive`` strategy, in kills per task (0.02: at most 2 %). Its rules "
        "aim at half of it, the target, so that a run's rate stays within it: per task family the cheapest "
        "rule whose replayed kill rate stays within the target, and until a family has 1 / target finished "
        "tasks, at least their log-normal prediction bound at 1 - target, at most the request (1.0: no "
        "budget). Lower: fewer kills for more memory (README, Memory sizing).",
    ),
    "warm_starts": (
        "boolean",
        "True",
        "Size a task family with no history of its own by the model of the family with the same task "
        "name (the last part of its name: ``fastqc`` in ``rnaseq.fastqc``), at most the user's request, "
        "until it has history.",
    ),
    "size_cpu": (
        "boolean",
        "False",
        "Set each pod's CPU request to ``cpu_quantile`` of the cores its family's completed attempts kept "
        "busy (at least ``min_cpu``, at most the largest profiled node's cores and the pod's own CPU "
        "limit); CPU limits stay as set.",
    ),
    "cpu_quantile": ("float", "0.9", "Quantile of recorded cores busy that ``size_cpu`` requests."),
    "min_cpu": ("string", "100m", "Smallest CPU request ``size_cpu`` sets (a Kubernetes CPU quantity)."),
    "oom_retry_policy": (
        "string",
        "strategy",
        "Memory for the try after an OOM kill: ``strategy`` (the sizing strategy's own retry: ``adaptive`` "
        "takes the cheapest of doubling, the VPA bump, its largest peak + 15 % and quantiles of its peaks "
        "above the killed limit, replayed on those peaks; doubling for the others), ``double`` or "
        "``vpa-bump`` (max(+100 MiB, x1.2)).",
    ),
    "max_allocatable_memory": (
        "string",
        "64Gi",
        "Largest memory any node can allocate (Kubernetes quantity). No decision goes above it.",
    ),
    "min_memory": ("string", "64Mi", "Smallest memory request a decision gives (Kubernetes quantity)."),
    "limit_to_request_ratio": (
        "float",
        "1.0",
        "Memory limit as a multiple of the decided request (1.0: limit = request, no overcommit).",
    ),
    "mutate_all_pods": (
        "boolean",
        "False",
        "Let the pod-mutation policy size every pod that carries Airflow's labels, not only the operator's.",
    ),
    "placement_live_load": (
        "boolean",
        "False",
        "Before placing a pod, the operator reads which node groups have an idle node, so that they may "
        "take tasks labelled for weaker groups (two list calls, shared by a machine's pods for "
        "``placement_live_load_ttl_seconds``).",
    ),
    "placement_live_load_ttl_seconds": (
        "float",
        "10.0",
        "How long the pods of one machine share a view of the idle node groups (its staleness at most); "
        "0: every pod lists the cluster itself.",
    ),
    "lff_failures": (
        "string",
        "persevere",
        "Least-finished-first's second key, failed attempts of the family: ``persevere`` (more failures "
        "first; Witt et al. found it better when tasks fail late) or ``postpone`` (fewer first).",
    ),
    "priority_classes": (
        "boolean",
        "True",
        "Give pods without a priority class one of the ``adaptive-lff-*`` PriorityClasses by their "
        "family's least-finished-first rank, when that class exists in the cluster (checked, cached).",
    ),
    "cache_root": (
        "string",
        "",
        "Node-local directory (hostPath) where shared inputs read by several tasks are staged; empty "
        "turns staging off. Mount a tmpfs there on the nodes to stage into RAM.",
    ),
    "cache_budget": ("string", "50Gi", "Bytes the staged inputs may take on one node (quantity)."),
    "staging_image": (
        "string",
        "python:3.12-slim",
        "Image of the staging init container (needs python3; with fsspec and its s3fs/gcsfs it reaches "
        "object stores, without it file paths and http(s) URLs).",
    ),
    "shared_read_bytes_per_second": (
        "float",
        "100e6",
        "What one task reads from shared storage per second: the locality weight's saving is staged bytes "
        "over this rate.",
    ),
    "small_input_below": ("string", "1M", "Inputs below this size stay on shared storage (quantity)."),
    "big_input_from": ("string", "1G", "Inputs from this size are big, below it medium (quantity)."),
    "metrics_sample_interval_seconds": (
        "float",
        "10.0",
        "How often the metrics API is sampled for containers whose command cannot be wrapped.",
    ),
    "spool_dir": (
        "string",
        "",
        "Folder for attempts that could not be recorded; they are written on the next successful access. "
        "Empty: ``$AIRFLOW_HOME/adaptive-spool``.",
    ),
}


def provider_config() -> dict[str, Any]:
    """The ``config`` entry of the provider info."""
    return {
        SECTION: {
            "description": "Adaptive memory sizing and task history for Kubernetes pods.",
            "options": {
                name: {
                    "description": description,
                    "version_added": "0.1.0",
                    "type": kind,
                    "example": None,
                    "default": default,
                }
                for name, (kind, default, description) in OPTIONS.items()
            },
        }
    }


@dataclass(frozen=True)
class StagingSettings:
    """Where and how shared inputs are staged (off while ``cache_root`` is empty)."""

    cache_root: str = ""
    budget_bytes: int = 50 * 1024**3
    image: str = "python:3.12-slim"
    shared_read_bytes_per_s: float = 100e6
    small_below_bytes: int = SMALL_BELOW_BYTES
    big_from_bytes: int = BIG_FROM_BYTES


@dataclass(frozen=True)
class AdaptiveSettings:
    """Everything the provider reads from configuration."""

    history_conn_id: str
    store_timeout_seconds: float
    history_window: int
    retention_attempts: int
    retention_days: float
    mutate_all_pods: bool
    placement_live_load: bool
    lff_failures: str
    priority_classes: bool
    metrics_sample_interval_seconds: float
    spool_dir: str
    sizing: SizingSettings
    staging: StagingSettings = field(default_factory=StagingSettings)
    placement_live_load_ttl_seconds: float = 10.0


def _raw(name: str) -> str:
    from airflow.configuration import conf

    return str(conf.get(SECTION, name, fallback=OPTIONS[name][1]))


def _number(name: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(_raw(name))
    except ValueError:
        raise InvalidConfigError(f"[{SECTION}] {name} = {_raw(name)!r} is not a {kind.__name__}") from None


def _at_least_one(name: str) -> int:
    value = int(_number(name, int))
    if value < 1:
        raise InvalidConfigError(f"[{SECTION}] {name} = {_raw(name)!r} is not an integer >= 1")
    return value


def _not_negative(name: str) -> float:
    value = float(_number(name, float))
    if not value >= 0.0:  # NaN too
        raise InvalidConfigError(f"[{SECTION}] {name} = {_raw(name)!r} is not a number of seconds >= 0")
    return value


def _cpu(name: str) -> int:
    from airflow_adaptive.kubernetes.quantity import parse_cpu_millicores

    try:
        return parse_cpu_millicores(_raw(name).strip(), what=f"[{SECTION}] {name}")
    except ValueError as err:
        raise InvalidConfigError(str(err)) from None


def _fraction(name: str) -> float:
    value = _number(name, float)
    if not 0.0 <= value <= 1.0:
        raise InvalidConfigError(f"[{SECTION}] {name} = {_raw(name)!r} is not between 0 and 1")
    return float(value)


def _quantity(name: str, at_least: int = 1) -> int:
    """A quantity of at least ``at_least`` bytes (``1m`` is a thousandth of a byte: a wrong unit),
    checked as the commands check ``--request``."""
    from airflow_adaptive.kubernetes.quantity import parse_memory_amount

    return parse_memory_amount(_raw(name), what=f"[{SECTION}] {name}", at_least=at_least)


def _days(name: str) -> float:
    """A retention in days, checked as ``history prune --keep-days`` checks it."""
    value = float(_number(name, float))
    try:
        return check_keep_days(value)
    except ValueError:
        raise InvalidConfigError(f"[{SECTION}] {name} = {_raw(name)!r} is not {DAYS_RULE}") from None


def _count(name: str) -> int:
    value = int(_number(name, int))
    if value < 0:
        raise InvalidConfigError(f"[{SECTION}] {name} = {_raw(name)!r} is not an integer >= 0 (0: no limit)")
    return value


def _flag(name: str) -> bool:
    return _raw(name).strip().lower() in {"true", "1", "yes", "on"}


def _failure_mode() -> str:
    try:
        return check_failure_mode(_raw("lff_failures").strip().lower())
    except ValueError as err:
        raise InvalidConfigError(f"[{SECTION}] lff_failures: {err}") from None


def _spool_dir() -> str:
    import os

    spool = _raw("spool_dir")
    return spool or os.path.join(
        os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "adaptive-spool"
    )


def _sizing() -> SizingSettings:
    return SizingSettings(
        strategy=_raw("strategy"),
        min_observations=_at_least_one("min_observations"),
        floor_bytes=_quantity("min_memory", MIB),
        # Whole MiB, rounded down: pod quantities are written in MiB rounded up, so a decimal
        # cap such as 64G (not a whole MiB) would otherwise be exceeded by up to 1 MiB.
        cap_bytes=_quantity("max_allocatable_memory", MIB) // MIB * MIB,
        retry_policy=_raw("oom_retry_policy"),
        limit_to_request_ratio=_number("limit_to_request_ratio", float),
        max_oom_rate=_fraction("max_oom_rate"),
        warm_starts=_flag("warm_starts"),
        size_cpu=_flag("size_cpu"),
        cpu_quantile=_fraction("cpu_quantile"),
        min_cpu_millicores=_cpu("min_cpu"),
    )


def _staging() -> StagingSettings:
    return StagingSettings(
        cache_root=_raw("cache_root").strip(),
        budget_bytes=_quantity("cache_budget"),
        image=_raw("staging_image").strip(),
        shared_read_bytes_per_s=_number("shared_read_bytes_per_second", float),
        small_below_bytes=_quantity("small_input_below"),
        big_from_bytes=_quantity("big_input_from"),
    )


def load_settings() -> AdaptiveSettings:
    """Read ``[adaptive]`` once; bad values raise a typed error naming the option."""
    return AdaptiveSettings(
        history_conn_id=_raw("history_conn_id"),
        store_timeout_seconds=_number("store_timeout_seconds", float),
        history_window=_number("history_window", int),
        retention_attempts=_count("retention_attempts"),
        retention_days=_days("retention_days"),
        mutate_all_pods=_flag("mutate_all_pods"),
        placement_live_load=_flag("placement_live_load"),
        lff_failures=_failure_mode(),
        priority_classes=_flag("priority_classes"),
        metrics_sample_interval_seconds=_number("metrics_sample_interval_seconds", float),
        spool_dir=_spool_dir(),
        sizing=_sizing(),
        staging=_staging(),
        placement_live_load_ttl_seconds=_not_negative("placement_live_load_ttl_seconds"),
    )


@functools.lru_cache(maxsize=1)
def get_settings() -> AdaptiveSettings:
    """The settings of this process (read once; ``get_settings.cache_clear()`` re-reads)."""
    return load_settings()


def check_sizing_names(settings: AdaptiveSettings) -> None:
    """Raise InvalidConfigError when ``strategy`` or ``oom_retry_policy`` names nothing registered.
    Commands call it, so a typo is an error where it was typed; pods do not: their decision fails
    open to the user's request, the reason logged once (advisor.py)."""
    sizing = settings.sizing
    try:
        PREDICTORS.get(sizing.strategy)
    except UnknownStrategyError as err:
        raise InvalidConfigError(f"[{SECTION}] strategy: {err}") from None
    if sizing.retry_policy != STRATEGY_RETRY:
        try:
            RETRY_POLICIES.get(sizing.retry_policy)
        except UnknownStrategyError as err:
            raise InvalidConfigError(f"[{SECTION}] oom_retry_policy: {err} (or {STRATEGY_RETRY!r})") from None


def settings_readable() -> bool:
    """Whether ``[adaptive]`` can be read here. Where a pod is at stake a malformed value is not an
    error: the operator leaves its pod as the user asked and records nothing, logged once (the
    commands name the option and exit 2 instead)."""
    from airflow_adaptive.exceptions import AdaptiveError
    from airflow_adaptive.failopen import first_line, warn_once

    try:
        get_settings()
    except AdaptiveError as err:
        warn_once(first_line(err, 300), "pods keep the user's resources and are not recorded")
        return False
    return True
