"""Shared-input data locality: which declared inputs are staged on a node, and how much a node
that already holds them is preferred (the data-aware multi-workflow scheduler, ALGORITHMS.md §6).

Inputs are classified by size as in the paper: small (< 1 MB) stays on shared storage; medium
(< 1 GB) and big inputs that more than one task reads are staged to node-local storage. A node
that holds a task's staged inputs is preferred, never required, by one rule (``locality_weight``).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .units import format_bytes

SMALL_BELOW_BYTES = 1_000_000  # the paper's "small": below 1 MB
BIG_FROM_BYTES = 1_000_000_000  # "medium" below 1 GB, "big" from it
MAX_WEIGHT = 100  # Kubernetes' largest preferred-term weight


class SizeClass(str, enum.Enum):
    SMALL = "small"
    MEDIUM = "medium"
    BIG = "big"
    UNKNOWN = "unknown"


def size_class(
    size_bytes: int | None, small_below: int = SMALL_BELOW_BYTES, big_from: int = BIG_FROM_BYTES
) -> SizeClass:
    if size_bytes is None or size_bytes < 0:
        return SizeClass.UNKNOWN
    if size_bytes < small_below:
        return SizeClass.SMALL
    return SizeClass.MEDIUM if size_bytes < big_from else SizeClass.BIG


def content_key(uri: str, size_bytes: int, etag: str = "") -> str:
    """The cache entry's name: the object's URI, size and version, so a changed object is a new entry."""
    text = f"{uri}\0{size_bytes}\0{etag}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


@dataclass(frozen=True)
class DeclaredInput:
    """One input a task reads: its URI, its size (None: unknown) and its version (etag)."""

    uri: str
    size_bytes: int | None = None
    etag: str = ""
    shared: bool = False  # declared in ``shared_inputs``: the user says other tasks read it too

    @property
    def key(self) -> str:
        return content_key(self.uri, self.size_bytes or 0, self.etag)


@dataclass(frozen=True)
class StagePlan:
    """What a pod stages and why each declared input is or is not staged."""

    staged: tuple[DeclaredInput, ...]
    reasons: Mapping[str, str]  # uri -> why (staged or not)

    def explain(self) -> str:
        return "; ".join(f"{uri}: {why}" for uri, why in self.reasons.items())


def plan_staging(
    inputs: Sequence[DeclaredInput],
    earlier_readers: Mapping[str, int],
    *,
    small_below: int = SMALL_BELOW_BYTES,
    big_from: int = BIG_FROM_BYTES,
) -> StagePlan:
    """Stage medium and big inputs that more than one task reads.

    "More than one task" is known from the declaration (``shared_inputs``) or from the store:
    another task read the same URI before (``earlier_readers``, counted across all DAG runs).
    """
    staged, reasons = [], {}
    for item in inputs:
        kind = size_class(item.size_bytes, small_below, big_from)
        readers = earlier_readers.get(item.uri, 0)
        if kind is SizeClass.UNKNOWN:
            reasons[item.uri] = "size unknown: read from shared storage"
        elif kind is SizeClass.SMALL:
            reasons[item.uri] = f"small ({format_bytes(item.size_bytes)}): read from shared storage"
        elif not item.shared and readers == 0:
            reasons[item.uri] = f"{kind.value}, no other reader yet: read from shared storage"
        else:
            why = "declared shared" if item.shared else f"read by {readers} earlier tasks"
            reasons[item.uri] = f"{kind.value} ({format_bytes(item.size_bytes)}), {why}: staged"
            staged.append(item)
    return StagePlan(tuple(staged), reasons)


def locality_weight(local_bytes: int, read_bytes_per_s: float, expected_runtime_s: float | None) -> int:
    """Preferred-affinity weight (0-100) of a node that holds ``local_bytes`` of the task's inputs.

    The rule: the share of the task's time that reading locally saves, in percent. Reading from
    shared storage would take ``local_bytes / read_bytes_per_s`` more seconds than the
    ``expected_runtime_s`` the task computes. Tarema's group terms weigh 100, 50, 25, ... so a node
    one group down wins only when locality saves more than the task computes (weight > 50). An unknown
    runtime counts as no computation: the saving is then all that is known.
    """
    if local_bytes <= 0 or read_bytes_per_s <= 0:
        return 0
    saved_s = local_bytes / read_bytes_per_s
    runtime_s = max(expected_runtime_s or 0.0, 0.0)
    return max(1, min(MAX_WEIGHT, round(MAX_WEIGHT * saved_s / (saved_s + runtime_s))))


def local_bytes_by_node(
    staged: Iterable[tuple[str, int]], holders: Mapping[str, Iterable[str]]
) -> dict[str, int]:
    """Bytes of the staged inputs, ``(content key, bytes)``, that each node holds (``holders``: key -> nodes)."""
    out: dict[str, int] = {}
    for key, size_bytes in staged:
        for node in holders.get(key, ()):
            out[node] = out.get(node, 0) + size_bytes
    return out


def preferred_nodes(
    local_bytes: Mapping[str, int], read_bytes_per_s: float, expected_runtime_s: float | None, limit: int = 8
) -> list[tuple[str, int]]:
    """(node, weight) for the nodes holding the most bytes, heaviest first (ties by name)."""
    ranked = sorted(local_bytes.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    weighted = [(node, locality_weight(size, read_bytes_per_s, expected_runtime_s)) for node, size in ranked]
    return [(node, weight) for node, weight in weighted if weight > 0]


@dataclass(frozen=True)
class StageReport:
    """What a pod's staging step did, by content key (the wrapper writes it beside the usage line)."""

    hits: tuple[str, ...] = ()
    copied: tuple[str, ...] = ()  # misses that were copied in
    failed: Mapping[str, str] = field(default_factory=dict)  # key -> why (the task read shared storage)
    evicted: tuple[str, ...] = ()
    copied_bytes: int = 0


@dataclass(frozen=True)
class InputUse:
    """One declared input of one attempt, for the store: the URI's reads and sizes, and where it is cached."""

    uri: str
    size_bytes: int | None
    key: str = ""  # content key when staged
    cached: bool = False  # the node holds it after this attempt (a hit or a copy)


@dataclass(frozen=True)
class CachedInput:
    node: str
    key: str
    uri: str
    size_bytes: int
    last_used_at: datetime


@dataclass(frozen=True)
class InputState:
    """What the store knows of some declared inputs: earlier reads and sizes by URI, holders by key."""

    reads: Mapping[str, int] = field(default_factory=dict)
    sizes: Mapping[str, int] = field(default_factory=dict)
    holders: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def uses_after(staged: Sequence[DeclaredInput], declared: Sequence[DeclaredInput],
               report: StageReport | None) -> list[InputUse]:  # fmt: skip
    """The attempt's input uses: every declared input read; staged ones cached unless staging failed."""
    held = set(report.hits + report.copied) if report else set()
    staged_keys = {item.key for item in staged}
    return [
        InputUse(item.uri, item.size_bytes, item.key if item.key in staged_keys else "", item.key in held)
        for item in declared
    ]
