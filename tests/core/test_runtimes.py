"""A family's expected runtime per node group (core/runtimes.py) on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from airflow_adaptive.core.runtimes import (
    LOTARU_WEIGHTS,
    PRIOR_RUNS,
    Run,
    feature_scores,
    fit_runtimes,
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


def test_a_groups_own_runs_move_its_estimate_beyond_the_benchmarks_shrunk() -> None:
    # Group 2 runs 1.5x slower than the benchmarks say, against one run on group 1 that they explain.
    runs = [Run(2, 200.0), Run(2, 200.0), Run(2, 200.0), Run(1, 100.0 * 4 / 3)]
    model = fit_runtimes(runs, {1: SCORES[1], 2: SCORES[2]})
    assert model is not None
    # Halves and {cpu: 1} etc. are compared; whichever wins, the residuals of group 2 sum to
    # 3·(log 200 - a - f2) and its offset is that over 3 + PRIOR_RUNS.
    f = {g: model.expected({g: SCORES[g]})[g].seconds for g in (1, 2)}
    ys = {1: math.log(100.0 * 4 / 3), 2: math.log(200.0)}
    base = {g: math.log(f[g]) - model.offsets[g] for g in (1, 2)}
    assert model.offsets[2] == pytest.approx(3 * (ys[2] - base[2]) / (3 + PRIOR_RUNS))
    assert model.offsets[1] == pytest.approx((ys[1] - base[1]) / (1 + PRIOR_RUNS))
    assert f[2] > f[1] * 0.75 * 1.1  # slower than the benchmarks alone say (they say 0.75x group 1)


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


def test_no_usable_runs_means_no_model() -> None:
    assert fit_runtimes([], SCORES) is None
    assert fit_runtimes([Run(9, 10.0), Run(2, 0.0), Run(2, math.inf)], SCORES) is None
