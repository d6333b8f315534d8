"""A young family (one or two profiles): it keeps a headroom by level, its tasks' largest rise as a
ratio of the level it rose from times the level, up to their largest rise anywhere; it starts where a
mature plan would when that start plus the headroom there fits under the decision (else at the
decision), grows to the decision only, and a try that stopped rising is lowered, from hand-computed
profiles."""

from __future__ import annotations

import pytest

from airflow_adaptive.core.growth import GrowthRule, run_with_growth
from airflow_adaptive.core.growth_plan import GrowthPlan, learnt_plan, profile_of

WINDOW_S = 6.0
RULE = GrowthRule(latency_s=4.0, sample_s=2.0)  # window 6 s
# 2 % of its peak every 10 s to 40 % (200 s), then at 400 s at once to its peak (a sort merging its runs)
CREEP_THEN_JUMP = tuple(10.0 * k for k in range(1, 21)) + (400.0,) * 30
# half its peak within the first window, then at 100 s the rest
HALF_THEN_JUMP = (0.0,) * 25 + (100.0,) * 25


def test_one_or_two_profiles_give_a_mature_plans_start_and_a_headroom_in_proportion_to_the_level() -> None:
    for tasks in (1, 2):
        plan = learnt_plan([(CREEP_THEN_JUMP, 500.0)] * tasks, 1000, WINDOW_S, 0.02, floor_bytes=64)
        assert isinstance(plan, GrowthPlan) and plan.young
        # nothing reached within the first window: the floor; the largest rise for its level is a
        # step of creep from one step of the peak (twice the level), so 2 x each level's upper edge
        # (a level is 20), up to the largest rise anywhere: the jump from 40 % to the peak, 60 % of
        # it, as a share of the decision (60 % of 1000) and in bytes times the decision's margin
        # above the peak (300 x 2): the same
        assert plan.start_bytes == 64 and plan.rises_bytes[:3] == (40, 80, 120)
        assert plan.headroom_at(300) == plan.headroom_bytes == pytest.approx(600, abs=1)
        assert plan.flat_rises_bytes == () and plan.rebound_bytes is None
    # half the peak within the first window (500) and the headroom there, 500, reach the decision: it
    # starts there, as growth could not hold less
    early = learnt_plan([(HALF_THEN_JUMP, 500.0)], 1000, WINDOW_S, 0.02)
    assert isinstance(early, GrowthPlan) and early.young and early.start_bytes == 1000
    # from the third on, by level: it starts low, and below the jump's level a try may only creep
    grown = learnt_plan([(CREEP_THEN_JUMP, 500.0)] * 3, 1000, WINDOW_S, 0.02)
    assert isinstance(grown, GrowthPlan) and not grown.young
    assert grown.start_bytes == 20 and grown.headroom_at(100) == pytest.approx(40, abs=1)
    assert learnt_plan([(CREEP_THEN_JUMP, 500.0)], 0, WINDOW_S, 0.02) is None  # no decision, no plan


def test_a_young_family_that_never_rose_after_its_first_window_keeps_a_rescues_headroom() -> None:
    at_once = (1.0,) * 50  # its peak within the first window, then flat: no later rise to learn
    plan = learnt_plan([(at_once, 500.0)], 1000, WINDOW_S, 0.02, least_headroom_bytes=100)
    assert isinstance(plan, GrowthPlan) and plan.rises_bytes == (100,)  # no rise from a level: one
    times = [2.0 * i for i in range(200)]
    usage = [480.0 if t < 200 else 580.0 for t in times]  # the next task rises by 100 after 200 s
    out = run_with_growth(times, usage, plan.start_bytes, 10_000, RULE, plan)
    assert out.succeeded and out.resizes >= 2  # lowered to 480 + 125, grown when it rose


def test_a_young_try_that_stops_rising_is_lowered_and_a_later_jump_in_proportion_fits() -> None:
    plan = learnt_plan([(CREEP_THEN_JUMP, 500.0)], 2000, WINDOW_S, 0.02, floor_bytes=100)
    assert isinstance(plan, GrowthPlan) and plan.start_bytes == 100
    assert plan.headroom_at(200) == 400  # twice its level's upper edge (a level is 40)
    times = [2.0 * i for i in range(400)]

    def jump_to(level: float) -> list[float]:  # under the start for a window, at 200 from 10 s, then at 300 s
        return [50.0 if t < 10 else 200.0 if t < 300 else level for t in times]

    # lowered to 200 + 1.25 headrooms (700) once flat at 200; at 300 s a jump of 300 from 200, as the
    # task the plan was learnt from jumped: it fits there, and growth follows it
    grown = run_with_growth(times, jump_to(500.0), plan.start_bytes, 10_000, RULE, plan)
    rescued = run_with_growth(times, jump_to(500.0), 2000, 10_000, RULE, None)  # no plan: the decision
    assert grown.succeeded and rescued.succeeded and grown.held_byte_s < rescued.held_byte_s
    before_jump = run_with_growth(times[:150], jump_to(500.0)[:150], plan.start_bytes, 10_000, RULE, plan)
    assert (
        before_jump.final_limit_bytes == 700 and grown.final_limit_bytes <= 2000
    )  # never above the decision
    # the price of a headroom in proportion: a jump of 3.5 times its level at once passes it, where
    # one headroom at every level (1200) kept the lowered try at 1700
    assert not run_with_growth(times, jump_to(900.0), plan.start_bytes, 10_000, RULE, plan).succeeded


def test_a_young_try_holds_less_than_no_plan_and_its_start_covers_the_first_window_at_the_budget() -> None:
    plan = learnt_plan([(CREEP_THEN_JUMP, 500.0)], 1000, WINDOW_S, 0.02, floor_bytes=100)
    assert isinstance(plan, GrowthPlan) and plan.start_bytes == 100
    times = [2.0 * i for i in range(200)]
    for level in (200.0, 300.0, 450.0):
        usage = [50.0 if t < 4 else level for t in times]  # there before the first ask lands
        grown = run_with_growth(times, usage, plan.start_bytes, 10_000, RULE, plan)
        rescued = run_with_growth(times, usage, 1000, 10_000, RULE, None)
        assert grown.succeeded and grown.final_limit_bytes <= rescued.final_limit_bytes == 1000
        assert grown.held_byte_s < rescued.held_byte_s
    # as a mature plan's, its start covers the first window only at the kill budget: a try there
    # that jumps past the start plus the headroom at its level (its first ask, 50 + 2 x 200) is killed
    usage = [50.0 if t < 4 else 600.0 for t in times]
    assert not run_with_growth(times, usage, plan.start_bytes, 10_000, RULE, plan).succeeded


def test_a_young_try_just_below_the_decision_grows_to_it_and_no_further() -> None:
    from airflow_adaptive.core.growth import grown_limit
    from airflow_adaptive.core.growth_plan import young_plan

    plan = young_plan(5_000, (1_000,), 10_000, RULE.window_s)  # starts at 5,000, one headroom of 1,000
    # at 9,500 with usage 8,600: a growth step (1.1x) would pass the decision; no plan asks nothing
    # yet (usage is below 90 % of its 10,000), and a young try never holds more than no plan
    assert grown_limit(8_600, 0.0, 10_000, 1 << 40, RULE, None) is None
    assert grown_limit(8_600, 0.0, 9_500, 1 << 40, RULE, plan) == 10_000
    assert grown_limit(8_000, 0.0, 10_000, 1 << 40, RULE, plan) is None  # at the decision: a rescue's rule


def test_a_task_that_idles_and_then_loads_is_held_when_it_comes_again() -> None:
    times = [2.0 * i for i in range(200)]
    # 1 % of its peak (under a step) for 100 s, then 30 % at once (an index loaded), then a climb
    usage = [5.0 if t < 100 else min(150.0 + (t - 100), 500.0) for t in times]
    plan = learnt_plan(
        [(profile_of(times, usage), 500.0)], 1000, WINDOW_S, 0.02, 64, least_headroom_bytes=100
    )
    assert isinstance(plan, GrowthPlan) and plan.young
    # the load is a rise from a step at most (the least a profile tells): its ratio to that keeps
    # the lowest level that whole rise (30 % of 1000 in a window, and 150 x 2 in bytes)
    assert plan.headroom_at(5.0) >= 300
    assert run_with_growth(times, usage, plan.start_bytes, 10_000, RULE, plan).succeeded
