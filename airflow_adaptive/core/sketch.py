"""A mergeable, subtractable log-bucket histogram: quantiles of a distribution kept in O(buckets).

The store keeps distributions (completed peaks, every family's mean demand) up to date as
attempts are recorded, so a decision reads one row instead of scanning attempts. Values are
counted in buckets whose edges grow by ``RELATIVE_WIDTH`` (DDSketch's idea), so any quantile is
known within that relative error; unlike a sample, a value can be removed again when a family's
mean moves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

RELATIVE_WIDTH = 0.01  # bucket i covers (g^(i-1), g^i] with g = 1.01: quantiles within 1 %
_LOG_G = math.log1p(RELATIVE_WIDTH)
ZERO_BUCKET = "z"  # values <= 0 (a family that used no CPU, no I/O)


def bucket_of(value: float) -> str:
    if not value > 0 or not math.isfinite(value):
        return ZERO_BUCKET
    return str(math.ceil(math.log(value) / _LOG_G))


def bucket_value(bucket: str) -> float:
    """The upper edge of a bucket: quantiles err on the high side, as sizing should."""
    return 0.0 if bucket == ZERO_BUCKET else math.exp(int(bucket) * _LOG_G)


def _order(bucket: str) -> float:
    return -math.inf if bucket == ZERO_BUCKET else int(bucket)


class LogHistogram:
    """Counts per bucket; ``add(v, -1)`` removes a value added before."""

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        self.counts: dict[str, int] = {k: int(v) for k, v in (counts or {}).items() if int(v) > 0}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, value: float, weight: int = 1) -> None:
        key = bucket_of(value)
        left = self.counts.get(key, 0) + weight
        if left > 0:
            self.counts[key] = left
        else:
            self.counts.pop(key, None)

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile, interpolated linearly between ranks as ``numpy.quantile`` does, with
        each value read as its bucket's upper edge (None when empty)."""
        total = self.total
        if total == 0:
            return None
        position = (total - 1) * min(max(q, 0.0), 1.0)
        below = math.floor(position)
        ordered = sorted(self.counts, key=_order)
        low, high = self._at_rank(ordered, below), self._at_rank(ordered, min(below + 1, total - 1))
        return low + (high - low) * (position - below)

    def _at_rank(self, ordered: list[str], rank: int) -> float:
        """The value of the ``rank``-th smallest counted value (0-based)."""
        seen = 0
        for key in ordered:
            seen += self.counts[key]
            if seen > rank:
                return bucket_value(key)
        raise IndexError(rank)

    def ascending(self) -> list[tuple[float, int]]:
        """(bucket upper edge, count) for every counted bucket, smallest first."""
        return [(bucket_value(key), self.counts[key]) for key in sorted(self.counts, key=_order)]

    def share_below(self, value: float) -> float:
        """The share of counted values in buckets below ``value``'s (0 when empty)."""
        total = self.total
        if not total:
            return 0.0
        below = sum(count for key, count in self.counts.items() if _order(key) < _order(bucket_of(value)))
        return below / total

    def log_variance(self) -> tuple[float, int]:
        """The sample variance of the logs of the counted values (each its bucket's middle, in
        log) and its degrees of freedom, n - 1; zero values are left out."""
        counts = [(int(key), n) for key, n in self.counts.items() if key != ZERO_BUCKET]
        total = sum(n for _, n in counts)
        if total < 2:
            return 0.0, 0
        # integer sums of bucket indices: the same answer in any order the buckets are read
        first, second = sum(i * n for i, n in counts), sum(i * i * n for i, n in counts)
        squares = (second * total - first * first) / total
        return squares * _LOG_G**2 / (total - 1), total - 1  # bucket index differences, in log

    def combined(self, other: LogHistogram, sign: int = 1) -> LogHistogram:
        """A new histogram: this one with ``other``'s counts added (``sign=-1``: removed)."""
        result = LogHistogram(self.counts)
        for key, count in other.counts.items():
            left = result.counts.get(key, 0) + sign * count
            if left > 0:
                result.counts[key] = left
            else:
                result.counts.pop(key, None)
        return result

    def to_json(self) -> dict[str, int]:
        return dict(self.counts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogHistogram) and self.counts == other.counts

    def __repr__(self) -> str:
        return f"LogHistogram({self.total} values in {len(self.counts)} buckets)"
