"""A flat try's headroom: what the family's tasks rose by within a window from where they were flat
(risen at most a step over the window before), from hand-computed profiles."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from airflow_adaptive.core.growth import GrowthRule, TryLevel, run_with_growth
from airflow_adaptive.core.growth_plan import GrowthPlan, flat_plan, learnt_plan, rise_table

WINDOW_S = 6.0
RULE = GrowthRule(latency_s=4.0, sample_s=2.0)  # window 6 s

# 2 % of its peak every second, to its peak at 50 s: never flat (12 % a window)
CLIMBER = tuple(float(k) for k in range(1, 51))
# to 50 % at once at 10 s, then 2 % every 20 s (flat: a step a window at most) to its peak at 510 s
HOLDER = (10.0,) * 25 + tuple(10.0 + 20.0 * k for k in range(1, 26))


def test_a_flat_table_reads_only_the_windows_that_start_where_the_task_was_flat() -> None:
    climber, holder = rise_table(CLIMBER, WINDOW_S, flat=True), rise_table(HOLDER, WINDOW_S, flat=True)
    assert np.isnan(climber).all()  # never flat: it says nothing of a flat try
    # the holder is flat at 0 before its jump (0.52: to just under the 52 % it reached at 30 s),
    # and from 50 % on creeps a step, counted to just under the next (4 %); above its peak, nothing
    # (for any try, its largest)
    assert holder[:25].tolist() == pytest.approx([0.52] * 25)
    assert holder[25:49].tolist() == pytest.approx([0.04] * 24) and np.isnan(holder[51])
    assert rise_table(HOLDER, WINDOW_S)[51] == pytest.approx(0.52)
    assert holder[49:51].tolist() == pytest.approx([0.02] * 2)  # from 98 %: only its last step
    # its rise table for any try is the same: it climbs only by jumping from flat
    assert rise_table(HOLDER, WINDOW_S)[25:49].tolist() == pytest.approx([0.04] * 24)


def test_a_flat_try_is_kept_what_flat_tasks_rose_by_not_what_climbing_ones_did() -> None:
    plan = learnt_plan([(CLIMBER, 1000.0)] * 3 + [(HOLDER, 1000.0)] * 3, 1000, WINDOW_S, 0.02)
    assert isinstance(plan, GrowthPlan)
    # at 60 % of the decision the climber rises 16 % within a window; a flat try only the holder's 4 %
    assert plan.headroom_at(600) == pytest.approx(160, abs=1)
    assert plan.headroom_at(600, flat=True) == pytest.approx(40, abs=1)
    assert plan.headroom_at(600, elapsed_s=1.0, flat=True) == plan.headroom_at(
        600, elapsed_s=1.0
    )  # first window
    # never less than the step of its level a flat try may still creep by
    assert replace(plan, flat_rises_bytes=(0,) * 50).headroom_at(600, flat=True) == 12
    # even where no task rose at all: a headroom of nothing would lower a flat try onto its usage
    assert replace(plan, rises_bytes=(0,) * 50, flat_rises_bytes=()).headroom_at(600, flat=True) == 12


def test_a_try_is_flat_once_its_level_rose_at_most_a_step_of_itself_over_a_window() -> None:
    state = TryLevel(with_plan=True, window_s=WINDOW_S)
    for t, usage in ((0.0, 1000.0), (2.0, 1005.0), (4.0, 1010.0)):
        state.observe(t, usage)
    assert not state.flat  # not a whole window seen yet
    state.observe(6.0, 1020.0)
    assert state.flat  # 20 over 6 s: a step (2 %) of 1020 is 20.4
    state.observe(8.0, 1035.0)
    assert not state.flat  # 30 over the 6 s since 2 s: more than 20.7
    state.observe(14.0, 1035.0)
    assert state.flat and state.level_bytes == 1035.0


def test_a_plateau_is_held_closer_with_the_flat_headroom_and_still_completes() -> None:
    plan = learnt_plan([(CLIMBER, 1000.0)] * 3 + [(HOLDER, 1000.0)] * 3, 1000, WINDOW_S, 0.02)
    assert isinstance(plan, GrowthPlan)
    times = [2.0 * i for i in range(300)]
    # 500 from 10 s on, then a creep of 1 % of it every 10 s: flat throughout
    usage = [0.0 if t < 10 else 500.0 + 5.0 * ((t - 10) // 10) for t in times]
    flat = run_with_growth(times, usage, plan.start_bytes, 10_000, RULE, plan)
    as_any = run_with_growth(times, usage, plan.start_bytes, 10_000, RULE, replace(plan, flat_rises_bytes=()))
    assert flat.succeeded and as_any.succeeded
    # kept 1.25 to 2 flat headrooms (40) above it as it creeps, not the climber's 160
    assert flat.held_byte_s < 0.9 * as_any.held_byte_s and flat.final_limit_bytes < usage[-1] + 160


def test_a_flat_try_that_needed_growth_is_not_lowered_until_it_is_still() -> None:
    plan = flat_plan(0, 40, 10_000)  # 40 at every level
    state = TryLevel.for_plan(RULE, plan)
    for t in (0.0, 2.0, 4.0, 6.0):  # 5 a sample: 15 a window, within a step (2 %) of its level
        state.observe(t, 1000.0 + 2.5 * t)
    assert state.flat
    # 1015 + 40 reaches 1050: grown to 1015 + 2 x 40, at least 1.1 x 1050
    assert state.grown(1015.0, 2.5, 1050, 10_000, RULE, plan, 6.0) == 1155 and not state.creeps
    state.grew()  # asked
    assert state.creeps and state.lowered(6.0, 1015.0, 1300, RULE, plan, 6.0) == (None, False)
    for t in (8.0, 10.0, 12.0, 14.0):
        state.observe(t, 1015.0)
    assert not state.creeps  # unchanged over a window: still
    assert state.lowered(14.0, 1015.0, 1300, RULE, plan, 14.0) == (1065, False)  # 1015 + 1.25 x 40


def test_a_try_is_not_lowered_within_a_window_of_a_growth() -> None:
    plan = flat_plan(0, 40, 10_000)
    state = TryLevel.for_plan(RULE, plan)
    for t, level in ((0.0, 1000.0), (2.0, 1007.0), (4.0, 1014.0), (6.0, 1021.0)):
        state.observe(t, level)
    assert not state.flat  # 21 over the window: more than 2 % of 1021
    assert state.grown(1021.0, 3.5, 1050, 10_000, RULE, plan, 6.0) == 1155
    state.grew()
    state.observe(8.0, 1026.0)
    assert state.flat and not state.creeps  # 19 since t = 2: flat again, at the edge
    assert state.lowered(8.0, 1026.0, 1300, RULE, plan, 8.0) == (None, False)  # grown 2 s ago
    for t, level in ((10.0, 1027.0), (12.0, 1028.0)):
        state.observe(t, level)
    assert state.lowered(12.0, 1028.0, 1300, RULE, plan, 12.0) == (1078, False)  # 1028 + 1.25 x 40


def test_a_family_never_flat_keeps_a_flat_try_the_headroom_for_any_try() -> None:
    plan = learnt_plan([(CLIMBER, 1000.0)] * 5, 1000, WINDOW_S, 0.02)
    assert isinstance(plan, GrowthPlan) and plan.flat_rises_bytes == plan.rises_bytes
    # and a flat headroom is never above the one for any try, even where the table says so, but
    # never below the step of its level it may still creep by (a 50th of 5000)
    odd = GrowthPlan(0, (21,), 1000, flat_rises_bytes=(500,))
    assert odd.headroom_at(900, flat=True) == 21 and odd.headroom_at(5000, flat=True) == 100


def test_a_flat_headroom_leaves_out_the_flat_tasks_that_rose_most_not_the_steepest_climbers() -> None:
    creeper = tuple(20.0 * k for k in range(1, 51))  # 2 % every 20 s: flat throughout, rises 4 %
    # creeps so to 70 % (700 s), then at once to its peak: flat there, and rises 30 %
    jumper = tuple(20.0 * k for k in range(1, 36)) + (701.0,) * 15
    fast = tuple(k / 5 for k in range(1, 51))  # 10 % a second: 40 % a window, never flat after 6 s
    history = [(creeper, 1000.0)] * 18 + [(jumper, 1000.0), (fast, 1000.0)]
    plan = learnt_plan(history, 1000, WINDOW_S, 0.1)  # a budget of 10 %: the largest of 20 is left out
    assert isinstance(plan, GrowthPlan)
    # any try: the fast climber is left out, the jumper's 30 % (to just under its 100 %) is covered
    assert plan.headroom_at(710) == pytest.approx(300, abs=1)
    # a flat try: the climber says nothing, and of the flat tasks the jumper rose most: the creep
    assert plan.headroom_at(710, flat=True) == pytest.approx(40, abs=1)
