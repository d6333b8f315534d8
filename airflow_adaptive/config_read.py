"""Read and check one ``[adaptive]`` option at a time: the readers behind ``config.py``.

Apart from it because the grow agent reads one option and nothing else: ``config.py`` declares the
settings of the sizing code, and importing that loads scikit-learn, about 130 MB a node agent has
no use for.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable
from typing import Any

from airflow_adaptive.core.growth_plan import LATENCY_BOUND_S
from airflow_adaptive.exceptions import InvalidConfigError
from airflow_adaptive.options import OPTIONS, SECTION

TRUE_WORDS = frozenset({"true", "t", "1", "yes", "y", "on"})
FALSE_WORDS = frozenset({"false", "f", "0", "no", "n", "off", ""})


def unknown_options() -> list[str]:
    """What is set for ``[adaptive]`` but read by no option, each said with what was likely meant: a
    name no option has (in airflow.cfg or the environment), or a variable Airflow does not read
    (``AIRFLOW__adaptive__MODE``: it reads ``AIRFLOW__ADAPTIVE__MODE``). A typo in ``mode`` would
    otherwise leave the provider off without a word."""
    from airflow.configuration import conf

    named = set(conf.options(SECTION)) - set(conf.defaults()) if conf.has_section(SECTION) else set()
    said = [f"[{SECTION}] {name} is no option{_meant(name)}" for name in sorted(named) if name not in OPTIONS]
    for var in sorted(os.environ):
        parts = var.split("__", 2)
        if len(parts) < 3 or parts[0] != "AIRFLOW" or parts[1].casefold() != SECTION:
            continue
        key = parts[2]  # no _CMD or _SECRET form: Airflow reads those for sensitive options, none of these
        if key.casefold() not in OPTIONS:
            said.append(f"{var} names no [{SECTION}] option{_meant(key.casefold())}")
        elif parts[1] != SECTION.upper() or key != key.upper():
            said.append(f"{var} is not read (Airflow reads AIRFLOW__{SECTION.upper()}__{parts[2].upper()})")
    return said


def _meant(name: str) -> str:
    close = difflib.get_close_matches(name, OPTIONS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def raw(name: str) -> str:
    from airflow.configuration import conf

    return str(conf.get(SECTION, name, fallback=OPTIONS[name][1]))


def number(name: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(raw(name))
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise InvalidConfigError(f"[{SECTION}] {name} = {raw(name)!r} is not {what}") from None


def checked(name: str, kind: type[int] | type[float], ok: Callable[[Any], bool], rule: str) -> Any:
    """The option as ``kind`` where ``ok`` holds (a NaN fails every comparison), else an error saying
    ``rule``."""
    value = number(name, kind)
    if not ok(value):
        raise InvalidConfigError(f"[{SECTION}] {name} = {raw(name)!r} is not {rule}")
    return value


def at_least_one(name: str, most: int = 1 << 31) -> int:
    value = int(number(name, int))
    if not 1 <= value <= most:
        upper = f" and <= {most}" if value > most else ""  # said only when it is what was broken
        raise InvalidConfigError(f"[{SECTION}] {name} = {raw(name)!r} is not an integer >= 1{upper}")
    return value


def positive(name: str, what: str, most: float = math.inf) -> float:
    upper = f" and <= {most:g}" if math.isfinite(most) else ""
    return float(
        checked(name, float, lambda v: 0.0 < v < math.inf and v <= most, f"a number of {what} > 0{upper}")
    )


def not_negative_seconds(name: str) -> float:
    return float(checked(name, float, lambda v: v >= 0.0, "a number of seconds >= 0"))


def fraction(name: str) -> float:
    return float(checked(name, float, lambda v: 0.0 <= v <= 1.0, "between 0 and 1"))


def flag(name: str) -> bool:
    """True or false, in the words Airflow's own options take; anything else is refused (a typo such
    as ``ture`` would otherwise turn a feature off without a word)."""
    word = raw(name).split("#")[0].strip().lower()  # an inline comment, as Airflow's getboolean reads it
    if word not in TRUE_WORDS | FALSE_WORDS:
        raise InvalidConfigError(f"[{SECTION}] {name} = {raw(name)!r} is not true or false")
    return word in TRUE_WORDS


def growth_latency_s() -> float:
    """``grow_resize_latency_seconds``: what the pods' plans were learnt for, and the agent's default."""
    rule = f"a number of seconds >= 0 and < {LATENCY_BOUND_S:g}"
    return float(checked("grow_resize_latency_seconds", float, lambda v: 0.0 <= v < LATENCY_BOUND_S, rule))
