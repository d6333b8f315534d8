"""KS+ memory segments over time, from hand-computed cases."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from airflow_adaptive.core.sizing.ksplus import (
    KSPlusModel,
    Segments,
    fit_ksplus,
    retry_segments,
    segment_series,
)
from airflow_adaptive.core.units import MB
from airflow_adaptive.exceptions import InvalidSettingError

GB = 10**9


def staircase(ends: Sequence[float], peaks_mb: Sequence[float]) -> tuple[list[float], list[float]]:
    """Samples every second from 0 to the last end, at peaks_mb[i] (in MB) from ends[i-1] on."""
    times = np.arange(0.0, ends[-1] + 0.5, 1.0)
    level = np.searchsorted(np.asarray(ends[:-1]), times, side="right")
    return times.tolist(), (np.asarray(peaks_mb)[level] * MB).tolist()


# Seven levels (six rises); samples each second, dips below the running maximum at 5, 20, 40, 65.
STAIRS = {
    (0, 10): 100,
    (10, 12): 110,
    (12, 30): 200,
    (30, 31): 500,
    (31, 50): 510,
    (50, 60): 900,
    (60, 71): 1000,
}
DIPS = {5: 90, 20: 150, 40: 505, 65: 950}


def stairs() -> tuple[list[float], list[float]]:
    times = list(range(71))
    usage = [next(v for (a, b), v in STAIRS.items() if a <= t < b) for t in times]
    for t, v in DIPS.items():
        usage[t] = v
    return [float(t) for t in times], [float(u) for u in usage]


# Steps (start, level, length): A 0/100/10, B 10/110/2, C 12/200/18, D 30/500/1, E 31/510/19,
# F 50/900/10, G 60/1000/10 (to the last sample, 70). Merge costs, rise x lower length:
#   A-B 10x10=100, B-C 90x2=180, C-D 300x18=5400, D-E 10x1=10, E-F 390x19=7410, F-G 100x10=1000
# 1. D-E (10) -> DE 30..50 at 510, length 20; now C-DE 310x18=5580, DE-F 390x20=7800
# 2. A-B (100) -> AB 0..12 at 110, length 12; now AB-C 90x12=1080
# 3. F-G (1000, below AB-C's 1080) -> FG 50..70 at 1000; now DE-FG 490x20=9800
# k = 4: AB, C, DE, FG.
@pytest.mark.parametrize(
    ("k", "ends", "peaks"),
    [
        (7, (10, 12, 30, 31, 50, 60, 70), (100, 110, 200, 500, 510, 900, 1000)),
        (6, (10, 12, 30, 50, 60, 70), (100, 110, 200, 510, 900, 1000)),
        (5, (12, 30, 50, 60, 70), (110, 200, 510, 900, 1000)),
        (4, (12, 30, 50, 70), (110, 200, 510, 1000)),
        (1, (70,), (1000,)),
    ],
)
def test_a_staircase_is_merged_by_least_rise_times_length(
    k: int, ends: tuple[float, ...], peaks: tuple[float, ...]
) -> None:
    assert segment_series(*stairs(), k=k) == (ends, peaks)


def test_fewer_steps_than_k_repeat_the_last_segment() -> None:
    times, usage = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0], [100.0, 100.0, 300.0, 250.0, 300.0, 280.0]
    assert segment_series(times, usage, 4) == ((4, 10, 10, 10), (100, 300, 300, 300))
    assert segment_series([0.0, 5.0], [7.0, 7.0], 3) == ((5, 5, 5), (7, 7, 7))  # flat: one step


def test_per_segment_regressions_predict_ends_x085_and_peaks_x11() -> None:
    # Input g GB: ends 10g, 20g, 30g, 40g s; peaks 300i + 100g MB, except the top of g = 3 (1700).
    train = []
    for g in (1, 2, 3):
        tops = (300 + 100 * g, 600 + 100 * g, 900 + 100 * g, 1700 if g == 3 else 1300 + 100 * g)
        train.append((g * GB, *staircase([10 * g, 20 * g, 30 * g, 40 * g], tops)))
    model = fit_ksplus(train)
    assert model is not None and model.tasks == 3
    got = model.predict(4 * GB)
    assert got.ends_s == pytest.approx((0.85 * 40, 0.85 * 80, 0.85 * 120, 0.85 * 160))
    # Top peaks 1400, 1500, 1700 MB: OLS slope 150 MB/GB, intercept 1533.33 - 300 = 1233.33
    expected = (1.1 * 700, 1.1 * 1000, 1.1 * 1300, 1.1 * (1233.3333 + 600))
    assert got.peaks_bytes == pytest.approx([p * MB for p in expected], rel=1e-6)


def test_predicted_ends_and_peaks_are_made_non_decreasing() -> None:
    # Lines through (1 GB, 2 GB): end_1 10 -> 30, end_2 20 -> 32, peak_3 900 -> 600 MB.
    train = [
        (1 * GB, *staircase([10, 20, 30, 40], [200, 300, 900, 1000])),
        (2 * GB, *staircase([30, 32, 40, 80], [400, 500, 600, 1000])),
    ]
    model = fit_ksplus(train)
    assert model is not None
    got = model.predict(3 * GB)
    # At 3 GB: ends 50, 44, 50, 120 x 0.85 = 42.5, 37.4, 42.5, 102; end_1 is pulled down to end_2
    assert got.ends_s == pytest.approx((37.4, 37.4, 42.5, 102.0))
    # peaks 600, 700, 300, 1000 MB x 1.1 = 660, 770, 330, 1100; peak_3 is raised to peak_2
    assert got.peaks_bytes == pytest.approx([660 * MB, 770 * MB, 770 * MB, 1100 * MB], rel=1e-9)


def test_negative_ends_stop_at_zero_and_peaks_at_the_floor() -> None:
    model = KSPlusModel(
        end_lines=((0.0, -5.0), (0.0, 20.0)), peak_lines=((0.0, 10.0 * MB), (0.0, 50.0 * MB)), tasks=2
    )
    assert model.predict(GB) == Segments((0.0, 17.0), (100 * MB, 100 * MB))


def test_limit_at_boundaries_belongs_to_the_later_segment() -> None:
    seg = Segments((10.0, 20.0, 30.0, 40.0), (100, 200, 300, 400))
    expected = {
        -1.0: 100,
        0.0: 100,
        9.999: 100,
        10.0: 200,
        19.99: 200,
        20.0: 300,
        30.0: 400,
        40.0: 400,
        1e6: 400,
    }
    assert {t: seg.limit_at(t) for t in expected} == expected


def test_a_kill_in_a_middle_segment_starts_the_next_one_there() -> None:
    seg = Segments((10.0, 20.0, 30.0, 40.0), (100, 200, 300, 400))
    # killed at 15 in segment 2 (10..20): it ends at 15, the later ends move 5 s earlier
    assert retry_segments(seg, 15.0) == Segments((10.0, 15.0, 25.0, 35.0), (100, 200, 300, 400))
    # at a boundary the later segment is in force: killed at 10 in segment 2 -> shift 10
    assert retry_segments(seg, 10.0) == Segments((10.0, 10.0, 20.0, 30.0), (100, 200, 300, 400))
    assert retry_segments(seg, 4.0) == Segments((4.0, 14.0, 24.0, 34.0), (100, 200, 300, 400))


def test_a_kill_skips_later_segments_of_the_same_peak() -> None:
    seg = Segments((10.0, 20.0, 30.0, 40.0), (100, 200, 200, 400))
    # the next higher peak (400) starts at 30: shift 15, segments 2 and 3 end at the kill
    got = retry_segments(seg, 15.0)
    assert got == Segments((10.0, 15.0, 15.0, 25.0), (100, 200, 200, 400))
    assert got.limit_at(15.0) == 400


def test_a_kill_in_the_last_segment_raises_its_peak_by_a_fifth() -> None:
    seg = Segments((10.0, 20.0, 30.0, 40.0), (100, 200, 300, 400))
    assert retry_segments(seg, 35.0) == Segments((10.0, 20.0, 30.0, 40.0), (100, 200, 300, 480))
    # no higher peak after segment 3: the last segment starts at the kill, x 1.2
    flat_top = Segments((10.0, 20.0, 30.0, 40.0), (100, 200, 400, 400))
    assert retry_segments(flat_top, 25.0) == Segments((10.0, 20.0, 25.0, 40.0), (100, 200, 400, 480))
    assert retry_segments(Segments((40.0,), (1,)), 3.0) == Segments((40.0,), (2,))  # grows at least 1 B


def test_one_task_or_equal_inputs_fall_back_to_means() -> None:
    one = fit_ksplus([(5 * GB, *staircase([10, 20, 30, 40], [200, 300, 400, 500]))])
    assert one is not None
    for x in (1 * GB, 9 * GB):
        got = one.predict(x)
        assert got.ends_s == pytest.approx((8.5, 17.0, 25.5, 34.0))
        assert got.peaks_bytes == pytest.approx([220 * MB, 330 * MB, 440 * MB, 550 * MB], rel=1e-9)
    same = fit_ksplus(
        [
            (2 * GB, *staircase([10, 20, 30, 40], [200, 300, 400, 500])),
            (2 * GB, *staircase([20, 30, 40, 60], [400, 500, 600, 700])),
        ]
    )
    assert same is not None
    got = same.predict(7 * GB)  # means: ends 15, 25, 35, 50 s; peaks 300, 400, 500, 600 MB
    assert got.ends_s == pytest.approx((12.75, 21.25, 29.75, 42.5))
    assert got.peaks_bytes == pytest.approx([330 * MB, 440 * MB, 550 * MB, 660 * MB], rel=1e-9)


def test_no_tasks_no_model() -> None:
    assert fit_ksplus([]) is None
    assert fit_ksplus([(GB, [], [])]) is None  # a task without samples teaches nothing


def test_bad_settings_are_typed_errors() -> None:
    with pytest.raises(InvalidSettingError):
        fit_ksplus([(GB, *staircase([10, 20], [200, 300]))], k=0)
    with pytest.raises(InvalidSettingError):
        segment_series([0.0, 1.0], [1.0, 2.0], k=-1)
    with pytest.raises(InvalidSettingError):
        segment_series([0.0, 1.0], [1.0], k=2)
    with pytest.raises(InvalidSettingError):
        Segments((10.0, 20.0), (300, 200))
