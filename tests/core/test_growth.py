"""The growth rule and its replay over samples, from hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from airflow_adaptive.core.growth import GrowthRule, TryLevel, grown_limit, lowered_limit, run_with_growth
from airflow_adaptive.core.growth_plan import (
    PROFILE_STEPS,
    GrowthPlan,
    early_share,
    flat_plan,
    learnt_plan,
    profile_of,
    rescue_plan,
    rise_table,
    span_max,
)
from airflow_adaptive.exceptions import InvalidSettingError

RULE = GrowthRule(latency_s=4.0, sample_s=2.0, default_headroom=0.2, factor=1.1, headrooms=2.0)  # window 6 s


def test_a_learnt_headroom_grows_when_usage_comes_within_it() -> None:
    # 700 + 200 < 1000: safe; 850 + 200 >= 1000: usage + 2 x 200 = 1250
    assert grown_limit(700, 0.0, 1000, 10_000, RULE, flat_plan(0, 200, 10_000)) is None
    assert grown_limit(850, 0.0, 1000, 10_000, RULE, flat_plan(0, 200, 10_000)) == 1250
    # at least factor x limit: 1000 + 2 x 20 < 1100
    assert grown_limit(990, 0.0, 1000, 10_000, RULE, flat_plan(0, 20, 10_000)) == 1100


def test_a_rescue_waits_for_usage_near_the_limit_then_counts_the_rise() -> None:
    # without a learnt headroom: nothing below 1000 - 0.2 x 1000, however fast the first ramp
    assert grown_limit(400, 50.0, 1000, 10_000, RULE) is None
    assert grown_limit(790, 500.0, 1000, 10_000, RULE) is None
    # at 850: rise = 0.2 x 1000 + 50/s x 6 s = 500 -> 850 + 2 x 500; falling: 850 + 2 x 200
    assert grown_limit(850, 50.0, 1000, 10_000, RULE) == 1850
    assert grown_limit(850, -50.0, 1000, 10_000, RULE) == 1250


def test_growth_never_goes_above_the_room() -> None:
    assert grown_limit(900, 0.0, 1000, 1200, RULE, flat_plan(0, 200, 10_000)) == 1200
    assert grown_limit(900, 0.0, 1000, 1000, RULE, flat_plan(0, 200, 10_000)) is None


def test_a_resize_lands_after_the_latency_and_saves_the_task() -> None:
    times = [0.0, 2.0, 4.0, 6.0, 8.0]
    usage = [500.0, 900.0, 950.0, 1050.0, 1050.0]
    # t=2: 900 + 200 >= 1000 -> ask 1300, lands at t=6; at t=6 usage 1050 <= 1300 (and
    # 1050 + 200 < 1300: no second ask): it survives.
    out = run_with_growth(times, usage, 1000, 10_000, RULE, flat_plan(0, 200, 10_000))
    assert out.succeeded and out.resizes == 1 and out.final_limit_bytes == 1300
    assert out.held_byte_s == pytest.approx(1000 * 6 + 1300 * 2)
    assert out.used_byte_s == pytest.approx(2 * (500 + 900 + 950 + 1050))
    # a longer latency lands at t=8: usage 1050 > 1000 at t=6 is a kill there
    slow = run_with_growth(
        times, usage, 1000, 10_000, GrowthRule(latency_s=6.0, headrooms=2.0), flat_plan(1000, 200, 10_000)
    )
    assert not slow.succeeded and slow.seconds == 6.0 and slow.held_byte_s == pytest.approx(6000)


def test_the_first_sample_can_ask_as_the_agent_does() -> None:
    # t=0: 850 + 200 >= 1000 at no known rate -> ask 1250, landing at t=4 before usage passes 1000
    out = run_with_growth(
        [0.0, 2.0, 4.0, 6.0], [850.0, 950.0, 1040.0, 1040.0], 1000, 10_000, RULE, flat_plan(1000, 200, 10_000)
    )
    assert out.succeeded and out.resizes == 1 and out.final_limit_bytes == 1250


def test_without_a_rule_the_limit_is_constant() -> None:
    out = run_with_growth([0.0, 2.0, 4.0], [100.0, 300.0, 200.0], 250, 10_000, None)
    assert not out.succeeded and out.seconds == 2.0 and out.resizes == 0


def test_a_resize_landing_between_samples_is_charged_from_when_it_lands() -> None:
    rule = GrowthRule(latency_s=1.0, sample_s=2.0, headrooms=2.0)
    # t=2 asks (900 + 200 >= 1000) for 1300, landing at t=3: 1000 x 1 + 1300 x 1 from 2 to 4
    out = run_with_growth(
        [0.0, 2.0, 4.0], [100.0, 900.0, 900.0], 1000, 10_000, rule, flat_plan(1000, 200, 10_000)
    )
    assert out.succeeded and out.held_byte_s == pytest.approx(1000 * 2 + 1000 + 1300)


def test_a_try_that_stopped_rising_is_lowered_to_its_level_and_a_quarter_headroom_more() -> None:
    plan = flat_plan(0, 200, 10_000)
    # flat over one window (6 s): 1000 + 1.25 x 200 = 1250, and 1250 x 1.1 < 1400
    assert lowered_limit(1000, 1400, RULE, plan, elapsed_s=10.0, flat=True) == 1250
    assert lowered_limit(1000, 1400, RULE, plan, elapsed_s=10.0, flat=False) is None  # rose lately
    assert lowered_limit(1000, 1370, RULE, plan, elapsed_s=10.0, flat=True) is None  # not a step above
    assert lowered_limit(1000, 1400, RULE, None, elapsed_s=10.0, flat=True) is None  # a rescue
    in_first_window = GrowthPlan(0, (200,), 10_000, window_s=12.0)
    assert lowered_limit(1000, 1400, RULE, in_first_window, elapsed_s=10.0, flat=True) is None
    never = GrowthRule(latency_s=4.0, sample_s=2.0, kept_headrooms=0.0)
    assert lowered_limit(1000, 1400, never, plan, elapsed_s=10.0, flat=True) is None
    # with a flat headroom learnt (100 at every level): 1000 + 1.25 x 100
    learnt = GrowthPlan(0, (200,), 10_000, flat_rises_bytes=(100,))
    assert lowered_limit(1000, 1400, RULE, learnt, elapsed_s=10.0, flat=True) == 1125
    # never below the plan's floor (min_memory): 1300 x 1.1 > 1400, so not lowered at all
    floored = GrowthPlan(0, (200,), 10_000, floor_bytes=1300)
    assert lowered_limit(1000, 1400, RULE, floored, elapsed_s=10.0, flat=True) is None
    assert lowered_limit(1000, 2000, RULE, floored, elapsed_s=10.0, flat=True) == 1300
    assert lowered_limit(1200, 2000, RULE, floored, elapsed_s=10.0, flat=True) == 1450  # above it


def test_the_replay_lowers_a_plateau_after_a_window_and_grows_it_again_when_it_rises() -> None:
    times = [float(t) for t in range(0, 22, 2)]
    usage = [500.0, 900.0, 900.0, 900.0, 900.0, 900.0, 900.0, 900.0, 1100.0, 1100.0, 1100.0]
    out = run_with_growth(times, usage, 1000, 10_000, RULE, flat_plan(0, 200, 10_000))
    # t=2 asks 1300 (lands at 6); flat since t=2, at t=8 it asks 900 + 250 = 1150 (lands at 12);
    # t=16: 1100 + 200 >= 1150 asks 1500 (lands at 20): three resizes, no kill
    assert out.succeeded and out.resizes == 3 and out.final_limit_bytes == 1500
    held = 1000 * 6 + 1300 * 6 + 1150 * 8 + 1500 * 0
    assert out.held_byte_s == pytest.approx(held)
    kept = run_with_growth(times, usage, 1000, 10_000, GrowthRule(latency_s=4.0, sample_s=2.0, kept_headrooms=0.0),
                           flat_plan(0, 200, 10_000))  # fmt: skip
    # never lowered: 1300 from t=6 to the end (1100 + 200 >= 1300 asks 1500 at t=16, landing at 20)
    assert kept.resizes == 2 and kept.held_byte_s == pytest.approx(1000 * 6 + 1300 * 14)


def test_a_decrease_landing_at_or_below_usage_is_skipped_and_the_try_not_lowered_again() -> None:
    times = [float(t) for t in range(0, 16, 2)]
    usage = [900.0] * 5 + [1160.0] * 3
    out = run_with_growth(times, usage, 2000, 10_000, RULE, flat_plan(0, 200, 10_000))
    # flat from t=0, at t=6 it asks 900 + 250 = 1150 (1265 < 2000), landing at t=10, where usage is
    # 1160: the kubelet skips it (applied, 1160 > 1150 would be a kill); 1160 + 200 < 2000 asks nothing
    assert out.succeeded and out.resizes == 1 and out.final_limit_bytes == 2000
    assert out.held_byte_s == pytest.approx(2000 * 14)


def test_growth_overrides_a_pending_decrease() -> None:
    times = [float(t) for t in range(0, 16, 2)]
    usage = [900.0] * 4 + [1850.0] * 4
    out = run_with_growth(times, usage, 2000, 10_000, RULE, flat_plan(0, 200, 10_000))
    # t=6 asks 1150 (landing at 10); t=8: 1850 + 200 >= 2000 asks 2250 over it, landing at 12
    assert out.succeeded and out.resizes == 2 and out.final_limit_bytes == 2250
    assert out.held_byte_s == pytest.approx(2000 * 12 + 2250 * 2)


def test_a_climbing_try_is_never_lowered() -> None:
    times = [float(t) for t in range(0, 40, 2)]
    usage = [500.0 + 40 * k for k in range(20)]
    plan = flat_plan(0, 200, 10_000)
    out = run_with_growth(times, usage, 1000, 10_000, RULE, plan)
    never = run_with_growth(
        times, usage, 1000, 10_000, GrowthRule(latency_s=4.0, sample_s=2.0, kept_headrooms=0.0), plan
    )
    assert out == never and out.succeeded


def test_profile_early_share_and_largest_rise() -> None:
    times = [float(t) for t in range(0, 22, 2)]  # 0 .. 20 s
    usage = [0, 30, 30, 30, 30, 30, 30, 30, 95, 100, 100]
    profile = profile_of(times, usage)
    # 2 % .. 30 % (15 steps) first at t=2, 32 % .. 94 % (32 steps) at t=16 (95), the rest at t=18
    assert profile == (2.0,) * 15 + (16.0,) * 32 + (18.0,) * 3
    # within a 6 s window usage may have reached just under 32 %: the start must cover that
    assert early_share(profile, 6.0) == pytest.approx(0.32)
    # from 30 % before t=16 to 100 % by t=22: a rise of 70 % of the peak within one window
    assert rise_table(profile, 6.0).max() == pytest.approx(0.7)
    # a task that rises only in its first window jumps by nothing later
    flat = (0.0,) * len(profile)
    assert rise_table(flat, 6.0).max() == 0.0 and early_share(flat, 6.0) == 1.0


def test_bad_rules_are_typed_errors() -> None:
    with pytest.raises(InvalidSettingError):
        GrowthRule(latency_s=-1.0)
    with pytest.raises(InvalidSettingError):
        GrowthRule(sample_s=0.0)
    with pytest.raises(InvalidSettingError):
        GrowthRule(factor=0.5)
    with pytest.raises(InvalidSettingError):
        GrowthRule(kept_headrooms=1.0)  # at one headroom the next sample would grow it again
    with pytest.raises(InvalidSettingError):
        GrowthRule(kept_headrooms=3.0)  # above what an ask keeps


SLOW = (0.0,) * 15 + (100.0,) * 35  # 30 % at once, the rest 100 s later
STEADY = (0.0,) * 10 + tuple(10.0 * k for k in range(1, 41))  # 20 % at once, then 2 % every 10 s


def _plan(profile: tuple[float, ...], peaks: list[float], decision: int) -> tuple[int, int] | None:
    plan = learnt_plan([(profile, peak) for peak in peaks], decision, 6.0, 0.02)
    return None if plan is None or plan.rescue_above_bytes else (plan.start_bytes, plan.headroom_bytes)


def test_a_family_grows_only_when_its_start_and_headroom_fit_under_the_decision() -> None:
    assert learnt_plan([], 1000, 6.0, 0.02) is None  # no profile: rescue only
    # SLOW: 32 % may be reached in the first 6 s, then a 70 % jump: 320 + 700 >= 1000, no gain
    assert _plan(SLOW, [1000.0] * 5, 1000) is None
    assert _plan((0.0,) * 45 + (100.0,) * 5, [1000.0] * 5, 1000) is None  # 90 % at once
    # such a family starts at the decision and is rescued there only above its peaks at the budget
    # (the 99th of 100 peaks of 800 + k: 898, under a decision of 1000); it keeps its headrooms
    plan = learnt_plan([(SLOW, 800.0 + k) for k in range(100)], 1000, 6.0, 0.02)
    assert plan is not None and not plan.rescue_only and not plan.young
    assert (plan.start_bytes, plan.rescue_above_bytes, plan.headroom_bytes) == (1000, 898, 700)
    # a decision at or below the peaks does not hold them: no plan, the rule's share rescues
    assert learnt_plan([(SLOW, 2000.0)] * 5, 1000, 6.0, 0.02) is None
    assert learnt_plan([(SLOW, 1000.0)] * 5, 1000, 6.0, 0.02) is None
    assert grown_limit(1000, 0.0, 1000, 10_000, RULE) == 1400  # 1000 + 2 x 200


def test_a_rescue_plan_rescues_only_above_what_the_decision_holds() -> None:
    # a step to 950 of a decision of 1000 at 100 bytes/s: without a plan, within the rule's 20 %
    # share, the rescue asks for 950 + 2 x (200 + 100 x 6) = 2,550 bytes
    plan = rescue_plan(1000, 960)
    assert grown_limit(950, 100.0, 1000, 10_000, RULE) == 2550
    assert grown_limit(950, 100.0, 1000, 10_000, RULE, plan) is None  # the decision holds it
    assert grown_limit(961, 100.0, 1000, 10_000, RULE, plan) == 2561  # beyond: rescued as before
    assert grown_limit(961, 0.0, 1000, 10_000, RULE, plan, elapsed_s=0.0) == 1361
    assert lowered_limit(500, 1000, RULE, plan, elapsed_s=100.0, flat=True) is None  # never lowered
    assert plan.headroom_at(500) == 0
    # a young plan at its decision rescues by the share alone, whatever it carries
    young = GrowthPlan(1000, (100,), 1000, young=True, rescue_above_bytes=960)
    assert grown_limit(950, 100.0, 1000, 10_000, RULE, young) == 2550
    level = TryLevel.for_plan(RULE, plan)
    level.observe(0.0, 900)
    level.observe(2.0, 500)
    assert level.level_bytes == 500  # its latest usage, as a try without a plan


def test_a_held_plan_is_held_at_its_decision_and_grown_by_its_headroom_below_it() -> None:
    # headroom 300 at every level, 20 for a flat try; at the decision of 1000, held up to 960
    plan = GrowthPlan(1000, (300,), 1000, 6.0, None, (20,), rescue_above_bytes=960)
    assert grown_limit(950, 100.0, 1000, 10_000, RULE, plan) is None  # 950 + 300 >= 1000, yet held
    assert grown_limit(961, 0.0, 1000, 10_000, RULE, plan) == 1361  # above: a rescue, 961 + 2 x 200
    # flat past its first window: lowered to 500 + 1.25 x 20; from there grown by its headroom
    assert lowered_limit(500, 1000, RULE, plan, elapsed_s=100.0, flat=True) == 525
    assert lowered_limit(500, 1000, RULE, plan, elapsed_s=5.0, flat=True) is None
    assert grown_limit(510, 0.0, 525, 10_000, RULE, plan, flat=True) == 578  # 525 x 1.1
    assert grown_limit(310, 0.0, 330, 10_000, RULE, plan) == 910  # 310 + 2 x 300
    assert grown_limit(510, 0.0, 525, 10_000, RULE, plan) == 1000  # 510 + 2 x 300, up to the decision
    assert grown_limit(950, 0.0, 1000, 10_000, RULE, plan) is None  # there, held again
    level = TryLevel.for_plan(RULE, plan)
    level.observe(0.0, 900)
    level.observe(2.0, 500)
    assert level.level_bytes == 900  # the most used so far, as any try with a plan
    # replayed: a ramp to 500 in 4 s that sits there to 100 s, sampled every 2 s; flat for a window
    # (6 s) by t = 10, lowered to 525, landing 4 s later; held at 1000 until then
    times = [2.0 * k for k in range(51)]
    out = run_with_growth(times, [min(125.0 * t, 500.0) for t in times], 1000, 10_000, RULE, plan)
    assert out.succeeded and out.resizes == 1 and out.final_limit_bytes == 525
    assert out.held_byte_s == pytest.approx(1000 * 14 + 525 * 86)


def test_the_plan_keeps_the_decisions_margin_above_the_history_in_shares_and_in_bytes() -> None:
    # STEADY: by 6 s at most 22 % (the first step after); within any later 6 s, 4 % (2 % surely
    # had before a step, the next step may come within the window). Peaks of 500 under a decision
    # of 1000: 22 % of the decision, which is 22 % of the peaks times the decision's margin (2)
    assert _plan(STEADY, [500.0] * 3, 1000) == (pytest.approx(220, abs=1), pytest.approx(40, abs=1))
    assert _plan(STEADY, [500.0] * 50, 1000) == (pytest.approx(220, abs=1), pytest.approx(40, abs=1))
    # peaks above the decision: no margin, a share of the decision is the lower
    assert _plan(STEADY, [2000.0] * 50, 1000) == (pytest.approx(220, abs=1), pytest.approx(40, abs=1))
    # small tasks at their 100-byte peak from the start beside large STEADY ones: as a share they
    # reached 100 % early (a start at the decision); in bytes 100, below the large ones' 110, so
    # the start is 110 times the margin (1000 over the peaks' budget quantile, here the largest, 500)
    flat = (0.0,) * PROFILE_STEPS
    mixed = [(STEADY, 500.0)] * 10 + [(flat, 100.0)] * 10
    plan = learnt_plan(mixed, 1000, 6.0, 0.02)
    assert plan is not None
    assert (plan.start_bytes, plan.headroom_bytes) == (pytest.approx(220, abs=1), pytest.approx(40, abs=1))
    # small tasks that jump 80 % of their 100-byte peak at 100 s: as a share, a headroom of 800
    # (start plus headroom would reach the decision: no plan); in bytes 80 times the margin 2
    # tasks that used nothing say nothing of a shape: without them, a young family's plan
    young = learnt_plan([(STEADY, 0.0)] * 50 + [(STEADY, 500.0)] * 2, 1000, 6.0, 0.02)
    assert (
        young is not None
        and young.young
        and young.start_bytes == pytest.approx(220, abs=1)
        and young.headroom_bytes == pytest.approx(40, abs=1)
        and young.rises_bytes[0] < young.headroom_bytes  # a headroom in proportion to the level
    )
    assert learnt_plan([(STEADY, 0.0)] * 50, 1000, 6.0, 0.02) is None
    jump = (0.0,) * 10 + (100.0,) * 40
    plan = learnt_plan([(STEADY, 500.0)] * 10 + [(jump, 100.0)] * 10, 1000, 6.0, 0.02)
    assert plan is not None
    assert (plan.start_bytes, plan.headroom_bytes) == (pytest.approx(220, abs=1), pytest.approx(160, abs=1))


def test_no_plan_starts_below_min_memory() -> None:
    # STEADY under a decision of 1000 starts at 220 (above); a floor of 300 lifts the start, one
    # of 980 leaves no room for its headroom under the decision: the decision and rescue
    history = [(STEADY, 500.0)] * 3
    plan = learnt_plan(history, 1000, 6.0, 0.02, floor_bytes=300)
    assert plan is not None and plan.start_bytes == 300 and plan.floor_bytes == 300  # lowered no further
    young = learnt_plan(history[:1], 1000, 6.0, 0.02, floor_bytes=300)
    assert young is not None and young.young and young.floor_bytes == 300
    at_floor = learnt_plan(history, 1000, 6.0, 0.02, floor_bytes=980)
    assert at_floor is not None and at_floor.rescue_above_bytes and at_floor.start_bytes == 1000
    assert at_floor.floor_bytes == 980  # held at the decision, and lowered no further than min_memory


# 30 % at once, then 2 % every 10 s to 50 %, then the rest at once (t = 200)
SLOW_THEN_JUMP = (0.0,) * 15 + tuple(10.0 * k for k in range(1, 11)) + (200.0,) * 25


def test_the_headroom_is_the_rise_from_where_the_task_stands() -> None:
    table = rise_table(SLOW_THEN_JUMP, 6.0)
    # from 30 % .. 48 %, a step may come within 6 s (4 %, counting the step just under); from 50 %
    # (surely held before t = 200), the jump to 100 %, carried up to its peak
    assert table[15:25].tolist() == pytest.approx([0.04] * 10) and table[25:51].tolist() == pytest.approx(
        [0.5] * 26
    )
    # below 30 % (never held after the first window) and above its peak: its largest rise
    assert table[:15].tolist() == pytest.approx([0.5] * 15) and table[51] == pytest.approx(0.5)
    plan = learnt_plan([(SLOW_THEN_JUMP, 1000.0)] * 5, 1000, 6.0, 0.02)
    assert isinstance(plan, GrowthPlan) and plan.start_bytes == 320  # 32 % may be reached within 6 s
    # levels 20 and 25 of 20 bytes each (a byte more where 0.04 x 1000 rounds up)
    assert plan.headroom_at(400) == pytest.approx(40, abs=1) and plan.headroom_at(500) == 500
    # within the first window (which the start covers only at the budget): the largest up to the
    # start or the level; below 30 % this family was never seen after its first window
    assert plan.headroom_at(400, elapsed_s=2.0) == 500 and plan.headroom_at(100) == 500


# 2 % every 10 s to 50 %, then the rest at once (t = 300)
CLIMB_THEN_JUMP = tuple(10.0 * k for k in range(1, 26)) + (300.0,) * 25


def test_in_its_first_window_a_slow_starter_keeps_the_headroom_of_the_levels_below_its_start() -> None:
    plan = learnt_plan([(CLIMB_THEN_JUMP, 1000.0)] * 5, 1000, 6.0, 0.02)
    assert isinstance(plan, GrowthPlan) and plan.start_bytes == 20  # 2 % may be reached within 6 s
    # up to the start (level 1 of 20 bytes) it climbs a step at a time: not the jump from 50 %
    assert plan.headroom_at(10, elapsed_s=2.0) == pytest.approx(40, abs=1) and plan.headroom_bytes == 500


def test_past_its_first_window_a_slow_riser_is_kept_close_and_grown_before_its_jump() -> None:
    times = [10.0 + 2.0 * i for i in range(145)]  # first seen 10 s in: past its first window
    usage = [min(300.0 + t, 500.0) if t < 250 else 700.0 for t in times]
    plan = learnt_plan([(SLOW_THEN_JUMP, 1000.0)] * 5, 1000, 6.0, 0.02)
    out = run_with_growth(times, usage, 320, 10_000, RULE, plan)
    # 40 above usage while it climbs; at 500 (the level it jumps from), 500 above it
    assert out.succeeded and out.final_limit_bytes >= 1000 and out.resizes > 3
    assert out.held_byte_s < 1000 * (times[-1] - times[0])  # less than the decision held throughout


# 2 % by 10 s, 60 % by 20 s, then 2 % every 10 s to its peak
JUMP_THEN_CLIMB = (10.0,) + (20.0,) * 29 + tuple(30.0 + 10.0 * k for k in range(20))


def test_a_level_reads_the_largest_rise_over_every_step_it_spans() -> None:
    rng = np.random.default_rng(7)
    tables = rng.random((4, PROFILE_STEPS + 2))
    edges = np.sort(rng.integers(0, PROFILE_STEPS + 2, (4, 11)), axis=1)
    expected = [[tables[r, edges[r, k] : edges[r, k + 1] + 1].max() for k in range(10)] for r in range(4)]
    assert span_max(tables, edges).ravel().tolist() == pytest.approx(np.array(expected).ravel().tolist())


def test_above_a_tasks_peak_a_try_keeps_its_largest_rise_a_flat_one_its_last_step_then_nothing() -> None:
    plan = learnt_plan([(JUMP_THEN_CLIMB, 990.0)] * 5, 1000, 6.0, 0.02)
    assert isinstance(plan, GrowthPlan)
    # level 49 (960 .. 980) spans the task's steps 48 and 49 (96 % and 98 % of its 990 peak): from
    # 96 % two steps may come within a window (4 %), from 98 % its last (2 %); the larger counts.
    # At 1000, above its peak, a larger task may be anywhere on its way, its jump from 2 % to 60 %
    # (62 %, a step high) included
    assert plan.headroom_at(980) == pytest.approx(40, abs=1)
    assert plan.headroom_at(1000) == pytest.approx(600, abs=1)
    # a flat try within a step (2 %) above the peak is that task stopped at its end: its last step
    assert plan.headroom_at(1000, flat=True) == pytest.approx(20, abs=1)
    # peaks of 900: a try flat at 990, more than a step above them, is no such task on its way: they
    # say nothing of it (their largest rise from flat, 60 %, was a pause on the way to 900), and
    # where no task says anything a flat try is kept the headroom for any try (its jump, 60 %)
    plan = learnt_plan([(JUMP_THEN_CLIMB, 900.0)] * 5, 1000, 6.0, 0.02)
    assert isinstance(plan, GrowthPlan)
    assert plan.headroom_at(990, flat=True) == plan.headroom_at(990) == pytest.approx(600, abs=1)
    # beside tasks that reached 1000 and crept there by 2 % a window (HOLDER), theirs counts
    holder = (10.0,) * 25 + tuple(10.0 + 20.0 * k for k in range(1, 26))
    plan = learnt_plan([(JUMP_THEN_CLIMB, 900.0)] * 5 + [(holder, 1000.0)] * 5, 1000, 6.0, 0.02)
    assert isinstance(plan, GrowthPlan)
    assert plan.headroom_at(990, flat=True) == pytest.approx(20, abs=1)
    assert plan.headroom_at(990) == pytest.approx(540, abs=1)  # for any try, the jump in bytes
