"""The node profile JSON: a list of ``{"node", "cores"?, "memory_bytes"?, "benchmarks": {feature: number},
"benchmark_cv"?: {feature: number}, "repeats"?: runs}`` (``profile-node`` writes the mean of its
runs and their coefficient of variation)."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from airflow_adaptive.core.grouping import Grouping, NodeProfile
from airflow_adaptive.exceptions import AdaptiveError


class ProfileFormatError(AdaptiveError, ValueError):
    """A node profile file is not the documented shape."""


def profile_from_json(raw: Any, where: str) -> NodeProfile:
    if not isinstance(raw, dict) or not isinstance(raw.get("node"), str) or not raw["node"]:
        raise ProfileFormatError(f"{where}: a profile needs a non-empty string 'node'")
    benchmarks = raw.get("benchmarks")
    if not isinstance(benchmarks, dict) or not benchmarks:
        raise ProfileFormatError(f"{where} ({raw['node']}): 'benchmarks' must be a non-empty object")
    values = _numbers(benchmarks, f"{where} ({raw['node']}): benchmark")
    for fact in ("cores", "memory_bytes"):
        if raw.get(fact) is not None and (
            isinstance(raw[fact], bool) or not isinstance(raw[fact], int) or not 0 < raw[fact] <= 2**62
        ):
            raise ProfileFormatError(
                f"{where} ({raw['node']}): {fact!r} must be a positive whole number (at most 2^62)"
            )
    capabilities = raw.get("capabilities", [])
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise ProfileFormatError(f"{where} ({raw['node']}): 'capabilities' must be a list of strings")
    return NodeProfile(
        raw["node"], values, raw.get("cores"), raw.get("memory_bytes"), frozenset(capabilities),
        _noise(raw, values, f"{where} ({raw['node']})"),
    )  # fmt: skip


def _numbers(raw: dict[Any, Any], what: str) -> dict[str, float]:
    values = {}
    for feature, value in raw.items():
        number = _finite(value)
        if number is None or number < 0:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise ProfileFormatError(f"{what} {feature!r} = {shown} is not a number >= 0")
        values[str(feature)] = number
    return values


def _finite(value: object) -> float | None:
    """A JSON number as a finite float; None for anything else (JSON's integers have no bound)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _noise(raw: dict[str, Any], benchmarks: dict[str, float], where: str) -> dict[str, float]:
    """Each benchmark's relative standard error: its runs' coefficient of variation / sqrt(runs)."""
    repeats = raw.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ProfileFormatError(f"{where}: 'repeats' must be a positive whole number")
    cvs = raw.get("benchmark_cv") or {}
    if not isinstance(cvs, dict):
        raise ProfileFormatError(f"{where}: 'benchmark_cv' must be an object")
    unknown = sorted(set(map(str, cvs)) - set(benchmarks))
    if unknown:
        raise ProfileFormatError(f"{where}: 'benchmark_cv' names no benchmark {unknown[0]!r}")
    return {f: cv / math.sqrt(repeats) for f, cv in _numbers(cvs, f"{where}: benchmark_cv").items()}


def load_profiles(path: str | os.PathLike[str]) -> list[NodeProfile]:
    name = os.fspath(path)
    try:
        if name == "-":  # piped: ... | airflow-adaptive groups --profiles -
            name = "stdin"
            data = json.load(sys.stdin.buffer)  # bytes: JSON's own UTF-8/16/32, not the locale's
        else:
            with open(name, encoding="utf-8") as handle:
                data = json.load(handle)
    except OSError as err:
        raise ProfileFormatError(f"{name}: cannot read node profiles ({err})") from None
    except (ValueError, UnicodeDecodeError) as err:  # a CSV of benchmark results; an int past 4,300 digits
        raise ProfileFormatError(
            f"{name}: not JSON node profiles ({err}); expected what 'airflow-adaptive profile-node --json' "
            "writes, one machine's or a list of them"
        ) from None
    return profiles_in(data, name)


def profiles_in(data: Any, name: str) -> list[NodeProfile]:
    """The profiles in a file's parsed JSON: a list, one profile, or ``{profiles: [...]}``."""
    if isinstance(data, dict) and "profiles" in data:
        data = data["profiles"]
    elif isinstance(data, dict) and "node" in data:  # one machine's, as profile-node --json writes it
        data = [data]
    if not isinstance(data, list) or not data:
        raise ProfileFormatError(
            f"{name}: expected a non-empty JSON list of node profiles (or one, as profile-node --json writes)"
        )
    return [profile_from_json(raw, f"{name}[{i}]") for i, raw in enumerate(data)]


def grouping_json(grouping: Grouping) -> dict[str, Any]:
    return {
        "groups": [
            {"id": g.id, "members": list(g.members), "ranks": g.ranks, "means": g.means}
            for g in grouping.groups
        ],
        "silhouette": grouping.silhouette,
        "features": list(grouping.features),
        "reason": grouping.reason,
    }
