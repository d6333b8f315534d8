"""The ``[adaptive]`` config section: declared once, read once into a frozen object."""

from __future__ import annotations

import functools
import math
import posixpath
from dataclasses import dataclass, field

from airflow_adaptive.config_read import (
    at_least_one,
    checked,
    flag,
    fraction,
    growth_latency_s,
    not_negative_seconds,
    number,
    positive,
    raw,
    unknown_options,
)
from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.lff import check_failure_mode
from airflow_adaptive.core.locality import BIG_FROM_BYTES, SMALL_BELOW_BYTES
from airflow_adaptive.core.modes import FamilyRule, Mode, bare_name_notes, parse_family_rules, parse_mode
from airflow_adaptive.core.normalise import INT32
from airflow_adaptive.core.placement import DEFAULT_PLACEMENT, PLACEMENT_POLICIES
from airflow_adaptive.core.retention import DAYS_RULE, check_keep_days
from airflow_adaptive.core.sizing import RETRY_POLICIES
from airflow_adaptive.core.sizing.base import PREDICTORS
from airflow_adaptive.core.sizing.retry import STRATEGY_RETRY
from airflow_adaptive.core.units import MIB
from airflow_adaptive.exceptions import InvalidConfigError, UnknownStrategyError
from airflow_adaptive.options import SECTION

# Node folders a hostPath cache must not be (the stager writes into it, task pods mount it), and the
# trees inside which none may be either: the node's own system, devices and the kubelet's pods.
SYSTEM_DIRS = frozenset({"/", "/home", "/opt", "/srv", "/tmp", "/var", "/var/lib", "/var/log"})  # noqa: S108
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin",
                "/sys", "/usr", "/var/lib/kubelet", "/var/run")  # fmt: skip


def _system_folder(path: str) -> bool:
    return path in SYSTEM_DIRS or any(path == tree or path.startswith(tree + "/") for tree in SYSTEM_TREES)


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
    mode: Mode  # of pods the operator did not build
    placement_live_load: bool
    lff_failures: str
    priority_classes: bool
    metrics_sample_interval_seconds: float
    spool_dir: str
    sizing: SizingSettings
    staging: StagingSettings = field(default_factory=StagingSettings)
    placement_live_load_ttl_seconds: float = 10.0
    family_modes: tuple[FamilyRule, ...] = ()
    grow_in_place: bool = False  # pods the agent may grow in place (kubernetes/grow_agent.py)
    grow_resize_latency_seconds: float = 5.0
    placement_policy: str = DEFAULT_PLACEMENT  # a name in core/placement.py's PLACEMENT_POLICIES
    mode_source: str = f"[{SECTION}] mode"  # what set ``mode``, for the pod's annotation


def _cpu(name: str) -> int:
    from airflow_adaptive.kubernetes.quantity import parse_cpu_millicores

    try:
        return parse_cpu_millicores(raw(name).strip(), what=f"[{SECTION}] {name}")
    except ValueError as err:
        raise InvalidConfigError(str(err)) from None


def _quantity(name: str, at_least: int = 1) -> int:
    """A quantity of at least ``at_least`` bytes (``1m`` is a thousandth of a byte: a wrong unit),
    checked as the commands check ``--request``."""
    from airflow_adaptive.kubernetes.quantity import parse_memory_amount

    return parse_memory_amount(raw(name), what=f"[{SECTION}] {name}", at_least=at_least)


def _days(name: str) -> float:
    """A retention in days, checked as ``history prune --keep-days`` checks it."""
    value = float(number(name, float))
    try:
        return check_keep_days(value)
    except ValueError:
        raise InvalidConfigError(f"[{SECTION}] {name} = {raw(name)!r} is not {DAYS_RULE}") from None


def _count(name: str) -> int:
    return int(checked(name, int, lambda v: 0 <= v <= INT32, f"an integer from 0 (no limit) to {INT32}"))


def _ratio(name: str) -> float:
    """A limit as a multiple of the request: Kubernetes refuses a limit below the request."""
    return float(checked(name, float, lambda v: 1.0 <= v < math.inf, "a number >= 1 (limit / request)"))


def _failure_mode() -> str:
    try:
        return check_failure_mode(raw("lff_failures").strip().lower())
    except ValueError as err:
        raise InvalidConfigError(f"[{SECTION}] lff_failures: {err}") from None


def _mode() -> tuple[Mode, str]:
    """The mode of pods the operator did not build, and what set it (for their annotation)."""
    text = raw("mode")  # outside the try: importing Airflow to read it may raise ValueError too
    try:
        mode = parse_mode(text, f"[{SECTION}] mode")
    except ValueError as err:
        raise InvalidConfigError(str(err)) from None
    if mode is Mode.OFF and flag("mutate_all_pods"):  # the option mode replaced
        return Mode.ENFORCE, f"[{SECTION}] mutate_all_pods, deprecated: set mode = enforce"
    return mode, f"[{SECTION}] mode"


def _family_modes() -> tuple[FamilyRule, ...]:
    try:
        return parse_family_rules(raw("family_modes"), f"[{SECTION}] family_modes")
    except ValueError as err:
        raise InvalidConfigError(str(err)) from None


def _spool_dir() -> str:
    import os

    spool = raw("spool_dir")
    return spool or os.path.join(
        os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "adaptive-spool"
    )


def _sizing() -> SizingSettings:
    sizing = _sized()
    if sizing.floor_bytes > sizing.cap_bytes:
        raise InvalidConfigError(
            f"[{SECTION}] min_memory = {raw('min_memory')!r} is above max_allocatable_memory = "
            f"{raw('max_allocatable_memory')!r}: no decision fits between them"
        )
    return sizing


def _sized() -> SizingSettings:
    return SizingSettings(
        strategy=raw("strategy").strip(),
        min_observations=at_least_one("min_observations"),
        floor_bytes=_quantity("min_memory", MIB),
        # Whole MiB, rounded down: pod quantities are written in MiB rounded up, so a decimal
        # cap such as 64G (not a whole MiB) would otherwise be exceeded by up to 1 MiB.
        cap_bytes=_quantity("max_allocatable_memory", MIB) // MIB * MIB,
        retry_policy=raw("oom_retry_policy").strip(),
        limit_to_request_ratio=_ratio("limit_to_request_ratio"),
        max_oom_rate=fraction("max_oom_rate"),
        warm_starts=flag("warm_starts"),
        size_cpu=flag("size_cpu"),
        cpu_quantile=fraction("cpu_quantile"),
        min_cpu_millicores=_cpu("min_cpu"),
    )


def _staging() -> StagingSettings:
    staging = StagingSettings(
        cache_root=raw("cache_root").strip(),
        budget_bytes=_quantity("cache_budget"),
        image=raw("staging_image").strip(),
        shared_read_bytes_per_s=positive("shared_read_bytes_per_second", "bytes per second"),
        small_below_bytes=_quantity("small_input_below"),
        big_from_bytes=_quantity("big_input_from"),
    )
    # a hostPath must be absolute, and an init container needs an image: the API server refuses both
    if staging.cache_root and not staging.cache_root.startswith("/"):
        raise InvalidConfigError(f"[{SECTION}] cache_root = {staging.cache_root!r} is not an absolute path")
    if staging.cache_root and _system_folder("/" + posixpath.normpath(staging.cache_root).lstrip("/")):
        raise InvalidConfigError(
            f"[{SECTION}] cache_root = {staging.cache_root!r} is a system folder: staging would write into "
            "it on every node (use one of its own, e.g. /var/cache/airflow-adaptive)"
        )
    if staging.small_below_bytes > staging.big_from_bytes:
        raise InvalidConfigError(
            f"[{SECTION}] small_input_below = {raw('small_input_below')!r} is above big_input_from = "
            f"{raw('big_input_from')!r}"
        )
    if staging.cache_root and not staging.image:
        raise InvalidConfigError(f"[{SECTION}] staging_image is empty: the staging init container needs one")
    return staging


def load_settings() -> AdaptiveSettings:
    """Read ``[adaptive]`` once; bad values raise a typed error naming the option."""
    mode, mode_source = _mode()
    return AdaptiveSettings(
        history_conn_id=raw("history_conn_id"),
        store_timeout_seconds=positive("store_timeout_seconds", "seconds", most=3600.0),
        history_window=at_least_one("history_window", most=1_000_000),
        retention_attempts=_count("retention_attempts"),
        retention_days=_days("retention_days"),
        mode=mode,
        placement_live_load=flag("placement_live_load"),
        lff_failures=_failure_mode(),
        priority_classes=flag("priority_classes"),
        metrics_sample_interval_seconds=positive("metrics_sample_interval_seconds", "seconds", most=3600.0),
        spool_dir=_spool_dir(),
        sizing=_sizing(),
        staging=_staging(),
        placement_live_load_ttl_seconds=not_negative_seconds("placement_live_load_ttl_seconds"),
        family_modes=_family_modes(),
        grow_in_place=flag("grow_in_place"),
        grow_resize_latency_seconds=growth_latency_s(),
        placement_policy=raw("placement_policy").strip(),
        mode_source=mode_source,
    )


@functools.lru_cache(maxsize=1)
def get_settings() -> AdaptiveSettings:
    """The settings of this process (read once; ``get_settings.cache_clear()`` re-reads); what no
    option reads is said once."""
    from airflow_adaptive.failopen import warn_once

    settings = load_settings()
    for unread in unknown_options():
        warn_once(unread, "ignored")
    for note in bare_name_notes(settings.family_modes):
        warn_once(note, "the rule is kept as written")
    return settings


def check_sizing_names(settings: AdaptiveSettings) -> None:
    """Raise InvalidConfigError when ``placement_policy``, ``strategy`` or ``oom_retry_policy`` names
    nothing registered.
    Commands call it, so a typo is an error where it was typed; pods do not: their decision fails
    open to the user's request, the reason logged once (advisor.py)."""
    sizing = settings.sizing
    try:
        PLACEMENT_POLICIES.get(settings.placement_policy)
    except UnknownStrategyError as err:
        raise InvalidConfigError(f"[{SECTION}] placement_policy: {err}") from None
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
