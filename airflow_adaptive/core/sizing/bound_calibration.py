"""The small-sample bound's level, calibrated on the store's own families.

The bound (``small_samples.next_peak_bound``, the lesser of a log-normal and a gap bound) assumes
a family's peaks are independent log-normal draws, or have an exponential tail in logs; they are
not (they drift, follow input sizes, and most families are steadier than the fixed prior spread
says), so at a target of 1 % it lets through a share of next peaks that differs by trace, from
none to twice the target. What it should let through can be measured where it runs:
for each family, each finished peak among its first ``1 / target`` is scored against the bound of
the peaks before it, as the p-value of that peak under the bound's own models (Student's t, the gap)
(:func:`bound_scores`, kept with the family's model; the store sums them over families in
``Distributions.scores``). Were the model right, the scores would be uniform, and a bound at level
``a`` would let through a share ``a`` of next peaks (the lesser bound's scores, the lesser of two
p-values, fall under ``a`` somewhat more often). :func:`calibrated_level` takes the level at
which the store's scores let through the target instead: the split-conformal idea (Vovk et al.),
pooled across families as the prior spread is. Until the store has scored many peaks, their share
is mixed with the model's own (uniform) on ``1 / target`` pseudo-scores, so a young store keeps
the target as its level and a few lucky peaks cannot raise it far. Downward, the level stops at a
tenth of the target: scores far beyond any level come from shifts (a steady family whose peaks step
up) that no bound catches, and several of them, all from one family, must not hold every young
family at its request. For a family past ``history_window`` attempts, its "first" peaks are the
first of its window, scored again as the window slides. A family far steadier than the prior
(``small_samples.steadier_than_prior``) is bounded by its own spread alone; the peaks after such a
prefix are scored against that bound and counted apart (``Distributions.steady_scores``), so each
bound is calibrated on its own scores: at a 1 % target the own-spread bound let 2.6 % of the shared
traces' next peaks through (a steady family's peaks step up more often than its few peaks say).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import stdtr

from ..sketch import RELATIVE_WIDTH, LogHistogram
from .base import Sample
from .small_samples import bound_terms, gap_score, peaks_needed, steadier_than_prior

# a peak with no score: one of the first two, or a lower bound (killed, sampled)
UNSCORED = -1.0
FIRST_SCORED = 2  # peaks before it: with one, the bound's spread is the prior alone
MAX_LEVEL = 0.5  # the bound never goes below the centre of the peaks
MIN_LEVEL_SHARE = 0.1  # of the target: the least level (above)


def bound_score(
    before: np.ndarray,
    peak: float,
    prior_log_spread: float,
    prior_weight: float,
    finished: np.ndarray | None = None,
) -> float:
    """The p-value of ``peak`` under the bound of the peaks ``before`` it (``finished``: which of
    them are not lower bounds): the least level at which the bound would have let it through (0.5
    at the centre of the peaks, more below it)."""
    logs = np.log(np.maximum(before, 1.0))
    terms, df = bound_terms(logs, prior_log_spread, prior_weight)
    widen = math.sqrt(1.0 + 1.0 / before.size)
    level = math.log(max(peak, 1.0))
    # the bound is the lesser over the centres: it reaches the peak once every centre's does
    t = max((level - centre) / max(spread * widen, 1e-12) for centre, spread in terms)
    # and the lesser of that and the gap bound: it lets the peak through once either does
    return min(float(stdtr(df, -t)), gap_score(logs, level, finished))


def bound_scores(
    peaks: np.ndarray,
    samples: Sequence[Sample],
    target: float | None,
    prior: tuple[float, float],
    known: tuple[np.ndarray | None, np.ndarray | None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each of the first ``1 / target`` peaks' score against the bound of those before it
    (:data:`UNSCORED` where the sample is a lower bound or fewer than two come before it; 1 for any
    score above :data:`MAX_LEVEL`), under the prior spread and weight ``prior``, and whether those
    before it were steadier than the prior (then the bound, and the score, are their own spread's).
    ``known``: both of an earlier fit whose peaks were a prefix of these (kept up to the first peak
    whose sample changed from or to a lower bound, or whose prefix changed kind)."""
    if target is None or target <= 0.0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    size = min(peaks.size, peaks_needed(target))
    logs = np.log(np.maximum(peaks[:size], 1.0))
    finished = np.array([not s.lower_bound for s in samples[:size]], dtype=bool)  # also the gap's peaks
    scored = finished & (np.arange(size) >= FIRST_SCORED)
    steady = np.array(
        [scored[i] and steadier_than_prior(logs[:i], *prior, target) for i in range(size)], bool
    )
    scores, start = np.full(size, UNSCORED), 0
    was, was_steady = known or (None, None)
    if was is not None and was_steady is not None:  # (none: fitted before they were kept)
        start = min(was.size, was_steady.size, size)
        kinds = ((was[:start] != UNSCORED) != scored[:start]) | (was_steady[:start] != steady[:start])
        changed = np.flatnonzero(kinds)
        start = int(changed[0]) if changed.size else start
        scores[:start] = was[:start]
    for i in np.flatnonzero(scored[start:]) + start:
        score = bound_score(peaks[:i], float(peaks[i]), *((0.0, 0.0) if steady[i] else prior), finished[:i])
        scores[i] = score if score <= MAX_LEVEL else 1.0  # no level goes there: one bucket for all
    return scores, steady


def calibrated_level(scores: LogHistogram | None, target: float) -> float:
    """The level ``a`` at which ``(N * a + C(a)) / (N + n) = target``: ``C(a)`` the store's ``n``
    scores at most ``a`` and ``N = 1 / target`` uniform pseudo-scores; ``target`` itself with no
    scores, else between :data:`MIN_LEVEL_SHARE` of it and :data:`MAX_LEVEL`."""
    total = scores.total if scores is not None else 0
    if scores is None or not total or target <= 0.0:
        return target
    pseudo = float(peaks_needed(target))
    goal = target * (pseudo + total)
    below, low_before, level = 0, 0.0, 0.0
    for edge, count in scores.ascending():
        low = edge / (1.0 + RELATIVE_WIDTH)  # a score counts from its bucket's lower edge on: err low
        level = (goal - below) / pseudo  # where the line reaches the goal between the two edges
        if level < low:
            level = max(level, low_before)
            break
        below, low_before, level = below + count, low, max((goal - below - count) / pseudo, low)
    return min(max(level, target * MIN_LEVEL_SHARE), MAX_LEVEL)
