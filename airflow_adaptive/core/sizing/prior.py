"""What tasks of other families used, as a family's decision may read it: their peaks (a cold
family that asks for no memory starts from them) and, where the store counted them, the spread
of every family's log peaks (``adaptive-pooled`` learns its small-sample prior from it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..sketch import LogHistogram

if TYPE_CHECKING:  # small_samples reads lines, which reads base, which reads this module
    from .small_samples import SpreadMoments, SpreadPrior


class PeakPrior:
    """What tasks of *other* families used, in bytes: a family with neither history nor a request
    can start at a high quantile of their peaks (:meth:`peak_bytes`; ``adaptive`` takes the one its
    OOM target allows), and double if killed, where it would otherwise start at a fixed
    ``default_bytes``.
    """

    def __init__(self, margin_fraction: float = 0.10, min_peaks: int = 20) -> None:
        self.margin_fraction = margin_fraction
        self.min_peaks = min_peaks
        self._peaks: list[float] = []
        self._peak_array: np.ndarray | None = None

    def add(self, peak_bytes: int) -> None:
        if peak_bytes > 0:
            self._peaks.append(float(peak_bytes))
            self._peak_array = None

    @property
    def peaks_seen(self) -> int:
        return len(self._peaks)

    def _scaled(self, q: float | None) -> float | None:
        return None if q is None else q * (1.0 + self.margin_fraction)

    def peak_bytes(self, quantile: float) -> float | None:
        """The ``quantile`` of the peaks of other families' tasks + the margin; None until
        ``min_peaks`` peaks were seen."""
        if len(self._peaks) < self.min_peaks:
            return None
        if self._peak_array is None:
            self._peak_array = np.asarray(self._peaks)
        return self._scaled(float(np.quantile(self._peak_array, quantile)))

    def spread(self) -> SpreadPrior | None:
        """The prior spread of a family's log peaks learnt across families (None: not known)."""
        return None

    def bound_level(self, target: float) -> float:
        """The level the small-sample bound lets through for an OOM ``target`` (the target itself:
        no families' scores known)."""
        return target

    def steady_level(self, target: float) -> float:
        """The same for the bound of a family far steadier than the prior (its own spread's)."""
        return target


class HistogramPeakPrior(PeakPrior):
    """The same prior, read from the store's maintained histogram of every recorded peak, with the
    spread learnt from every family's (``moments``; None in a store that has not counted them) and
    the small-sample bound's level calibrated on the families' ``scores`` (``bound_calibration.py``;
    a steady family's own-spread bound on ``steady_scores``)."""

    def __init__(
        self,
        peaks: LogHistogram,
        moments: SpreadMoments | None = None,
        scores: LogHistogram | None = None,
        steady_scores: LogHistogram | None = None,
        **params: Any,
    ) -> None:
        super().__init__(**params)
        self.peaks = peaks
        self.moments = moments
        self.scores = scores
        self.steady_scores = steady_scores
        self._levels: dict[tuple[bool, float], float] = {}

    def bound_level(self, target: float) -> float:
        return self._level(False, target)

    def steady_level(self, target: float) -> float:
        return self._level(True, target)

    def _level(self, steady: bool, target: float) -> float:
        from .bound_calibration import calibrated_level  # it reads base, which reads this module

        if (steady, target) not in self._levels:  # a decision may ask more than once
            self._levels[steady, target] = calibrated_level(
                self.steady_scores if steady else self.scores, target
            )
        return self._levels[steady, target]

    def spread(self) -> SpreadPrior | None:
        return self.moments.prior() if self.moments is not None else None

    @property
    def peaks_seen(self) -> int:
        return int(self.peaks.total)

    def peak_bytes(self, quantile: float) -> float | None:
        if self.peaks.total < self.min_peaks:
            return None
        return self._scaled(self.peaks.quantile(quantile))
