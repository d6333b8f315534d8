"""A family's expected runtime per node group (core/runtimes.py) on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from airflow_adaptive.core.runtimes import (
    LOTARU_WEIGHTS,
    MAX_SIZE_SLOPE,
    Run,
    _group_offsets,
    feature_scores,
    fit_runtimes,
    recorded_runs,
)

# Group 1 is slow on CPU, group 3 fast on CPU and slow on I/O; group 2 is the mean of the two.
SCORES = {
    1: {"cpu": 200.0, "io": 600.0},
    2: {"cpu": 400.0, "io": 400.0},
    3: {"cpu": 600.0, "io": 200.0},
}


def test_feature_scores_are_geometric_means_of_each_features_benchmarks() -> None:
    scores = feature_scores({"cpu_events_per_s": 400, "io_seq_read_iops": 100, "io_rand_read_iops": 400})
    assert scores == pytest.approx({"cpu": 400.0, "io": 200.0})
    assert feature_scores({"unrelated": 5.0, "memory_mib_per_s": 0.0}) == {}


def test_one_group_keeps_lotarus_halves_and_scales_by_them() -> None:
    model = fit_runtimes([Run(2, 100.0), Run(2, 100.0)], SCORES)
    assert model is not None and model.weights == LOTARU_WEIGHTS
    # Reference: cpu 400, io 400. Group 1: 0.5·400/200 + 0.5·400/600 = 1 + 1/3; group 3 the same.
    expected = model.expected(SCORES)
    assert expected[2].seconds == pytest.approx(100.0)
    assert expected[1].seconds == pytest.approx(100.0 * 4 / 3)
    assert expected[3].seconds == pytest.approx(100.0 * 4 / 3)
    assert (expected[2].runs, expected[1].runs) == (2, 0)


def test_runs_on_two_groups_teach_which_resource_binds_the_family() -> None:
    # Runtime follows the CPU score exactly: 400/200 = 2x slower on group 1, 400/600 on group 3.
    runs = [Run(1, 200.0), Run(1, 200.0), Run(3, 100.0 * 2 / 3), Run(3, 100.0 * 2 / 3)]
    model = fit_runtimes(runs, SCORES)
    assert model is not None and model.weights == {"cpu": 1.0}
    assert model.log_spread == pytest.approx(0.0, abs=1e-9)
    expected = model.expected(SCORES)
    assert expected[2].seconds == pytest.approx(100.0)  # never ran there: from the benchmarks alone
    assert expected[3].seconds == pytest.approx(200.0 / 3)
    io_bound = fit_runtimes([Run(1, 100.0 * 2 / 3), Run(3, 200.0)], SCORES)
    assert io_bound is not None and io_bound.weights == {"io": 1.0}


def test_a_groups_own_runs_count_as_far_as_they_differ_beyond_the_noise() -> None:
    # Residuals 0.1, 0.3 on group 1 and -0.1, -0.3 on group 2: means +-0.2, pooled within-group
    # variance 0.04 / 2 = 0.02, variance of the means 0.08, so tau^2 = 0.08 - 0.02 / 2 = 0.07 and
    # each mean is shrunk by 0.07 / (0.07 + 0.02 / 2) = 0.875.
    groups = np.array([1, 1, 2, 2])
    counts, offsets = _group_offsets(groups, np.array([0.1, 0.3, -0.1, -0.3]))
    assert counts == {1: 2, 2: 2}
    assert offsets == pytest.approx({1: 0.175, 2: -0.175})
    # Means of +-0.1 that differ less than the runs' noise (sigma^2 = 0.5 / 2 = 0.25; the means'
    # variance 0.02 is below sigma^2 / 2) say nothing: tau^2 = 0 and the benchmarks stand.
    assert _group_offsets(groups, np.array([0.6, -0.4, 0.4, -0.6]))[1] == {1: 0.0, 2: 0.0}
    assert _group_offsets(np.array([3, 3]), np.array([0.3, 0.1]))[1] == {3: 0.0}  # one group: none


def test_a_group_slower_than_its_benchmarks_keeps_its_own_runtime() -> None:
    # Runtime follows the CPU score on groups 1 and 3 (runs of 200 s and 66.7 s, +-1 %), but group 2
    # runs 1.5x slower than its scores say: its estimate moves most of the way to its own runs.
    runs = [Run(1, 200.0 * k) for k in (0.99, 1.01)] + [Run(3, 200.0 / 3 * k) for k in (0.99, 1.01)]
    runs += [Run(2, 150.0 * k) for k in (0.99, 1.01)]
    model = fit_runtimes(runs, SCORES)
    assert model is not None
    expected = model.expected(SCORES)
    assert 140.0 < expected[2].seconds < 150.0 and expected[2].runs == 2


def test_runtime_follows_input_size_when_sizes_vary() -> None:
    # runtime = 10 s per GiB on group 2: slope 1 in log-log; a 4 GiB task is expected at 40 s.
    gib = 2**30
    runs = [Run(2, 10.0 * k, k * gib) for k in (1, 2, 8)]
    model = fit_runtimes(runs, SCORES)
    assert model is not None and model.slope == pytest.approx(1.0)
    assert model.expected(SCORES, 4 * gib)[2].seconds == pytest.approx(40.0)
    assert model.expected(SCORES)[2].seconds == pytest.approx(20.0)  # the typical (median) size
    unsized = fit_runtimes([Run(2, 10.0, gib), Run(2, 30.0, None), Run(2, 20.0, 2 * gib)], SCORES)
    assert unsized is not None and unsized.slope == 0.0  # one run without a size: size is not used


def test_a_steep_size_line_is_bounded_and_no_estimate_overflows() -> None:
    # Three close sizes fit a slope of about 34; it is kept at MAX_SIZE_SLOPE, so a petabyte input
    # gets a large but finite estimate instead of an OverflowError.
    runs = [Run(2, 10.0 * (k / 1000) ** 34, k) for k in (1000, 1200, 1500)]
    model = fit_runtimes(runs, SCORES)
    assert model is not None and model.slope == MAX_SIZE_SLOPE
    assert math.isfinite(model.expected(SCORES, 10**15)[2].seconds)
    shrinking = fit_runtimes([Run(2, 100.0 / k, k * 2**30) for k in (1, 2, 8)], SCORES)
    assert shrinking is not None and shrinking.slope == 0.0  # runtime falling with size: not used


def test_non_finite_benchmarks_are_no_scores() -> None:
    assert feature_scores({"cpu_events_per_s": math.inf, "memory_mib_per_s": math.nan}) == {}


def test_no_usable_runs_means_no_model() -> None:
    assert fit_runtimes([], SCORES) is None
    assert fit_runtimes([Run(9, 10.0), Run(2, 0.0), Run(2, math.inf)], SCORES) is None


def test_recorded_runs_leave_out_imported_attempts_whose_hosts_are_another_clusters() -> None:
    """A trace's host ``node1`` is not this cluster's ``node1``: only attempts Airflow ran here say
    where a family ran."""
    from airflow_adaptive.core.model import IMPORTED_DAG_ID, ExitReason, Observation, PeakKind, TaskKey, Usage

    def attempt(dag_id: str, seconds: float) -> Observation:
        usage = Usage(2**30, None, seconds, None, None, PeakKind.MEASURED)
        key = TaskKey(dag_id, "align", f"r{seconds:g}", -1, 1)
        return Observation(key, "align", usage, ExitReason.COMPLETED, 0, node_name="node1")

    window = [attempt(IMPORTED_DAG_ID, 50.0), attempt("genomics", 100.0), attempt(IMPORTED_DAG_ID, 70.0)]
    assert recorded_runs(window) == (("node1", 100.0, None),)
