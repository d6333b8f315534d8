"""A try that fell: its rebound, what a family's rebounds teach, and how the replay and the agent
lower a fallen try and grow it back, from hand-computed cases."""

from __future__ import annotations

import json

import pytest

from airflow_adaptive.agent.watch import GrowthWatch
from airflow_adaptive.core.growth import GrowthRule, run_with_growth
from airflow_adaptive.core.growth_plan import PROFILE_STEPS, GrowthPlan, learnt_plan, rebound_of

RULE = GrowthRule(latency_s=4.0, sample_s=2.0, default_headroom=0.2, factor=1.1, headrooms=2.0)  # window 6 s
STEADY = tuple(float(k) for k in range(PROFILE_STEPS))  # 2 % a second
PLAN = GrowthPlan(0, (200,), 10_000, 0.0, rebound_bytes=300)  # a headroom of 200, a rebound of 300


def every_second(*usage: float) -> tuple[list[float], list[float]]:
    return [float(t) for t in range(len(usage))], list(usage)


def test_the_rebound_is_the_largest_rise_after_the_first_fall_below_half() -> None:
    assert rebound_of(*every_second(0, 100, 200, 150, 120)) is None  # never below half of 200
    assert rebound_of(*every_second(100, 200, 100, 100)) is None  # half is not below half
    # falls at 99 (< 100); from there the least is 80, and the most above it 150: 70
    assert rebound_of(*every_second(100, 200, 99, 80, 120, 90, 150)) == 70
    assert rebound_of(*every_second(100, 200, 50, 40, 40)) == 0  # fell and stayed
    # a fall first seen within 2 s of the end (the last sample) is the task exiting: no fall
    assert rebound_of(*every_second(100, 200, 200, 50, 40)) is None
    assert rebound_of([0.0, 1.0, 3.0], [200.0, 50.0, 60.0]) == 10


def test_a_family_learns_a_rebound_only_from_enough_tasks_that_fell() -> None:
    history = [(STEADY, 500.0)] * 4
    assert learnt_plan(history, 1000, 6.0, 0.02).rebound_bytes is None  # type: ignore[union-attr]
    two = learnt_plan(history, 1000, 6.0, 0.02, rebounds=[None, None, 50, 50])
    assert two is not None and two.rebound_bytes is None  # two fell: too few
    # three fell: the budget quantile (of three, the largest), as shares of their 500-byte peaks
    # times the decision (60 / 500 x 1000 = 120), or in bytes times the margin (60 x 2): 120
    plan = learnt_plan(history, 1000, 6.0, 0.02, rebounds=[None, 10, 30, 60])
    assert plan is not None and plan.rebound_bytes == 120


TIMES = [float(t) for t in range(0, 26, 2)]


def fallen(then: list[float]) -> list[float]:
    """At 2000 for 4 s, fallen to 800 from t=4 to t=16, then ``then`` (t=18 .. 24)."""
    return [2000.0, 2000.0] + [800.0] * 7 + then


def test_the_replay_lowers_a_fallen_try_by_its_rebound_and_grows_it_back() -> None:
    # t=10: fallen for 6 s -> 800 + 1.25 x 300 = 1175 (800 < 0.8 x 1175, 1175 x 1.1 < 2300); lands
    # at t=14. A rise to 1200 at t=20 (past half of 2000) is a kill: the rebound is the family's bet
    out = run_with_growth(TIMES, fallen([800.0, 1200.0, 1200.0, 1200.0]), 2300, 10_000, RULE, PLAN)
    assert not out.succeeded and out.seconds == 20.0 and out.final_limit_bytes == 1175
    # back past half of its level at t=20, it is grown by the level's rule: 2000 + 2 x 200 at t=24
    out = run_with_growth(TIMES, fallen([800.0, 1001.0, 1001.0, 1001.0]), 2300, 10_000, RULE, PLAN)
    assert out.succeeded and out.resizes == 2 and out.final_limit_bytes == 2400
    # still fallen at t=18 and within the rescue's reach (960 + 0.2 x 1175 >= 1175): grown from its
    # usage, 960 + 2 x (235 + 80/s x 6 s), landing at t=22, before 1200 would pass 1175
    out = run_with_growth(TIMES, fallen([960.0, 1100.0, 1100.0, 1100.0]), 2300, 10_000, RULE, PLAN)
    assert out.succeeded and out.resizes == 2 and out.final_limit_bytes == 2390
    # without a learnt rebound the fall is kept where the plateau rule keeps it (2000 + 1.25 x 200
    # is not a growth step below 2300): never lowered, and 1200 fits
    no_rebound = GrowthPlan(0, (200,), 10_000, 0.0)
    out = run_with_growth(TIMES, fallen([800.0, 1200.0, 1200.0, 1200.0]), 2300, 10_000, RULE, no_rebound)
    assert out.succeeded and out.resizes == 0 and out.final_limit_bytes == 2300
    # with min_memory 1500 in the plan: lowered to 1500, not 1175 (1500 x 1.1 < 2300, 800 < 0.8 x 1500)
    floored = GrowthPlan(0, (200,), 10_000, 0.0, rebound_bytes=300, floor_bytes=1500)
    out = run_with_growth(TIMES, fallen([800.0, 800.0, 800.0, 800.0]), 2300, 10_000, RULE, floored)
    assert out.succeeded and out.resizes == 1 and out.final_limit_bytes == 1500


def test_a_small_rebound_does_not_lower_where_the_rescue_would_ask_at_once() -> None:
    # 800 + 1.25 x 100 = 925: 800 is not below 0.8 x 925, so it is left at 2300
    plan = GrowthPlan(0, (200,), 10_000, 0.0, rebound_bytes=100)
    out = run_with_growth(TIMES, fallen([800.0] * 4), 2300, 10_000, RULE, plan)
    assert out.succeeded and out.resizes == 0


def test_the_agent_decides_a_fall_as_the_replay_does() -> None:
    watch = GrowthWatch(RULE, 10_000, PLAN)
    usage = fallen([960.0])
    limits = [2300] * 7 + [1175] * 3  # the decrease asked at t=10 is in force from t=14
    asks = [watch.observe(t, int(u), limit) for t, u, limit in zip(TIMES, usage, limits, strict=False)]
    assert asks == [None] * 5 + [1175] + [None] * 3 + [2390]


@pytest.mark.parametrize("rebound", [None, 0, 150])
def test_the_plan_annotation_carries_the_rebound(rebound: int | None) -> None:
    from airflow_adaptive.kubernetes.resize import plan_from_text, plan_text

    plan = GrowthPlan(100, (200, 300), 10_000, 6.0, rebound_bytes=rebound)
    assert plan_from_text(plan_text(plan)) == plan
    for bad in (-1, True, "100", 1.5):
        assert plan_from_text(json.dumps({**json.loads(plan_text(plan)), "rebound": bad})) is None
