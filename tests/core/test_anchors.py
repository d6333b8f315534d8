"""Each published strategy against a case computed by hand from its source (paper equation or file).

The numbers in the comments are the hand computation; the assertions compare the predictor's
answer with it, so a strategy that drifts from its source fails here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from airflow_adaptive.core.sizing import Sample, make_predictor
from airflow_adaptive.core.sizing.bucketing import ExhaustiveBuckets, GreedyBuckets, expected_cost
from airflow_adaptive.core.units import GIB, MB, MIB

# Witt et al. 2019, section IV.B: five (input, peak) points, in MiB.
# OLS: x mean 3, y mean 5.4, Sxy = 14, Sxx = 10, so f(x) = 1.2 + 1.4 x;
# f = 2.6, 4.0, 5.4, 6.8, 8.2 and y - f = -0.6, 1.0, -1.4, 2.2, -1.2 (under-predictions: 1.0, 2.2).
WITT_POINTS = [(1, 2), (2, 5), (3, 4), (4, 9), (5, 7)]
F_AT_6 = 1.2 + 1.4 * 6  # 9.6


def witt_samples() -> list[Sample]:
    return [Sample(y * MIB, x * MIB, 60.0) for x, y in WITT_POINTS]


@pytest.mark.parametrize(
    ("name", "offset_mib"),
    [
        # (1): sqrt((0.36 + 1 + 1.96 + 4.84 + 1.44) / (5 - 1)) = sqrt(2.4)
        ("lr-mean+-", math.sqrt(2.4)),
        # (2): sqrt((1.0^2 + 2.2^2) / (2 - 1)) = sqrt(5.84); the spread of 1.0 and 2.2 would be 0.6
        ("lr-mean-", math.sqrt(5.84)),
        # (3): the largest under-prediction
        ("lr-max-", 2.2),
    ],
)
def test_regression_offsets_follow_witt_equations(name: str, offset_mib: float) -> None:
    predictor = make_predictor(name).fit(witt_samples())
    assert predictor.predict(6 * MIB) == pytest.approx((F_AT_6 + offset_mib) * MIB, abs=2)


def test_lr_mean_minus_with_one_under_prediction_adds_its_distance() -> None:
    # y = 1, 3, 3 at x = 1, 2, 3: f(x) = 1/3 + x; y - f = -1/3, 2/3, -1/3: m = 1, offset 2/3
    samples = [Sample(y * MIB, x * MIB, 1.0) for x, y in [(1, 1), (2, 3), (3, 3)]]
    predictor = make_predictor("lr-mean-").fit(samples)
    assert predictor.predict(4 * MIB) == pytest.approx((1 / 3 + 4 + 2 / 3) * MIB, abs=2)


def test_percentiles_are_witts_pc50_and_pc95() -> None:
    samples = [Sample(k * GIB, None, 1.0) for k in range(1, 21)]  # 1 .. 20 GiB
    # numpy's linear interpolation: rank 0.95 * 19 = 18.05, between 19 and 20 GiB; median 10.5 GiB
    assert make_predictor("pc95").fit(samples).predict() == pytest.approx(19.05 * GIB, abs=2)
    assert make_predictor("pc50").fit(samples).predict() == pytest.approx(10.5 * GIB, abs=2)


def vpa_bucket_end(index: int) -> float:
    """util/histogram.go: bucket i starts at 1e7 (1.05^i - 1) / 0.05 bytes; its end is bucket i+1's start."""
    return 1e7 * (1.05 ** (index + 1) - 1) / 0.05


def test_vpa_reads_p90_from_its_exponential_histogram_then_adds_margin_and_floor() -> None:
    samples = [Sample(k * 100 * MB, None, 1.0) for k in range(1, 11)]  # 100 .. 1000 MB
    # threshold 0.9 x 10 = 9 samples: the 9th smallest, 900 MB, is in bucket
    # floor(ln(900e6 x 0.05 / 1e7 + 1) / ln 1.05) = floor(34.94) = 34, which ends at 903.2 MB
    # (numpy's interpolated 910 MB would be in bucket 35, ending at 958.4 MB)
    assert 1e7 * (1.05**34 - 1) / 0.05 <= 900 * MB < vpa_bucket_end(34)
    assert make_predictor("vpa").fit(samples).predict() == pytest.approx(vpa_bucket_end(34) * 1.15, abs=2)
    # 50 MB peaks: bucket 4 ends at 55.3 MB, +15 % = 63.5 MB, below the 250 MiB pod minimum
    small = [Sample(50 * MB, None, 1.0)] * 10
    assert make_predictor("vpa").fit(small).predict() == 250 * MIB


def test_vpa_bumps_an_oom_kill_by_a_fifth_or_100_mib() -> None:
    predictor = make_predictor("vpa").fit([Sample(GIB, None, 1.0)] * 10)
    assert predictor.retry(GIB) == int(GIB * 1.2)  # 1.2 GiB > 1 GiB + 100 MiB
    assert predictor.retry(200 * MIB) == 300 * MIB  # 200 MiB + 100 MiB > 240 MiB


def tovar_samples() -> list[Sample]:
    # (peak MB, seconds): CCTools' 250 MB buckets hold {100, 200}, {300, 400}, {900}
    return [Sample(p * MB, None, t) for p, t in [(100, 100), (200, 100), (300, 10), (400, 10), (900, 10)]]


def test_tovar_min_waste_minimises_first_allocation_plus_retries_at_the_maximum() -> None:
    # a_m = 1000 MB, mean runtime 46 s; T(>a) = runtime of the tasks above a / 5:
    # a = 250 MB: 250 x 46 + 1000 x 30/5 = 17,500; a = 500: 23,000 + 2,000; a = 1000: 46,000
    predictor = make_predictor("tovar-min-waste").fit(tovar_samples())
    assert predictor.predict() == 250 * MB
    assert predictor.retry(250 * MB) == 1000 * MB


def test_tovar_max_throughput_maximises_tasks_per_time() -> None:
    # (P(r<=a) a_m / a + P(r>a)) / (46 + T(>a)): a = 250 MB: (0.4 x 4 + 0.6) / 52 = 0.0423;
    # a = 500: (0.8 x 2 + 0.2) / 48 = 0.0375; a = 750: 1.267 / 48 = 0.0264; a = 1000: 1 / 46 = 0.0217
    predictor = make_predictor("tovar-max-throughput").fit(tovar_samples())
    assert predictor.predict() == 250 * MB


def test_doubling_starts_at_an_eighth_of_the_node_and_doubles() -> None:
    predictor = make_predictor("doubling", cap_bytes=64 * GIB).fit([])
    assert predictor.predict() == 8 * GIB
    assert predictor.retry(8 * GIB) == 16 * GIB
    assert predictor.retry(48 * GIB) == 64 * GIB  # never above the node


def test_phung_quantized_buckets_hold_equal_counts_and_climb_on_failure() -> None:
    samples = [Sample(k * GIB, None, 1.0) for k in range(1, 10)] + [Sample(9 * GIB, None, 1.0)]
    # ten sorted peaks, three buckets of (as near as possible) equal counts: edges at the
    # 1/3, 2/3 and 3/3 points of the empirical distribution: 4, 7 and 9 GiB
    predictor = make_predictor("quantized-buckets", cap_bytes=64 * GIB).fit(samples)
    assert predictor.predict() == 4 * GIB
    assert [predictor.retry(4 * GIB), predictor.retry(7 * GIB), predictor.retry(9 * GIB)] == [
        7 * GIB,
        9 * GIB,
        64 * GIB,
    ]


def test_phung_kmeans_buckets_end_at_each_clusters_largest_peak() -> None:
    peaks_gib = [1.0, 1.1, 1.2, 1.3, 5.0, 5.2, 5.4, 9.0, 9.5, 9.9]
    predictor = make_predictor("kmeans-buckets", cap_bytes=64 * GIB).fit(
        [Sample(int(p * GIB), None, 1.0) for p in peaks_gib]
    )
    assert predictor.predict() == int(1.3 * GIB)
    assert predictor.retry(int(1.3 * GIB)) == int(5.4 * GIB)
    assert predictor.retry(int(5.4 * GIB)) == int(9.9 * GIB)


def test_cctools_bucketing_costs_and_splits_two_modes() -> None:
    # Five tasks of 1 GiB and five of 8 GiB, equal weights. One bucket (8 GiB): each task wastes
    # 8 - 4.5 on average = 3.5 GiB. Two buckets {1}, {8} drawn with p = 1/2 each: a 1 GiB task
    # given 8 wastes 7, an 8 GiB task given 1 wastes 1 then gets 8: (0 + 1 + 7 + 0) / 4 = 2 GiB.
    assert expected_cost(np.array([8.0]), np.array([1.0]), np.array([4.5])) == pytest.approx(3.5)
    two = expected_cost(np.array([1.0, 8.0]), np.array([0.5, 0.5]), np.array([1.0, 8.0]))
    assert two == pytest.approx(2.0)
    samples = [Sample(GIB, None, 1.0)] * 5 + [Sample(8 * GIB, None, 1.0)] * 5
    for predictor in (GreedyBuckets(recency_decay=0.0), ExhaustiveBuckets(recency_decay=0.0)):
        predictor.fit(samples)
        assert predictor.edges_.tolist() == [GIB, 8 * GIB]
        assert predictor.probs_.tolist() == pytest.approx([0.5, 0.5])
        assert predictor.retry(GIB) == 8 * GIB
