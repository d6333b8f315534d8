"""Attempts made fit for the store before they reach it, so one bad value cannot jam recording.

Keys longer than the columns (250 characters, Airflow's own limit for ids) keep a readable prefix
and a hash of the whole text, so different long names stay apart and every read applies the same
rule. Text that UTF-8 cannot encode (bytes of a file name or an argument that were not UTF-8, which
Python carries as lone surrogates) keeps those bytes as escapes. Numbers that cannot be true (not
finite, negative, beyond any machine) become unknown (None) instead of being stored as given; the
rest of the attempt is kept.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from datetime import datetime, timezone

from .model import Observation, PeakKind, TaskKey, Usage

MAX_KEY_CHARS = 250  # dag_id, task_id, run_id, task_family columns
MAX_TEXT_CHARS = {"node_name": 253, "strategy": 100, "image": 500, "program": 250}
# No container has more: the largest machines hold 32 TiB. A value beyond it is a unit mix-up.
MAX_MEMORY_BYTES = 2**46  # 64 TiB
MAX_IO_BYTES = 2**62  # inputs and I/O may be large, but stay inside BIGINT
MAX_SECONDS = 10 * 365 * 86_400.0
INT32 = 2**31 - 1


def without_nul(text: str) -> str:
    """NUL characters as U+FFFD: PostgreSQL text cannot hold them, and SQLite ends a LIKE pattern
    at one. Names are stored this way, so searches must look for them this way."""
    return text.replace("\x00", "\ufffd")


def escape_surrogates(text: str) -> str:
    """``text`` as UTF-8 can encode it: each lone surrogate by which Python carries a byte that was
    not UTF-8 (``os.fsdecode(b"\\xff")``) as that byte's ``\\xff`` escape, any other as ``\\ud800``.
    Neither database nor a strict console can encode them, so they are escaped where they enter."""
    if _encodes(text):
        return text
    return "".join(map(_escaped, text))


def _encodes(text: str) -> bool:
    if text.isascii():  # the common case, answered without encoding
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's image of the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}" if 0xD800 <= code <= 0xDFFF else char


def fit_key(text: str, max_chars: int = MAX_KEY_CHARS) -> str:
    """``text`` when it fits, else a readable prefix, ``~`` and 12 hex digits of its SHA-256.
    NUL characters become U+FFFD (see :func:`without_nul`), lone surrogates escapes
    (see :func:`escape_surrogates`)."""
    text = without_nul(escape_surrogates(text))
    if len(text) <= max_chars:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{text[: max_chars - 13]}~{digest}"


def fit_task_key(key: TaskKey) -> TaskKey:
    return TaskKey(
        fit_key(key.dag_id), fit_key(key.task_id), fit_key(key.run_id), key.map_index, key.try_number
    )


def _bytes(value: int | None, limit: int) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if 0 <= number <= limit else None


def _seconds(value: float | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and 0.0 <= number <= MAX_SECONDS else None


def _when(value: datetime | None) -> datetime | None:
    if not isinstance(value, datetime):
        return None  # e.g. a timestamp kept as text: the store stamps the recording time
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def normalise(obs: Observation) -> Observation:
    """The attempt with keys that fit and numbers that can be true (unknown otherwise); the same
    object when it already is."""
    return obs if is_normal(obs) else _fitted(obs)


def is_normal(obs: Observation) -> bool:
    """Whether ``obs`` is already what :func:`normalise` makes of it: the common case, checked
    without building anything (a trace of a million attempts passes here)."""
    usage, key = obs.usage, obs.key
    code, when, peak = obs.exit_code, obs.finished_at, usage.peak_memory_bytes
    return (
        _fits(key.dag_id, key.task_id, key.run_id, obs.task_family)
        and _ints_within(MAX_MEMORY_BYTES, peak, obs.memory_request_bytes, obs.memory_limit_bytes, obs.user_request_bytes)
        and _ints_within(MAX_IO_BYTES, usage.read_bytes, usage.write_bytes, obs.input_size_bytes)
        and _seconds_within(usage.cpu_core_seconds, usage.wall_seconds)
        and (peak is not None or usage.peak_kind in (PeakKind.CENSORED, PeakKind.NONE))
        and (code is None or (isinstance(code, int) and -INT32 <= code <= INT32))
        and (when is None or (isinstance(when, datetime) and when.tzinfo is not None))
        and (not obs.node_name or _text_fits(obs, "node_name"))
        and all(_text_fits(obs, name) for name in ("strategy", "image", "program"))
        and (not obs.explanation or ("\x00" not in obs.explanation and _encodes(obs.explanation)))
    )  # fmt: skip


def _text_fits(obs: Observation, name: str) -> bool:
    value = getattr(obs, name)
    return not value or (len(value) <= MAX_TEXT_CHARS[name] and "\x00" not in value and _encodes(value))


def _text(obs: Observation, name: str) -> str | None:
    value = getattr(obs, name)
    return fit_key(value, MAX_TEXT_CHARS[name]) if value else value


def _fitted(obs: Observation) -> Observation:
    """:func:`normalise` of an attempt that needs it: every field through its check."""
    usage = obs.usage
    peak = _bytes(usage.peak_memory_bytes, MAX_MEMORY_BYTES)
    fitted_usage = Usage(
        peak_memory_bytes=peak,
        cpu_core_seconds=_seconds(usage.cpu_core_seconds),
        wall_seconds=_seconds(usage.wall_seconds),
        read_bytes=_bytes(usage.read_bytes, MAX_IO_BYTES),
        write_bytes=_bytes(usage.write_bytes, MAX_IO_BYTES),
        peak_kind=usage.peak_kind
        if peak is not None or usage.peak_kind is PeakKind.CENSORED
        else PeakKind.NONE,
    )
    code = obs.exit_code
    return replace(
        obs,
        key=fit_task_key(obs.key),
        task_family=fit_key(obs.task_family),
        usage=fitted_usage,
        memory_request_bytes=_bytes(obs.memory_request_bytes, MAX_MEMORY_BYTES),
        memory_limit_bytes=_bytes(obs.memory_limit_bytes, MAX_MEMORY_BYTES),
        user_request_bytes=_bytes(obs.user_request_bytes, MAX_MEMORY_BYTES),
        input_size_bytes=_bytes(obs.input_size_bytes, MAX_IO_BYTES),
        exit_code=code if isinstance(code, int) and -INT32 <= code <= INT32 else None,
        finished_at=_when(obs.finished_at),
        node_name=fit_key(obs.node_name, MAX_TEXT_CHARS["node_name"]) if obs.node_name else obs.node_name,
        strategy=_text(obs, "strategy"),
        image=_text(obs, "image"),
        program=_text(obs, "program"),
        explanation=without_nul(escape_surrogates(obs.explanation)) if obs.explanation else obs.explanation,
    )


# Loops rather than all(generator): these run once per attempt of a million-line import.
def _fits(*texts: str) -> bool:
    for text in texts:
        if len(text) > MAX_KEY_CHARS or "\x00" in text or not (text.isascii() or _encodes(text)):
            return False
    return True


def _ints_within(limit: int, *values: int | None) -> bool:
    for value in values:
        if value is not None and not (type(value) is int and 0 <= value <= limit):
            return False
    return True


def _seconds_within(*values: float | None) -> bool:
    for value in values:
        if value is not None and not (type(value) is float and 0.0 <= value <= MAX_SECONDS):
            return False
    return True
