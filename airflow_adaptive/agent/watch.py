"""Deciding, sample by sample, when to grow one container's memory limit, and a local loop that
applies the decisions to a cgroup itself (tests, and nodes where no kubelet does it).

The decisions are ``core.growth.TryLevel``'s (``grown_limit``, ``lowered_limit`` and
``fallen_limit``), the rule and the state the time-series replay scores; this adds what a live
agent needs on top: the rise rate from the previous sample, and not asking again while an earlier
resize may still be on its way to the cgroup.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from airflow_adaptive.agent.cgroup import CgroupUnavailable, MemoryCgroup
from airflow_adaptive.core.growth import GrowthRule, TryLevel
from airflow_adaptive.core.growth_plan import GrowthPlan

log = logging.getLogger(__name__)

HOLD_LATENCIES = 3.0  # an unanswered ask is given this many resize latencies to land

Growth = tuple[float, int, int]  # (when, the old limit, the new limit)


@dataclass(frozen=True)
class _Ask:
    at_s: float
    limit_then: int  # the limit in force when asked: a change means the resize (or another) landed
    limit_bytes: int

    @property
    def lowers(self) -> bool:
        return self.limit_bytes < self.limit_then


class GrowthWatch:
    """Per container: the previous sample for the rise rate, and an outstanding ask."""

    def __init__(self, rule: GrowthRule, room_bytes: int, plan: GrowthPlan | None = None) -> None:
        self.rule = rule
        self.room_bytes = room_bytes  # the most this container may be given; the agent may update it
        self.plan = plan  # the family's headroom by level, or None: the rule's rescue only
        self.lowering = True  # off once a decrease did not land: the kubelet skipped it
        self._previous: tuple[float, int] | None = None
        self._first_s: float | None = None  # the first sample: the try's start, as far as the watch knows
        self._try = TryLevel.for_plan(rule, plan)  # the level, a fall
        self._ask: _Ask | None = None

    @property
    def hold_s(self) -> float:
        """How long an ask stays outstanding while the limit in force does not change."""
        return max(HOLD_LATENCIES * self.rule.latency_s, self.rule.sample_s)

    @property
    def asked_bytes(self) -> int | None:
        """The limit last asked for and not yet seen in force, if any."""
        return self._ask.limit_bytes if self._ask is not None else None

    def observe(
        self, now_s: float, usage_bytes: int, limit_bytes: int | None, charged_bytes: int | None = None
    ) -> int | None:
        """The limit to ask for now, or None. Uses core.growth.grown_limit with the rate from the
        previous sample (none at the first: it decides on the headroom alone); with the family's
        plan, at the most used so far and the time since the first sample (where the plan says the
        try stands); unlimited containers are never grown. After an ask it asks nothing more until
        the limit in force changes or 3 x rule.latency_s (at least one sample interval) passes (a
        resize may still be landing), but growth overrides a pending decrease. With a plan, a try
        that has stopped rising is lowered by ``lowered_limit`` (one that fell, by
        ``fallen_limit``), never to ``charged_bytes`` or below (memory.current, page cache
        included: what the kubelet compares a decrease with). A
        decrease that did not land is taken back (the limit in force is asked for) and the
        container is not lowered again."""
        rate = self._rate(now_s, usage_bytes)
        self._first_s = now_s if self._first_s is None else self._first_s
        self._try.observe(now_s, usage_bytes)
        self._previous = (now_s, usage_bytes)
        if limit_bytes is None:
            self._ask = None
            return None
        elapsed_s = now_s - self._first_s
        grown = self._try.grown(
            usage_bytes, rate, limit_bytes, self.room_bytes, self.rule, self.plan, elapsed_s
        )
        ask, self._ask = self._ask, None
        if ask is not None and limit_bytes == ask.limit_then:
            if now_s - ask.at_s < self.hold_s and (grown is None or not ask.lowers):
                self._ask = ask  # still landing
                return None
            if ask.lowers and grown is None:  # the kubelet skipped it: take it back, lower no more
                self.lowering = False
                return limit_bytes
        wanted = grown
        if wanted is None:
            wanted = self._lowered(now_s, usage_bytes, limit_bytes, elapsed_s, charged_bytes)
        else:
            self._try.grew()
        if wanted is not None:
            self._ask = _Ask(now_s, limit_bytes, wanted)
        return wanted

    def not_lowered(self) -> None:
        """The cluster did not take the decrease asked: nothing is on its way, lower no more."""
        self._ask, self.lowering = None, False

    def _lowered(
        self, now_s: float, usage_bytes: int, limit_bytes: int, elapsed_s: float, charged_bytes: int | None
    ) -> int | None:
        if not self.lowering:
            return None
        wanted, for_fall = self._try.lowered(now_s, usage_bytes, limit_bytes, self.rule, self.plan, elapsed_s)
        if wanted is None or (charged_bytes is not None and charged_bytes >= wanted):
            return None
        self._try.lowered_fallen |= for_fall
        return wanted

    def _rate(self, now_s: float, usage_bytes: int) -> float:
        if self._previous is None or now_s <= self._previous[0]:
            return 0.0
        then_s, then_bytes = self._previous
        return (usage_bytes - then_bytes) / (now_s - then_s)


def watch_locally(
    cgroup: MemoryCgroup,
    rule: GrowthRule,
    room_bytes: int,
    stop: Callable[[], bool],
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[Growth]:
    """Sample every rule.sample_s until stop(); on an ask, apply it with cgroup.set_limit after
    rule.latency_s (standing in for the resize's way through the API server and the kubelet), and
    return the growths made (time, old limit, new limit). Usage is the working set: page cache
    the kernel can drop is no reason to grow. A cgroup that cannot be read or set ends the watch
    with one warning: the container runs on with the limit it has (fails open)."""
    watch = GrowthWatch(rule, room_bytes)
    pending: list[tuple[float, int]] = []  # (when it lands, the limit)
    growths: list[Growth] = []
    next_sample_s = clock()
    try:
        while not stop():
            now_s = clock()
            _land(cgroup, pending, now_s, growths)
            if now_s >= next_sample_s:
                wanted = watch.observe(now_s, cgroup.working_set_bytes(), cgroup.limit_bytes())
                if wanted is not None:
                    pending.append((now_s + rule.latency_s, wanted))
                next_sample_s = now_s + rule.sample_s
            wake_s = min([next_sample_s, *(due for due, _ in pending)])
            sleep(max(wake_s - clock(), 0.0))
    except CgroupUnavailable as err:
        log.warning("local memory growth stops, the limit stays as it is: %s", err)
    return growths


def _land(
    cgroup: MemoryCgroup, pending: list[tuple[float, int]], now_s: float, growths: list[Growth]
) -> None:
    """Put the resizes due by now in force; one that would not raise the limit is dropped (the
    local loop has no plan, so it only grows). A growth records the limit read back: the kernel
    rounds what it is given down to whole pages."""
    for item in [p for p in pending if p[0] <= now_s]:
        pending.remove(item)
        old = cgroup.limit_bytes()
        if old is not None and item[1] > old:  # never shrink, never limit an unlimited cgroup
            cgroup.set_limit(item[1])
            growths.append((now_s, old, cgroup.limit_bytes() or item[1]))
