"""GrowthWatch lowering a container that stopped rising, hand-computed: when it asks, what stops
it, and that growth is never held back by a decrease on its way."""

from __future__ import annotations

from airflow_adaptive.agent.watch import GrowthWatch
from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.core.growth_plan import GrowthPlan, flat_plan, rescue_plan

RULE = GrowthRule(latency_s=4.0, sample_s=2.0, headrooms=2.0)  # window 6 s, a decrease held 12 s
PLAN = flat_plan(0, 200, 10_000)  # a headroom of 200 at every level


def flat_watch() -> GrowthWatch:
    """A container at 900 under a limit of 2000 since t=100, asked down to 900 + 1.25 x 200 at 108."""
    watch = GrowthWatch(RULE, 10_000, PLAN)
    assert watch.observe(100.0, 900, 2000) is None  # 900 + 200 < 2000; flat for 0 s
    assert watch.observe(104.0, 900, 2000) is None  # flat for 4 s < 6 s
    # flat for 6 s, but memory.current (page cache included) is above 1150: the kubelet would skip it
    assert watch.observe(106.0, 900, 2000, charged_bytes=1200) is None
    assert watch.observe(108.0, 900, 2000, charged_bytes=950) == 1150  # 1150 x 1.1 < 2000
    return watch


def test_a_flat_container_is_lowered_once_and_the_landing_ends_the_ask() -> None:
    watch = flat_watch()
    assert watch.observe(110.0, 900, 2000) is None and watch.asked_bytes == 1150  # on its way
    assert watch.observe(112.0, 900, 1150) is None and watch.asked_bytes is None  # landed
    assert watch.observe(140.0, 900, 1150) is None  # 1150 is not a growth step above 1150


def test_growth_is_not_held_back_by_a_decrease_on_its_way() -> None:
    watch = flat_watch()
    assert watch.observe(110.0, 1850, 2000) == 2250  # 1850 + 200 >= 2000: 1850 + 2 x 200, at once
    assert watch.asked_bytes == 2250


def test_a_decrease_that_did_not_land_is_taken_back_and_not_asked_again() -> None:
    watch = flat_watch()
    assert watch.observe(118.0, 900, 2000) is None  # 10 s < 12 s: may still be landing
    assert watch.observe(121.0, 900, 2000) == 2000  # the kubelet skipped it: ask for the limit in force
    assert not watch.lowering and watch.observe(160.0, 900, 2000) is None
    assert watch.observe(162.0, 1850, 2000) == 2250  # growth goes on


def test_a_refused_decrease_leaves_nothing_on_its_way_and_lowers_no_more() -> None:
    watch = flat_watch()
    watch.not_lowered()
    assert watch.asked_bytes is None and watch.observe(110.0, 900, 2000) is None
    assert watch.observe(112.0, 1850, 2000) == 2250


def test_flat_time_counts_from_the_first_sample_even_at_nothing_used() -> None:
    watch = GrowthWatch(RULE, 10_000, PLAN)
    assert watch.observe(1e6, 0, 2000) is None
    assert watch.observe(1e6 + 2, 0, 2000) is None  # flat for 2 s, not since the clock's epoch
    assert watch.observe(1e6 + 6, 0, 2000) == 250  # 0 + 1.25 x 200


def test_without_a_plan_or_with_kept_headrooms_0_nothing_is_lowered() -> None:
    rescue = GrowthWatch(RULE, 10_000)
    never = GrowthWatch(GrowthRule(latency_s=4.0, sample_s=2.0, kept_headrooms=0.0), 10_000, PLAN)
    for watch in (rescue, never):
        assert all(watch.observe(100.0 + t, 900, 2000) is None for t in range(0, 30, 2))


def test_a_rescue_plan_holds_its_peaks_then_rescues_and_never_lowers() -> None:
    # steps of 900 to a steady 3,590 under a decision of 3,770 (within the rule's 10 % share): the
    # rescue alone asks at the last step; the rescue plan, holding peaks up to 3,600, asks only above
    steps = [(0.0, 10), (2.0, 900), (4.0, 1800), (6.0, 2690), (8.0, 3590), (10.0, 3590), (40.0, 3590)]
    alone, planned = GrowthWatch(RULE, 100_000), GrowthWatch(RULE, 100_000, rescue_plan(3770, 3600))
    assert [alone.observe(t, u, 3770) for t, u in steps][4] == 3590 + 2 * (377 + 450 * 6)
    assert all(planned.observe(t, u, 3770) is None for t, u in steps)  # nor lowered while flat
    assert planned.observe(42.0, 3610, 3770) == 3610 + 2 * (377 + 10 * 6)


def test_a_held_plan_holds_its_peaks_then_is_lowered_once_flat_and_grows_by_its_headroom() -> None:
    # under the decision of 3,770 a held plan with headrooms holds the steps as the rescue plan does
    steps = [(0.0, 10), (2.0, 900), (4.0, 1800), (6.0, 2690), (8.0, 3590), (10.0, 3590), (12.0, 3590)]
    near = GrowthWatch(
        RULE, 100_000, GrowthPlan(3770, (200,), 3770, 6.0, None, (50,), rescue_above_bytes=3600)
    )
    assert all(near.observe(t, u, 3770) is None for t, u in steps)  # not the 10 % share's ask
    assert near.observe(14.0, 3590, 3770) is None  # 3590 + 1.25 x 72 is not a growth step below 3770
    # the same steps under a decision of 5,000 that holds peaks up to 3,600; headroom 200, flat 50
    plan = GrowthPlan(5000, (200,), 5000, 6.0, None, (50,), rescue_above_bytes=3600)
    watch = GrowthWatch(RULE, 100_000, plan)
    assert all(watch.observe(t, u, 5000) is None for t, u in steps)  # the decision holds it
    # flat for a window: its level plus 1.25 flat headrooms (72, the 2 % it may still creep)
    assert watch.observe(14.0, 3590, 5000) == 3590 + 90
    assert watch.observe(16.0, 3590, 3680) is None  # landed; 3590 + 72 < 3680
    # a rise of 80 in a window is no longer flat: the plan's headroom, 3670 + 2 x 200 (a rescue by
    # the rule's share would ask 3670 + 2 x (368 + 40/s x 6 s) = 4,886)
    assert watch.observe(18.0, 3670, 3680) == 4070
