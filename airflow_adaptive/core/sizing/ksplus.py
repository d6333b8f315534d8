"""KS+ (Bader et al., e-Science 2024): a task's memory as k segments over time, from its input size.

Training: each finished task's memory series is cut where usage first reaches a new maximum (its
running maximum is a step function, each step a segment), then neighbouring segments are merged,
always the pair whose merge over-allocates least, until k remain. Per segment, one linear
regression on input size predicts its end time (x 0.85, so the higher segment starts early) and
one its peak (x 1.1). The allocation holds peak_1 until end_1, peak_2 until end_2, ..., and the
last peak from end_{k-1} until the task ends. Successor of k-Segments (arXiv 2311.08185), which cut
every series into k equal parts.

Choices where the paper (arXiv 2408.12290) and its public code leave room, and why:

- Time is continuous (our samples are irregular): a segment ends when the next one's first new
  maximum is sampled, the first starts at 0 and the last ends at the last sample. Merging a lower
  segment into the higher one after it costs (peak rise) x (the lower segment's length): the
  memory-time the merge adds to the allocation. Ties go to the earliest pair.
- A series with fewer than k steps (flat, or one jump) is padded by repeating its last segment's
  end and peak: zero-length segments at its end, so the series is still described exactly and the
  upper segments' regressions see its top peak (erring high).
- Predicted ends are made non-decreasing from the last one backwards (end_i = min(end_i,
  end_i+1)), as the public code does: a later boundary pulls an earlier one forward, so higher
  segments start earlier rather than later. The last end matters only as that bound. Ends are at
  least 0; peaks are made non-decreasing forwards from a floor of 100 MB (k-Segments' minimum).
- Without a slope to learn (one task, or all inputs equal) each regression is the mean.
- Retry after an OOM kill at f in segment i: the next segment with a higher peak (j > i) starts at
  f; it and every later boundary move earlier by the same shift, and the segments between, which
  hold i's peak, end at f. The limit at f thus always rises. (The public code scales the later
  ends by f / end_i instead of shifting them, and takes the very next segment even when its peak
  is equal, which can fail again at f.) A kill in the last segment, or where no later peak is
  higher, starts the last segment at f with its peak x 1.2.
- Tasks without samples are skipped; with none left there is no model (None), and the caller
  keeps the user's request.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ...exceptions import InvalidSettingError
from ..units import MB

DEFAULT_K = 4
END_FACTOR = 0.85  # predicted ends shrink: a higher segment starting early wastes less than a kill
PEAK_FACTOR = 1.1
LAST_PEAK_RETRY = 1.2
MIN_PEAK_BYTES = 100 * MB

Line = tuple[float, float]  # (slope, intercept) of a regression on input bytes
TrainRow = tuple[float, Sequence[float], Sequence[float]]  # (input_bytes, times_s, usage_bytes)


@dataclass(frozen=True)
class Segments:
    """An allocation over time: peaks_bytes[i] is in force from ends_s[i-1] (0 for i = 0) until
    ends_s[i]; the last segment runs to the end of the task, so the last end is ignored."""

    ends_s: tuple[float, ...]
    peaks_bytes: tuple[int, ...]

    def __post_init__(self) -> None:
        ends, peaks = self.ends_s, self.peaks_bytes
        if not ends or len(ends) != len(peaks):
            raise InvalidSettingError(
                f"segments need as many ends as peaks (>= 1), got {len(ends)} and {len(peaks)}"
            )
        if not all(math.isfinite(e) for e in ends) or any(a > b for a, b in pairwise(ends)):
            raise InvalidSettingError(f"segment ends must be finite and non-decreasing: {ends}")
        if peaks[0] <= 0 or any(a > b for a, b in pairwise(peaks)):
            raise InvalidSettingError(f"segment peaks must be positive and non-decreasing: {peaks}")

    @property
    def k(self) -> int:
        return len(self.peaks_bytes)

    def segment_at(self, t_s: float) -> int:
        """Index of the segment in force at t_s; at a boundary the later segment already holds."""
        return bisect_right(self.ends_s, t_s, 0, self.k - 1)

    def limit_at(self, t_s: float) -> int:
        return self.peaks_bytes[self.segment_at(t_s)]


def segment_series(
    times_s: Sequence[float], usage_bytes: Sequence[float], k: int = DEFAULT_K
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The (ends, peaks) of one memory series cut into k segments (padded when it has fewer steps)."""
    _check_k(k)
    t, u = _series(times_s, usage_bytes)
    if t.size == 0:
        raise InvalidSettingError("a memory series needs at least one sample")
    running = np.maximum.accumulate(u)
    steps = np.flatnonzero(np.r_[True, u[1:] > running[:-1]])  # samples reaching a new maximum
    # Within a step no sample exceeds its first, so the step's peak is that sample's usage.
    ends = [*(float(x) for x in t[steps[1:]]), float(t[-1])]
    ends, peaks = _merge(ends, [float(x) for x in u[steps]], k)
    pad = k - len(ends)
    return tuple(ends + ends[-1:] * pad), tuple(peaks + peaks[-1:] * pad)


def _series(times_s: Sequence[float], usage_bytes: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(times_s, dtype=float)
    u = np.asarray(usage_bytes, dtype=float)
    if t.shape != u.shape or t.ndim != 1:
        raise InvalidSettingError(
            f"times and usage must be flat and of one length, got {t.shape} and {u.shape}"
        )
    if not (np.isfinite(t).all() and np.isfinite(u).all()):
        raise InvalidSettingError("times and usage must be finite")
    order = np.argsort(t, kind="stable")
    return t[order], u[order]


def _merge(ends: list[float], peaks: list[float], k: int) -> tuple[list[float], list[float]]:
    """Greedy merging of neighbours by least (rise x lower length), in O(n log n) with a heap.

    Peaks rise strictly from segment to segment, so a merge keeps the higher peak and the later
    end. Heap entries carry a version so that those of a changed pair are skipped when popped.
    """
    n = len(peaks)
    lengths = [max(e - s, 0.0) for s, e in zip([0.0, *ends[:-1]], ends, strict=True)]
    after, before = list(range(1, n + 1)), list(range(-1, n - 1))
    alive, version = [True] * n, [0] * n

    def cost(i: int) -> float:
        return (peaks[after[i]] - peaks[i]) * lengths[i]

    heap = [(cost(i), i, 0) for i in range(n - 1)]
    heapq.heapify(heap)
    remaining = n
    while remaining > k and heap:
        _, i, v = heapq.heappop(heap)
        if not alive[i] or v != version[i] or after[i] >= n:
            continue  # stale: the pair changed since this entry was pushed
        j = after[i]
        lengths[i] += lengths[j]
        peaks[i], ends[i], alive[j] = peaks[j], ends[j], False
        after[i] = after[j]
        if after[j] < n:
            before[after[j]] = i
        remaining -= 1
        for m in (i, before[i]):  # the pairs on both sides of the merged segment changed
            if m >= 0 and after[m] < n:
                version[m] += 1
                heapq.heappush(heap, (cost(m), m, version[m]))
    kept = [i for i in range(n) if alive[i]]
    return [ends[i] for i in kept], [peaks[i] for i in kept]


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidSettingError(f"KS+ needs k >= 1 segments, got {k!r}")


def _line(x: np.ndarray, y: np.ndarray) -> Line:
    """Ordinary least squares of y on x (scikit-learn's LinearRegression, closed form); the mean
    when x does not vary."""
    dx = x - x.mean()
    spread = float(dx @ dx)
    if x.size < 2 or spread <= 0.0:
        return 0.0, float(y.mean())
    slope = float(dx @ (y - y.mean())) / spread
    return slope, float(y.mean()) - slope * float(x.mean())


@dataclass(frozen=True)
class KSPlusModel:
    """Per segment, a line for its end time and one for its peak, both on input bytes."""

    end_lines: tuple[Line, ...]
    peak_lines: tuple[Line, ...]
    tasks: int  # training tasks behind the lines
    min_peak_bytes: int = MIN_PEAK_BYTES
    end_factor: float = END_FACTOR
    peak_factor: float = PEAK_FACTOR

    def predict(self, input_bytes: float) -> Segments:
        if not math.isfinite(input_bytes) or input_bytes < 0:
            raise InvalidSettingError(f"input size must be finite and >= 0 bytes, got {input_bytes!r}")
        ends = [max((a * input_bytes + b) * self.end_factor, 0.0) for a, b in self.end_lines]
        for i in range(len(ends) - 2, -1, -1):  # backwards: later boundaries pull earlier ones forward
            ends[i] = min(ends[i], ends[i + 1])
        peaks: list[int] = []
        floor = max(self.min_peak_bytes, 1)  # at least one byte, whatever the setting
        for a, b in self.peak_lines:
            floor = max(floor, round((a * input_bytes + b) * self.peak_factor))
            peaks.append(floor)
        return Segments(tuple(ends), tuple(peaks))


def fit_ksplus(
    train: Sequence[TrainRow], k: int = DEFAULT_K, *, min_peak_bytes: int = MIN_PEAK_BYTES
) -> KSPlusModel | None:
    """train: (input_bytes, times_s, usage_bytes) per finished task of one family; None without
    a task that has samples."""
    _check_k(k)
    rows = [(float(x), segment_series(t, u, k)) for x, t, u in train if len(t) or len(u)]
    if not rows:
        return None
    x = np.array([r[0] for r in rows])
    if not np.isfinite(x).all() or (x < 0).any():
        raise InvalidSettingError("input sizes must be finite and >= 0 bytes")
    ends = np.array([r[1][0] for r in rows])  # (tasks, k)
    peaks = np.array([r[1][1] for r in rows])
    return KSPlusModel(
        end_lines=tuple(_line(x, ends[:, i]) for i in range(k)),
        peak_lines=tuple(_line(x, peaks[:, i]) for i in range(k)),
        tasks=len(rows),
        min_peak_bytes=min_peak_bytes,
    )


def retry_segments(segments: Segments, killed_at_s: float) -> Segments:
    """The next try's segments after an OOM kill at killed_at_s seconds from the start."""
    f = max(float(killed_at_s), 0.0)
    ends, peaks = list(segments.ends_s), list(segments.peaks_bytes)
    i = segments.segment_at(f)
    higher = next((j for j in range(i + 1, len(peaks)) if peaks[j] > peaks[i]), None)
    if higher is None:  # nothing higher follows: the last segment starts at f and grows
        for m in range(i, len(ends) - 1):
            ends[m] = f
        peaks[-1] = max(round(peaks[-1] * LAST_PEAK_RETRY), peaks[-1] + 1)
        return Segments(tuple(ends), tuple(peaks))
    shift = ends[higher - 1] - f  # > 0: segment i was in force at f, so it ended after f
    for m in range(i, len(ends)):
        ends[m] = f if m < higher else ends[m] - shift
    return Segments(tuple(ends), tuple(peaks))
