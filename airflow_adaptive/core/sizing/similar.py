"""Warm starts across families: a family with no history borrows the model of a similar one.

Many families are the same tool in another DAG or sub-workflow (``FASTQC`` in two nf-core
pipelines, ``SAMTOOLS_SORT`` after two aligners). A family is named ``<dag>.<task>`` (or by the
user, or ``<pipeline>:<process>`` in traces), so its *task name* is the last part of its name
after ``.``, ``:`` or ``/``, compared without case. Similarity between two families:

- 1.0 when their task names are equal (``fastqc`` and ``fastqc``);
- 0.5 when one task name is the other plus ``_`` qualifiers (``fastqc`` and ``fastqc_raw``);
- 0 otherwise.

A cold family's donor is the most similar other family, at least ``min_similarity`` alike (1 by
default: replayed on the shared traces, qualified names brought more OOM kills than they saved
waste), with at least ``min_samples`` samples (more samples, then the name, break ties). Its model
sizes the cold family's first tries, never above the user's request (a borrowed model is a
guess too), until the family has history of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .base import Predictor

_SEPARATORS = re.compile(r"[.:/]")
SAME_TASK_NAME = 1.0
QUALIFIED_TASK_NAME = 0.5
MIN_DONOR_SAMPLES = 3
MIN_SIMILARITY = SAME_TASK_NAME


def task_name(family: str) -> str:
    """The last part of a family's name, without case: what it runs, whatever DAG it is in."""
    return _SEPARATORS.split(family)[-1].casefold()


def similarity(family: str, other: str) -> float:
    """How alike two families' task names are (see the module's table)."""
    a, b = task_name(family), task_name(other)
    if not a or not b:
        return 0.0
    if a == b:
        return SAME_TASK_NAME
    short, long = sorted((a, b), key=len)
    return QUALIFIED_TASK_NAME if long.startswith(short + "_") else 0.0


@dataclass(frozen=True)
class Donor:
    """The family whose model sizes a cold one, and why it was chosen."""

    family: str
    similarity: float
    samples: int

    def explain(self) -> str:
        how = "the same task name" if self.similarity >= SAME_TASK_NAME else "a qualified task name"
        return (
            f"similar family {self.family!r} ({how}, similarity {self.similarity:g}, {self.samples} samples)"
        )


def pick_donor(
    family: str,
    candidates: Iterable[tuple[str, int]],
    *,
    min_similarity: float = MIN_SIMILARITY,
    min_samples: int = MIN_DONOR_SAMPLES,
) -> Donor | None:
    """The most similar other family of ``candidates`` (name, samples) with ``min_samples`` or more."""
    best: Donor | None = None
    for name, samples in candidates:
        if name == family or samples < min_samples:
            continue
        score = similarity(family, name)
        if score <= 0.0 or score < min_similarity:
            continue
        donor = Donor(name, score, samples)
        if best is None or (score, samples, best.family) > (best.similarity, best.samples, name):
            best = donor
    return best


def borrowed_allocation(
    donor_model: Predictor, input_size_bytes: int | None, user_request_bytes: int | None
) -> int:
    """A cold task's first allocation from its donor's fitted model, at most the user's request."""
    allocation = donor_model.predict(input_size_bytes, user_request_bytes)
    return min(allocation, user_request_bytes) if user_request_bytes else allocation
