"""The adaptive predictor's explanation: which rule, its replayed kill rate, the small-sample bound
while the family has fewer peaks than its OOM target needs, and past the inputs seen a line's cap or
a rising line's floor."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..units import PIB, format_bytes
from .small_samples import BoundBasis, gap_bound_bytes, peaks_needed

if TYPE_CHECKING:
    from .adaptive import AdaptivePredictor


def explain_adaptive(p: AdaptivePredictor) -> str:
    rates = p.oom_rates()
    rate, budget = float(rates[p.best_]), p.target
    # Say which replay the kill rate is from: the rule alone on the past peaks, each task sized
    # from those before it (not a whole strategy's what-if, nor kills that really happened).
    peaks = "the one past peak" if p.n_samples_ == 1 else f"the {p.n_samples_} past peaks"
    replay = f"replayed on {peaks} (each sized from those before it)"
    killed = f"{rate:.1%} OOM-killed in that replay"
    chosen = "the default rule" if p.best_ == 0 else f"cheapest of {p.scores_.size} rules"
    chosen += f" {replay}: {killed}"
    if budget is not None and p.within_target_:
        chosen += f" (target {budget:.1%}, {p.target_fraction:.0%} of the budget {p.max_oom_rate:.1%})"
    elif budget is not None and rates.min() > budget:
        fewest = f"{rates.min():.1%}"
        chosen = f"no rule {replay} kept OOM kills within {budget:.1%}: the cheapest near the fewest ({fewest}), {killed}"
    elif budget is not None:
        chosen += f", over the target {budget:.1%}: fewer than {p.min_scored} tasks replayed"
    said = f"{p.rule_} ({chosen}) = {format_bytes(p._predict(None))}"
    if p._line_chosen and p.inputs_ is not None:  # a line's value at no input is at the mean input
        said += f" at their mean input {format_bytes(int(p.inputs_.mean()))}"
    if p.bound_ and budget is not None:
        level = f"P{(1.0 - budget) * 100:g}"
        if p._line_chosen:
            bound = f"the line's one-sided {level} prediction interval"
        elif math.isinf(p.bound_):
            bound = "the request"
        else:
            bound = _bound_text(p, p.bound_basis(), budget, level)
        needed = peaks_needed(budget)
        others = p._bound_cap(None)  # what the bound is capped at without a request
        known = "" if others is None else f", {format_bytes(others)}"
        cap = f"the request (or, for a pod without one, other families' {level} peak{known})"
        said += (
            f"; {p.n_samples_} of the {needed} peaks a {budget:.1%} target needs: "
            f"at least the lesser of {bound} and {cap}"
        )
    return said


def _bound_text(p: AdaptivePredictor, basis: BoundBasis, budget: float, level: str) -> str:
    """The small-sample bound in words: which of the two, its level (when calibrated, why) and,
    for the log-normal one, the spread it pools with."""
    learnt, calibrated, own = basis  # own: tested against the prior it would pool with
    at = level if calibrated == budget else f"P{(1.0 - (calibrated or 0.0)) * 100:.3g}"
    value = p._bound(basis)
    calibration = (
        f"{at}, not {level}: on the store's {'steady ' if own is not None else ''}families, a bound at"
        f" that level over each family's earlier peaks let {budget:.1%} of their next peaks through"
    )
    if gap_binds(p, basis, value):
        bound = f"the {at} gap bound over their two largest peaks {format_bytes(value)}"
        return f"{bound} ({calibration})" if at != level else bound
    # on one or two peaks the bound runs to astronomic sizes (5e55 TiB): past any node, say only that
    shown = format_bytes(value) if value < PIB else "over 1 PiB"
    bound = f"their log-normal {at} prediction bound {shown}"
    if own is not None:
        prior = learnt.log_spread if learnt is not None else p.prior_log_spread
        bound += f" (their own spread {own:.2g} alone: far below the prior's {prior:.3g}"
        return bound + (f"; {calibration})" if at != level else ")")
    if learnt is not None:
        return (
            bound
            + f" (spread pooled with other families': {learnt.log_spread:.3g} on {learnt.weight:.1f} peaks)"
        )
    return f"{bound} ({calibration})" if at != level else bound


def _beyond(input_bytes: int, largest_input_bytes: float) -> str:
    return (
        f"input {format_bytes(input_bytes)} is beyond the largest the family has finished "
        f"({format_bytes(int(largest_input_bytes))})"
    )


def _at_most(cap_bytes: float, by_request: bool) -> str:
    return (
        f"at most {'the request' if by_request else 'the largest peak + margin'}, {format_bytes(cap_bytes)}"
    )


def extrapolation_note(
    input_bytes: int, largest_input_bytes: float, uncapped_bytes: float, cap_bytes: float, by_request: bool
) -> str:
    """Why an input past the largest finished got less than the line says (``AdaptivePredictor.predict``)."""
    return (
        f"{_beyond(input_bytes, largest_input_bytes)}: the line's {format_bytes(uncapped_bytes)} there "
        f"is a guess, so {_at_most(cap_bytes, by_request)}"
    )


def beyond_note(
    input_bytes: int, largest_input_bytes: float, line_bytes: float, cap_bytes: float, by_request: bool
) -> str:
    """Why an input past the largest finished got more than the quantile rule says: its rising line
    there, or the cap a line has there when the line says more."""
    said = (
        f"{_beyond(input_bytes, largest_input_bytes)} and its peaks grow with input: its line says "
        f"{format_bytes(line_bytes)} there"
    )
    return said if line_bytes <= cap_bytes else f"{said}, a guess: {_at_most(cap_bytes, by_request)}"


def gap_binds(p: AdaptivePredictor, basis: BoundBasis, bound_bytes: float) -> bool:
    """Whether the small-sample bound is the gap bound (the lesser of it and the log-normal one)."""
    share = basis.level if basis.level is not None else p.target
    return gap_bound_bytes(p.peaks_, share or 0.0, p.finished_) <= bound_bytes


def adaptive_details(p: AdaptivePredictor) -> dict[str, float | int | str | None]:
    """The decision's details: the rule, its replayed kill rate against the target, and the
    small-sample bound with its kind ("gap" or "log-normal"), level and own spread (None where none
    applies)."""
    # the small-sample bound, computed once (None: none, the request, or a line's own)
    none = p._line_chosen or not p.bound_ or math.isinf(p.bound_)
    basis = None if none else p.bound_basis()
    bound = None if basis is None else p._bound(basis)
    kind = None if basis is None or bound is None else "gap" if gap_binds(p, basis, bound) else "log-normal"
    return {
        "rule": p.rule_,
        "rule_oom_rate": round(float(p.oom_rates()[p.best_]), 4),
        "max_oom_rate": p.max_oom_rate,
        "oom_target": p.target,
        "within_oom_target": bool(p.within_target_),
        "small_sample_bound_bytes": None if bound is None else int(bound),
        "small_sample_bound_kind": kind,
        "small_sample_bound_level": None if basis is None else basis.level,
        "small_sample_bound_own_spread": None if basis is None else basis.own_spread,
    }
