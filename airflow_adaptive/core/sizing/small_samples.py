"""Prediction bounds for a family with too few peaks to judge its OOM budget.

A quantile of n peaks cannot tell a 1-in-50 peak until n is about 50. Until a family has
``1 / budget`` peaks, ``adaptive`` allocates at least the one-sided prediction bound for the next
peak at ``1 - budget``: the lesser of a log-normal one over the peaks, with Student's t and the
spread (from the upper semi-variance) pooled with a prior one, and one from the gap between the two
largest peaks (a pile under a ceiling is let through just above it, which no spread says); or, when
a line on input size was chosen, that line's own prediction interval (``lines.line_bound``).

``adaptive`` pools with a fixed prior spread; ``adaptive-pooled`` learns it across families
(:class:`SpreadMoments`) as limma's empirical Bayes does for genes (Smyth 2004, "Linear models and
empirical Bayes methods for assessing differential expression", section 6.2): the families' variances of log peaks are taken as draws from a scaled
inverse chi-squared distribution whose scale (the prior spread) and degrees of freedom (its
weight) are fitted by the moments of their logarithms. A store of steady families then tightens a
new family's bound after two peaks; a store whose families differ widely keeps the prior weak.
Either prior is set aside for a family whose own spread it cannot explain: a wider one
(``fits_prior``) or a far narrower one (``steadier_than_prior``) keeps its own evidence.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass
from functools import lru_cache
from typing import ClassVar, NamedTuple

import numpy as np
from scipy.special import digamma, polygamma, stdtrit
from scipy.stats import f as f_dist

MIN_FAMILIES = 3  # with a spread each (two peaks or more) before the learnt prior replaces the fixed one
# A spread of log peaks below the peak histograms' resolution (buckets 1 % wide) is not measured:
# the variance of a uniform error over one bucket, log(1.01)^2 / 12.
RESOLUTION_VARIANCE = math.log1p(0.01) ** 2 / 12.0


class SpreadPrior(NamedTuple):
    log_spread: float  # the prior standard deviation of a family's log peaks
    weight: float  # its degrees of freedom: how many peaks' worth of evidence it counts for


@dataclass
class SpreadMoments:
    """Sums over families of what limma's moment estimate needs, so that a family's term can be
    removed and added again as its peaks change (the store keeps these in one row). The sums are
    integers in units of ``1 / UNITS``: removing a family takes away exactly what adding it
    counted, and recording in any order sums to what a rebuild does."""

    families: int = 0
    log_sum: int = 0  # sum of e = log s^2 - digamma(d/2) + log(d/2)
    log_squares: int = 0  # sum of e^2
    trigammas: int = 0  # sum of trigamma(d/2): the sampling variance of log s^2
    df_sum: int = 0  # the families' degrees of freedom, summed: the most the prior may weigh

    UNITS: ClassVar[int] = 10**9

    def add(self, variance: float, df: int, sign: int = 1) -> None:
        """Count (``sign=-1``: remove) one family's variance of log peaks on ``df`` degrees of freedom."""
        if df < 1:
            return
        e = math.log(max(variance, RESOLUTION_VARIANCE)) - float(digamma(df / 2)) + math.log(df / 2)
        self.families += sign
        self.log_sum += sign * round(e * self.UNITS)
        self.log_squares += sign * round(e * e * self.UNITS)
        self.trigammas += sign * round(float(polygamma(1, df / 2)) * self.UNITS)
        self.df_sum += sign * df

    def prior(self) -> SpreadPrior | None:
        """The fitted prior (None: fewer than ``MIN_FAMILIES`` families with a spread). Its weight
        is at most the degrees of freedom it was learnt from; its scale is the fitted one."""
        g = self.families
        if g < MIN_FAMILIES or self.df_sum < g:
            return None
        mean = self.log_sum / self.UNITS / g
        excess = (self.log_squares / self.UNITS - g * mean * mean) / (g - 1) - self.trigammas / self.UNITS / g
        if excess <= 0:  # the spreads differ no more than sampling explains: one shared spread
            scale, weight = math.exp(min(mean, 700.0)), float(self.df_sum)
        else:
            fitted = 2.0 * trigamma_inverse(excess)
            scale = math.exp(min(mean + float(digamma(fitted / 2)) - math.log(fitted / 2), 700.0))
            weight = min(fitted, float(self.df_sum))
        spread = math.sqrt(scale)
        return SpreadPrior(spread, weight) if math.isfinite(spread) and spread > 0 and weight > 0 else None

    def to_json(self) -> list[int]:
        return list(astuple(self))

    @classmethod
    def from_json(cls, data: object) -> SpreadMoments | None:
        """The moments ``to_json`` wrote (None: absent or unreadable, so not known)."""
        if not isinstance(data, list) or len(data) != 5:
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in data):
            return None
        moments = cls(*data)
        return moments if 0 <= moments.families <= moments.df_sum and moments.trigammas >= 0 else None


def fits_prior(peaks: np.ndarray, prior: SpreadPrior, budget: float) -> bool:
    """Whether a family's own spread of log peaks is plausible under ``prior``: below the
    ``1 - budget`` quantile of the F distribution that the ratio of its variance to the prior's
    follows (limma's moderated variances assume every family is drawn from the prior; one that is
    not keeps its own evidence, as robust empirical Bayes treats an outlying gene)."""
    if peaks.size < 2:
        return True
    logs = np.log(np.maximum(peaks, 1.0))
    ratio = float(logs.var(ddof=1)) / max(prior.log_spread**2, RESOLUTION_VARIANCE)
    return ratio <= f_quantile(1.0 - budget, peaks.size - 1, prior.weight)


@lru_cache(maxsize=4096)
def f_quantile(p: float, df_own: float, df_prior: float) -> float:
    return float(f_dist.ppf(p, df_own, df_prior))


def trigamma_inverse(y: float) -> float:
    """The x > 0 with trigamma(x) = y (y > 0), by Newton's method from limma's start 0.5 + 1/y."""
    if y > 1e7:
        return 1.0 / math.sqrt(y)
    if y < 1e-6:
        return 1.0 / y
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = float(polygamma(1, x))
        step = tri * (1.0 - tri / y) / float(polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


def peaks_needed(target: float) -> int:
    """How many peaks a quantile at ``1 - target`` needs: from fewer, it is their largest."""
    return math.ceil(1.0 / max(target, 1e-9))


def steadier_than_prior(
    logs: np.ndarray, prior_log_spread: float, prior_weight: float, budget: float
) -> bool:
    """Whether a family's own spread of log peaks is implausibly narrow under the prior: below the
    ``budget`` quantile of the F distribution its ratio to the prior's variance follows. The mirror
    of :func:`fits_prior`: a family that the prior does not describe keeps its own evidence, and a
    steady family is not held at a prior spread many times its own."""
    if logs.size < 2 or budget <= 0.0 or prior_weight <= 0.0:
        return False
    variance = max(float(logs.var(ddof=1)), RESOLUTION_VARIANCE)
    ratio = variance / max(prior_log_spread**2, RESOLUTION_VARIANCE)
    return ratio < f_quantile(budget, logs.size - 1, prior_weight)


class BoundBasis(NamedTuple):
    """What the small-sample bound pools with and lets through (``AdaptivePredictor.bound_basis``)."""

    learnt: SpreadPrior | None  # the spread learnt across families, where it applies
    level: float | None  # the share of next peaks the bound lets through
    own_spread: float | None  # a far steadier family's own spread of log peaks, bounded alone


def own_spread(
    peaks: np.ndarray, prior_log_spread: float, prior_weight: float, budget: float
) -> float | None:
    """A family's own spread of log peaks (at least the resolution's) when it is
    :func:`steadier_than_prior` at ``budget``, so that its bound is its own; None when it is not."""
    logs = np.log(np.maximum(peaks, 1.0))
    if not steadier_than_prior(logs, prior_log_spread, prior_weight, budget):
        return None
    return math.sqrt(max(float(logs.var(ddof=1)), RESOLUTION_VARIANCE))


def bound_terms(
    logs: np.ndarray, prior_log_spread: float, prior_weight: float
) -> tuple[list[tuple[float, float]], float]:
    """The bound's (centre, spread) about the mean and about the median of log peaks ``logs``
    (the spread pooled from twice their squares above the centre and ``prior_weight`` degrees of
    freedom of ``prior_log_spread``, at least the peaks' resolution), and its degrees of freedom,
    n - 1 + k."""
    df = logs.size - 1 + prior_weight
    terms = []
    for centre in (float(logs.mean()), float(np.median(logs))):
        above = np.maximum(logs - centre, 0.0)  # an OOM kill is on the high side
        variance = (prior_weight * prior_log_spread**2 + 2.0 * float(above @ above)) / df
        terms.append((centre, math.sqrt(max(variance, RESOLUTION_VARIANCE))))
    return terms, df


def next_peak_bound(
    peaks: np.ndarray,
    budget: float | None,
    prior_log_spread: float,
    prior_weight: float,
    level: float | None = None,
    finished: np.ndarray | None = None,
) -> float:
    """The lesser of the log-normal bound and the gap bound (:func:`gap_exponent`, over the
    ``finished`` peaks' gap) on the next peak, in bytes. The log-normal one:
    ``exp(m + t(1 - level; n - 1 + k) * s * sqrt(1 + 1/n))`` over the log peaks, ``s`` pooled
    from twice their squares above ``m`` (the upper semi-variance: the same as all squares for
    symmetric peaks, but a family whose peaks pile up under a ceiling with a tail below is not
    given room above for that tail) and ``k`` degrees of freedom of ``prior_log_spread``; the
    lesser of that bound about the mean and about the median for ``m`` (a tail below pulls the mean
    down and so counts as spread above it, and does not move the median; for symmetric peaks the
    two agree, and for a tail above the mean's is usually the lesser); 0 once ``1 / budget`` peaks
    are known or with no budget, infinite with a budget of 0. ``level`` (default: the budget) is the
    share of next peaks the bound may let through (``bound_calibration.calibrated_level``: for a
    family far steadier than the prior, whose bound is its own spread's, the level of such bounds).
    The gap bound leans on no spread: on the shared traces' families it let through 0.8 % of next
    peaks at a 1 % share, against 1.9 % for the log-normal one, and from about 34 peaks on it is
    as narrow (docs/sizing.md); the lesser lets through more than either, which the level's
    calibration (its scores are the lesser bound's) takes back once the store has scored peaks."""
    if budget is None or peaks.size >= peaks_needed(budget):
        return 0.0
    if budget <= 0.0:
        return math.inf
    logs = np.log(np.maximum(peaks, 1.0))
    if steadier_than_prior(logs, prior_log_spread, prior_weight, budget):  # its own evidence alone
        prior_log_spread, prior_weight = 0.0, 0.0
    terms, df = bound_terms(logs, prior_log_spread, prior_weight)
    # the upper tail's quantile directly (1 - level rounds to 1 under 1e-16; stdtrit fails under 1e-270)
    share = max(budget if level is None else level, 1e-250)
    t = -float(stdtrit(df, share)) * math.sqrt(1.0 + 1.0 / peaks.size)
    gap = gap_exponent(logs, share, finished)
    exponent = min(min(centre + t * spread for centre, spread in terms), gap)
    return math.exp(min(exponent, 700.0))  # e^700 bytes: past any cap, short of overflow


# The gap between the two largest log peaks is measured no finer than the peaks themselves (1 %).
LEAST_LOG_GAP = math.log1p(0.01)


def _top_gap(logs: np.ndarray, finished: np.ndarray | None) -> tuple[float, float, int] | None:
    """The largest log peak, the gap between the two largest finished ones (at least
    :data:`LEAST_LOG_GAP`) and how many finished; None below two. A killed try's limit is a lower
    bound on its peak: it may be the largest, but its retry's peak just above it is the same task,
    not a second draw, so it takes no part in the gap."""
    done = logs if finished is None else logs[finished]
    if done.size < 2:
        return None
    second, top = np.partition(done, done.size - 2)[done.size - 2 :]
    return float(logs.max()), max(float(top - second), LEAST_LOG_GAP), int(done.size)


def gap_exponent(logs: np.ndarray, share: float, finished: np.ndarray | None = None) -> float:
    """The log of a bound on the next peak from the gap between the two largest of ``logs``
    (``finished``: which are not lower bounds; None: all): ``top + c * gap``. For n + 1 log peaks
    from a shifted exponential (peaks with a Pareto tail), the next is the largest with chance
    1 / (n + 1), its excess over the old largest is then exponential and the old gap exponential at
    twice its rate, both independent (Renyi's representation), so it passes ``c`` gaps with chance
    2 / ((n + 1)(2 + c)), and ``c`` sets that to ``share`` (for ``share`` below 1 / (n + 1); above,
    ``c`` is 0 and the bound is the largest). A tail that is exponential only far out reaches this
    as n grows; lighter tails, and a ceiling with density below it, let through less (uniform:
    1 / ((n + 1)(1 + c)), the spacings of Robson and Whitlock's 1964 estimate of a truncation
    point); heavier ones more. A pile of peaks under a ceiling gets a bound just above it; a family
    whose largest peak stands far above the rest keeps room above it. Infinite below two finished
    peaks or without a positive share."""
    found = _top_gap(logs, finished)
    if found is None or not share > 0.0:
        return math.inf
    top, gap, n = found
    return top + max(0.0, 2.0 / (share * (n + 1)) - 2.0) * gap


def gap_bound_bytes(peaks: np.ndarray, share: float, finished: np.ndarray | None = None) -> float:
    """:func:`gap_exponent` over ``peaks`` in bytes (at most e^700)."""
    logs = np.log(np.maximum(peaks, 1.0))
    return math.exp(min(gap_exponent(logs, max(share, 1e-250), finished), 700.0))


def gap_score(logs: np.ndarray, log_peak: float, finished: np.ndarray | None = None) -> float:
    """The least share at which :func:`gap_exponent` over ``logs`` lets ``log_peak`` through (1 at
    or below the largest, which no share lets through, and below two finished peaks)."""
    found = _top_gap(logs, finished)
    if found is None or log_peak <= found[0]:
        return 1.0
    top, gap, n = found
    return 2.0 / ((n + 1) * (2.0 + (log_peak - top) / gap))
