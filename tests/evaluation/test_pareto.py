"""Waste against kills: which anchor the default beats on both, which beats it, and the sweep."""

from __future__ import annotations

from typing import Any

from airflow_adaptive.evaluation.pareto import against, beaten_by, no_worse, pareto, pareto_counts


def point(waste: float, kills: float) -> dict[str, float]:
    return {"waste_gb_h": waste, "retries_per_100": kills}


TRACE: dict[str, Any] = {
    "strategies": {
        "adaptive": point(10.0, 1.0),
        "fewer-kills-more-waste": point(12.0, 0.5),  # neither beats the other
        "worse": point(11.0, 3.0),  # the default beats it
        "better": point(8.0, 1.0),  # it beats the default
        "same": point(10.0, 1.0),  # each beats the other
        "user": point(1.0, 0.0),  # not an anchor
    },
    "budget_sweep": [{"max_oom_rate": 0.005, **point(13.0, 0.2)}, {"max_oom_rate": 0.1, **point(7.0, 2.0)}],
}
ANCHORS = ["fewer-kills-more-waste", "worse", "better", "same", "not-replayed"]


def test_an_anchor_point_is_beaten_when_the_default_has_no_more_of_either() -> None:
    assert no_worse(point(1, 1), point(1, 1)) and no_worse(point(1, 0), point(2, 1))
    assert not no_worse(point(1, 2), point(2, 1))
    found = pareto(TRACE, "adaptive", ANCHORS)
    assert sorted(found) == sorted(ANCHORS[:4])  # only anchors that were replayed; not the user
    assert {n for n, p in found.items() if p["default_beats"]} == {"worse", "same"}
    assert {n for n, p in found.items() if p["beats_default"]} == {"better", "same"}
    assert beaten_by({"pareto": found}) == ["better", "same"]  # least waste first
    assert {n for n, p in found.items() if p["tie"]} == {"same"}  # both: said to be a tie


def test_the_sweep_beats_an_anchor_when_some_budget_does() -> None:
    found = pareto(TRACE, "adaptive", ANCHORS)
    # neither 13 GB·h at 0.2 kills nor 7 at 2.0 has no more of both than 12 at 0.5
    assert found["fewer-kills-more-waste"]["sweep_budgets"] == []
    assert found["fewer-kills-more-waste"]["sweep_beats"] is False
    assert found["worse"]["sweep_budgets"] == [0.1] and found["better"]["sweep_beats"] is False
    counts = pareto_counts([{"pareto": found}, {"pareto": {}}])
    assert counts == {
        "points": 4,
        "default_beats": 2,
        "beats_default": 2,
        "traces_beaten": 1,
        "sweep_beats": 1,
    }


def test_an_anchor_that_failed_tasks_does_not_beat_the_default() -> None:
    trace = {"strategies": {"adaptive": point(10.0, 1.0), "gave-up": {**point(1.0, 0.0), "failed": 2}}}
    found = pareto(trace, "adaptive", ["gave-up"])["gave-up"]
    assert not found["beats_default"] and not found["default_beats"] and found["failed"] == 2  # neither


def test_a_trace_without_the_default_has_no_points() -> None:
    assert pareto({"strategies": {"worse": point(1, 1)}}, "adaptive", ANCHORS) == {}
    assert against(point(10, 1), [point(11, 1), point(9, 0), point(12, 0)]) == (1, 1)


def test_the_replay_says_which_anchors_are_beaten_and_how() -> None:
    from airflow_adaptive.replay_cli import _pareto_line

    line = _pareto_line({**TRACE, "pareto": pareto(TRACE, "adaptive", ANCHORS)})
    assert line == (
        "adaptive beats 2 of 4 anchors (no more waste and no more kills), 1 of them an exact tie (same); "
        "some budget of its sweep beats 1; beaten the same way by better"
    )
