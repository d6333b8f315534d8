"""Modes: how far the provider goes with a pod, adopted in steps as the Kubernetes VPA is.

``off``: the pod is left alone. ``observe``: the pod keeps the user's resources; its command is
wrapped and the attempt recorded; its annotation says what would have been decided.
``recommend``: as observe, and the recommendation is shown in the UI and by ``decide``.
``enforce``: the decision is applied (memory, node groups, priority class).

The most specific setting wins: a task family's rule, then the DAG's tag (``adaptive:<mode>``),
then the task's own (the operator's ``mode``), then the default of the pod's kind.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

TAG_PREFIX = "adaptive:"  # a DAG tag "adaptive:enforce" sets the DAG's mode


DAG_ID_ONLY = re.compile(r"[\w-]+")  # a DAG id without a dot, as Airflow's key rule allows
FAMILY_RULE_SOURCE = "[adaptive] family_modes"  # what set a mode a family rule gave (it outranks a tag)


class Mode(str, Enum):
    OFF = "off"
    OBSERVE = "observe"
    RECOMMEND = "recommend"
    ENFORCE = "enforce"

    @property
    def records(self) -> bool:
        return self is not Mode.OFF

    @property
    def enforces(self) -> bool:
        return self is Mode.ENFORCE


def parse_mode(text: str, what: str) -> Mode:
    """A mode from its name; anything else is a ValueError naming where it was written (the edges
    raise it as their typed error)."""
    try:
        return Mode(str(text).strip().lower())
    except ValueError:
        names = ", ".join(m.value for m in Mode)
        raise ValueError(f"{what}: {text!r} is not a mode (one of {names})") from None


@dataclass(frozen=True)
class FamilyRule:
    """``pattern=mode``: families matching the shell-style pattern (``etl.*``) get the mode."""

    pattern: str
    mode: Mode


def parse_family_rules(text: str, what: str) -> tuple[FamilyRule, ...]:
    """Rules from ``"etl.*=enforce, genomics.align=observe"``; the first that matches wins."""
    rules = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        pattern, sep, mode = item.rpartition("=")
        if not sep or not pattern.strip():
            raise ValueError(f"{what}: {item!r} is not family=mode")
        if "=" in pattern or ";" in pattern:  # 'a=enforce;b=observe' would be one rule for 'a=enforce;b'
            raise ValueError(f"{what}: {item!r} is not one family=mode (separate rules with commas)")
        rules.append(FamilyRule(pattern.strip(), parse_mode(mode, what)))
    return tuple(rules)


def bare_name_notes(rules: Iterable[FamilyRule]) -> list[str]:
    """Rules whose pattern reads as a DAG id (word characters and ``-``: no dot, no wildcard, no
    ``:`` as imported Nextflow families have): likely meant for the DAG's tasks, whose families are
    ``<dag_id>.<task_id>``, while it matches only a family of exactly that name."""
    return [
        f"{FAMILY_RULE_SOURCE}: {rule.pattern!r} matches only a task family of exactly that name; if it is "
        f"a DAG id, write '{rule.pattern}.*' (a DAG's tasks are families '<dag_id>.<task_id>')"
        for rule in rules
        if DAG_ID_ONLY.fullmatch(rule.pattern)
    ]


def family_mode(rules: Iterable[FamilyRule], family: str) -> Mode | None:
    for rule in rules:
        if fnmatch.fnmatchcase(family, rule.pattern):
            return rule.mode
    return None


def dag_mode(tags: Iterable[str] | None) -> Mode | None:
    """The mode a DAG's ``adaptive:<mode>`` tag sets; None when it has none (a bad one is an error)."""
    for tag in tags or ():
        if str(tag).casefold().startswith(TAG_PREFIX):  # as its mode, without case: Adaptive:Enforce
            return parse_mode(str(tag)[len(TAG_PREFIX) :], f"DAG tag {tag!r}")
    return None


@dataclass(frozen=True)
class ModeChoice:
    mode: Mode
    source: str  # what set it, for the pod's annotation and the UI

    def note(self) -> str:
        return f"{self.mode.value} ({self.source})"

    def log_line(self, strategy: str, explanation: str) -> str:
        """The decision as logged: what the pod gets, or (observe, recommend) that it keeps the
        user's resources and what it would get, as its annotation says."""
        if self.mode.enforces:
            return f"airflow-adaptive [{self.note()}, {strategy}] {explanation}"
        return f"airflow-adaptive [{self.note()}] keeps the user's resources; would give {strategy}: {explanation}"


def choose_mode(
    rules: Iterable[FamilyRule],
    family: str,
    *,
    dag: Mode | None,
    task: Mode | None,
    default: Mode,
    default_source: str,
) -> ModeChoice:
    """The most specific mode: family rule, DAG tag, task, then the default of the pod's kind."""
    by_family = family_mode(rules, family)
    if by_family is not None:
        return ModeChoice(by_family, FAMILY_RULE_SOURCE)
    if dag is not None:
        return ModeChoice(dag, "DAG tag")
    if task is not None:
        return ModeChoice(task, "task")
    return ModeChoice(default, default_source)
