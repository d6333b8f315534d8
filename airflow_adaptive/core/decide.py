"""The memory decision: history + the user's request + settings -> Decision."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .defaults import MAX_OOM_RATE, MIN_MEMORY_MIB
from .model import Decision, MemoryRequest, Observation, PeakKind
from .rollup import is_usable_sample
from .sizing import Predictor, Sample, get_retry_policy, make_predictor
from .sizing.prior import PeakPrior
from .sizing.retry import STRATEGY_RETRY, RetryPolicy, vpa_bump
from .sizing.similar import MIN_SIMILARITY, Donor, borrowed_allocation
from .unfinished import Unfinished
from .units import MIB, as_pod_holds, format_bytes


@dataclass(frozen=True)
class SizingSettings:
    """Configuration the decision needs, read once at the edge."""

    strategy: str = "adaptive"
    min_observations: int = 1
    floor_bytes: int = MIN_MEMORY_MIB * MIB
    cap_bytes: int = 64 * 1024 * MIB
    retry_policy: str = STRATEGY_RETRY
    limit_to_request_ratio: float = 1.0
    max_oom_rate: float = MAX_OOM_RATE  # the OOM-kill budget of strategies that take one
    warm_starts: bool = True  # a cold family borrows a similar family's model (sizing/similar.py)
    min_similarity: float = MIN_SIMILARITY  # of a donor family (sizing/similar.py)
    guard_unfinished: bool = True  # a family's unfinished attempts may floor its first tries (unfinished.py)
    # Refit a family's model after every recording while it has fewer than 20 samples, then each time
    # its samples grew by this fraction (0: after every recording): bounds the cost of learning.
    refit_growth: float = 0.05
    params: Mapping[str, Any] = field(default_factory=dict)  # the strategy's own parameters (replay knobs)
    size_cpu: bool = False  # CPU requests from recorded cores busy (core/cpu.py)
    cpu_quantile: float = 0.9
    min_cpu_millicores: int = 100


def to_samples(history: Sequence[Observation]) -> list[Sample]:
    """Usable samples from recorded attempts (see :func:`sample_of`)."""
    return [sample for sample in map(sample_of, history) if sample is not None]


def sample_of(obs: Observation) -> Sample | None:
    """What a recorded attempt teaches a predictor, or None when it teaches nothing.

    A censored (OOM-killed) attempt counts as the VPA does: a sample at the bumped
    limit, because the task needed at least its limit.
    """
    if not is_usable_sample(obs):
        return None
    usage = obs.usage
    if obs.oom_killed and obs.memory_limit_bytes:
        return Sample(vpa_bump(obs.memory_limit_bytes), obs.input_size_bytes, usage.wall_seconds, True)
    if usage.peak_memory_bytes:
        return Sample(
            usage.peak_memory_bytes,
            obs.input_size_bytes,
            usage.wall_seconds,
            usage.peak_kind is PeakKind.SAMPLED,
        )
    return None


@dataclass(frozen=True)
class Fitted:
    """A predictor ready to answer, and what it learnt from (for the explanation)."""

    predictor: Predictor
    samples: int
    lower_bound_samples: int
    note: str = ""  # e.g. why the stored model was refitted in this decision
    donor: Donor | None = None  # for a cold family: whose model ``predictor`` is (warm starts)


def fresh_predictor(settings: SizingSettings) -> Predictor:
    """The configured strategy, unfitted, bounded by the floor and the cap."""
    return make_predictor(
        settings.strategy,
        cap_bytes=settings.cap_bytes,
        floor_bytes=settings.floor_bytes,
        max_oom_rate=settings.max_oom_rate,
        **settings.params,
    )


def fit_history(
    history: Sequence[Observation], settings: SizingSettings, prior: PeakPrior | None = None
) -> Fitted:
    """The configured predictor fitted on ``history`` (left cold below ``min_observations``), reading
    ``prior`` (what other families used) where the strategy does."""
    samples = to_samples(history)
    predictor = fresh_predictor(settings)
    if len(samples) >= settings.min_observations:
        predictor.fit(samples, prior)
    return Fitted(predictor, len(samples), sum(s.lower_bound for s in samples))


def decide_memory(
    history: Sequence[Observation],
    user: MemoryRequest,
    settings: SizingSettings,
    *,
    previous_attempt: Observation | None = None,
    input_size_bytes: int | None = None,
    prior: PeakPrior | None = None,
    unfinished: Unfinished | None = None,
) -> Decision:
    """Decide request and limit for the next attempt of a task family, fitting on ``history``."""
    return decide_with(
        fit_history(history, settings, prior),
        user,
        settings,
        previous_attempt=previous_attempt,
        input_size_bytes=input_size_bytes,
        prior=prior,
        unfinished=unfinished,
    )


def noted(note: str) -> str:
    """A predictor's input note (``predict_noted``) as a clause of the explanation ("" when none)."""
    return f"; {note}" if note else ""


def warming_up(min_observations: int, samples: int) -> bool:
    """A warm-up above 1 that the family has not finished: the user's request stands (no cold or
    warm start either)."""
    return min_observations > 1 and samples < min_observations


def _predicted(
    fitted: Fitted,
    user: MemoryRequest,
    settings: SizingSettings,
    input_size_bytes: int | None,
    prior: PeakPrior | None,
    unfinished: Unfinished | None = None,
) -> tuple[int | None, str]:
    """The strategy's first allocation and its basis, or (None, "") when it has nothing to say."""
    predictor = fitted.predictor
    if warming_up(settings.min_observations, fitted.samples):
        return None, ""  # a warm-up: the user's request until the family's own history is long enough
    if fitted.donor is not None and predictor.warm:
        borrowed, note = borrowed_allocation(predictor, input_size_bytes, user.request_bytes)
        capped = " (capped at the request)" if user.request_bytes and borrowed == user.request_bytes else ""
        return (
            borrowed,
            f"no history yet: the model of {fitted.donor.explain()}: {predictor.explain()}{noted(note)}{capped}",
        )
    if fitted.samples >= settings.min_observations and predictor.warm:
        basis = predictor.explain()
        if fitted.lower_bound_samples:
            basis += (
                f" ({fitted.lower_bound_samples} of {fitted.samples} peaks are lower bounds: "
                "sampled or OOM-killed)"
            )
        predicted, note = predictor.predict_noted(input_size_bytes, user.request_bytes)
        basis += noted(note)
        if not user.request_bytes and predicted >= settings.cap_bytes and predictor.draws_on_prior(None):
            # A young family's bound with nothing to cap it: as a request it might fit no node.
            return None, f"{basis}; that is all the allocatable memory, for a pod that asks for none"
        guarded = settings.guard_unfinished and predictor.tags().guards_unfinished
        if guarded and unfinished and unfinished.outnumber(fitted.samples) and prior:
            cold, cold_basis = _new_family_start(settings, user, input_size_bytes, prior)
            if cold is None and cold_basis:  # a new family would keep no limit: so does this one
                return None, f"{basis}; but {unfinished.explain(fitted.samples)}, {cold_basis}"
            if cold is not None and cold > predicted:
                predicted = cold
                basis += f"; but {unfinished.explain(fitted.samples)}, {cold_basis}"
        return predicted, basis + fitted.note
    if fitted.samples or prior is None:
        return None, ""
    return _cold(predictor, user, input_size_bytes, prior)


def _cold(
    predictor: Predictor, user: MemoryRequest, input_size_bytes: int | None, prior: PeakPrior
) -> tuple[int | None, str]:
    """What a family with no history of its own starts at (``predictor`` unfitted), and why. With
    a request, the request (None: it stands unchanged): all the family's tasks that start before
    one finishes share this one decision, so a guess below it would risk a batch of OOM kills.
    Without one, the strategy's guess from other families' peaks, if it has one (None with a
    basis: it waits for more of them, and the pod keeps no limit)."""
    if user.request_bytes:
        return None, ""
    start = predictor.fit([], prior).cold_without_request(None)
    if start is None:
        return None, ""
    if start.allocation_bytes is None:
        return None, start.basis
    return predictor.predict(input_size_bytes, None), start.basis


def _new_family_start(
    settings: SizingSettings, user: MemoryRequest, input_size_bytes: int | None, prior: PeakPrior
) -> tuple[int | None, str]:
    """Where a family with no history would start: the request (capped), or ``_cold``'s guess."""
    predictor = fresh_predictor(settings)
    if user.request_bytes:
        start = predictor.fit([], prior).predict(input_size_bytes, user.request_bytes)
        return start, f"its request {format_bytes(start)}, as a new family starts"
    return _cold(predictor, user, input_size_bytes, prior)


def decide_with(
    fitted: Fitted,
    user: MemoryRequest,
    settings: SizingSettings,
    *,
    previous_attempt: Observation | None = None,
    input_size_bytes: int | None = None,
    prior: PeakPrior | None = None,
    unfinished: Unfinished | None = None,
) -> Decision:
    """Decide request and limit for the next attempt from a fitted (or restored) predictor.

    ``previous_attempt`` is this task instance's previous try, when there was one:
    an OOM kill there escalates by the retry policy, never above ``cap_bytes``. ``unfinished``:
    the family's attempts still running (``core/unfinished.py``), with ``prior`` for the floor.
    """
    predicted, basis = _predicted(fitted, user, settings, input_size_bytes, prior, unfinished)
    strategy = settings.strategy
    details: dict[str, float | int | str | None] = {
        "samples": fitted.samples,
        "predicted_bytes": predicted,
        "user_request_bytes": user.request_bytes,
        "user_limit_bytes": user.limit_bytes,
        "cap_bytes": settings.cap_bytes,
    }
    if predicted is not None and fitted.predictor.warm:
        details.update(fitted.predictor.details())  # e.g. the rule chosen and its OOM budget
    if predicted is not None and fitted.donor is not None:
        details["borrowed_from"] = fitted.donor.family
    if unfinished is not None and settings.guard_unfinished and fitted.predictor.tags().guards_unfinished:
        details["unfinished_longer_than_mean"] = unfinished.longer_than_mean
    if previous_attempt is not None and previous_attempt.oom_killed:
        killed_at = _killed_at(previous_attempt, user)
        # A borrowed model sized the first try only: the retry is the cold family's own.
        own = fitted.predictor if fitted.donor is None else fresh_predictor(settings).fit([], prior)
        retry = _retry_rule(own, settings.retry_policy, input_size_bytes, user.request_bytes)
        return _escalate(
            previous_attempt, killed_at, predicted, basis, fitted.samples, settings, details, retry
        )

    if predicted is None:
        why = basis or _why_unsized(fitted.samples, settings.min_observations)
        return Decision(
            user.request_bytes,
            user.limit_bytes,
            "user",
            f"{why}: keeping the user's request {format_bytes(user.request_bytes)}",
            observations=fitted.samples,
            adaptive=False,
            details=details,
        )
    limit = int(min(float(settings.cap_bytes), predicted * settings.limit_to_request_ratio))  # inf: the cap
    shown = as_pod_holds(predicted)  # as the pod's quantity holds it, so the two read alike
    why = f"{basis}{_bound_note(predicted, settings)} -> request {format_bytes(shown)}"
    if user.request_bytes:
        why += f" (user asked {format_bytes(user.request_bytes)})"
    return Decision(
        predicted, max(limit, predicted), strategy, why, observations=fitted.samples, details=details
    )


def _bound_note(predicted: int, settings: SizingSettings) -> str:
    """Where the strategy's answer is the cap or the floor, which one it met."""
    if predicted == settings.cap_bytes:
        return f"; at most the largest allocatable memory, {format_bytes(settings.cap_bytes)}"
    if predicted == settings.floor_bytes:
        return f"; at least min_memory, {format_bytes(settings.floor_bytes)}"
    return ""


def _why_unsized(samples: int, min_observations: int) -> str:
    if samples or min_observations > 1:
        return f"{samples} usable observation(s), fewer than {min_observations}"
    return "no history yet (the family's first tasks all start from this one decision)"


def _retry_rule(
    predictor: Predictor, policy: str, input_size_bytes: int | None, request_bytes: int | None
) -> RetryPolicy:
    """The configured retry policy; ``strategy``: the fitted strategy's own retry (``adaptive``
    picks the cheapest of doubling, the VPA bump and its history's peaks above the killed limit)."""
    if policy != STRATEGY_RETRY:
        return get_retry_policy(policy)
    return lambda killed_at: predictor.retry(killed_at, input_size_bytes, request_bytes)


def _escalate(
    previous: Observation,
    killed_at: int | None,
    predicted: int | None,
    basis: str,
    samples: int,
    settings: SizingSettings,
    details: dict[str, float | int | str | None],
    retry: RetryPolicy,
) -> Decision:
    """After an OOM kill: the retry policy from the killed limit (or history, if higher), capped.

    With no limit or request at all (the node ran out), twice what history says, or the largest
    allocatable memory when it says nothing: the next try gets memory of its own instead of the
    same unset amount.
    """
    cap = settings.cap_bytes
    if killed_at is None:
        request = min(max(2 * predicted, settings.floor_bytes) if predicted else cap, cap)
        why = f"try {previous.key.try_number} was OOM-killed with no memory limit (the node ran out); "
        why += f"twice what history says ({basis})" if predicted else "no history: the largest allocatable"
        why += f" -> request {format_bytes(request)}"
    else:
        escalated = retry(killed_at)
        target = max(escalated, predicted or 0)
        request = min(target, cap)
        why = (
            f"try {previous.key.try_number} was OOM-killed at "
            f"{format_bytes(killed_at)}; {settings.retry_policy} gives {format_bytes(escalated)}"
        )
        if predicted is not None:
            why += f"; history says {format_bytes(predicted)} ({basis})"
        asked = min(previous.memory_request_bytes or 0, killed_at)
        if asked > cap:  # a request above the cap was scheduled and died: less would only die sooner
            request = asked
            why += f"; its request was above the largest allocatable {format_bytes(cap)}: the retry keeps it"
        elif target >= cap:  # a bounded strategy may already answer with the cap itself
            why += f"; capped at the largest allocatable {format_bytes(cap)}"
        why += f" -> request {format_bytes(as_pod_holds(request))}"  # the larger, as the pod holds it
        details["killed_at_bytes"] = killed_at
    details["oom_retry"] = 1  # with or without a limit it died at (growth gives such a try no plan)
    strategy = f"{settings.strategy}+{settings.retry_policy}"
    return Decision(request, request, strategy, why, observations=samples, details=details)


def _killed_at(previous: Observation | None, user: MemoryRequest) -> int | None:
    if previous is None or not previous.oom_killed:
        return None
    return (
        previous.memory_limit_bytes or previous.memory_request_bytes or user.limit_bytes or user.request_bytes
    )
