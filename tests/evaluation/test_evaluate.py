"""Choosing the default's knobs in-sample and leave-one-workflow-out."""

from __future__ import annotations

from airflow_adaptive.evaluation.report import leave_one_out


def test_a_held_out_trace_is_scored_by_the_setting_chosen_on_the_others() -> None:
    # Setting 1 is best on a and b, and so in-sample; it is terrible on c. With c held out the
    # others choose 1; with a or b held out, the remaining two tie-break towards setting 0 or 1.
    ratios = [
        {"a": 1.0, "b": 1.0, "c": 0.5},
        {"a": 0.5, "b": 0.5, "c": 4.0},
    ]
    found = leave_one_out(ratios, default=0)
    assert found["in_sample"] == 0  # geometric means: 0.794 against 1.0
    assert found["held_out"]["c"] == {"chosen": 1, "ratio": 4.0}  # chosen on a, b only
    assert found["held_out"]["a"] == {"chosen": 0, "ratio": 1.0}  # b, c: 0.707 vs 1.414
    assert found["default"] == ratios[0]


def test_the_in_sample_choice_is_the_lowest_geometric_mean() -> None:
    ratios = [{"a": 2.0, "b": 0.5}, {"a": 1.1, "b": 1.1}]
    assert leave_one_out(ratios, default=1)["in_sample"] == 0  # 1.0 against 1.1
