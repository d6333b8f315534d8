"""What every importer returns, and the checks they share."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import re
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from airflow_adaptive.core.model import IMPORTED_DAG_ID, ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.telemetry import MAX_COUNT
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.source import READ_ERRORS, cannot_read, compression

MISSING = {"", "-", "NA", "nan", "NaN", "null", "None"}
UNCLOSED_QUOTE = re.compile(r"EOF inside string starting at row (\d+)")
# Counts, bytes, milliseconds: nothing in a trace is larger (and BIGINT holds it). A row holding a
# value outside [0, 2^62] (negative, not finite, 1e300) is skipped as NOT_A_NUMBER.
MAX_NUMBER = float(MAX_COUNT)
NOT_A_NUMBER = "not a number from 0 to 2^62"


@contextlib.contextmanager
def _table_errors(name: str) -> Iterator[None]:
    """An unreadable file as one TraceFormatError naming the file and what is wrong (e.g. the line
    with too many fields)."""
    try:
        yield
    except pd.errors.EmptyDataError:
        raise TraceFormatError(f"{name}: empty file") from None
    except (pd.errors.ParserError, csv.Error, UnicodeDecodeError, ValueError) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[-1][:200]
        quote = UNCLOSED_QUOTE.search(reason)  # pandas counts records (rows) from 0 there, the header 0
        if quote:
            reason = f"a quote opened in row {int(quote.group(1)) + 1} (the header is row 1) is never closed"
        raise TraceFormatError(f"{name}: cannot be read as a table ({reason})") from None
    except READ_ERRORS as err:
        raise cannot_read(name, err) from None


def read_table(name: str, **options: Any) -> pd.DataFrame:
    """A CSV/TSV file (plain or gzip) as strings, missing cells as ""."""
    with _table_errors(name), warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.ParserWarning)  # "Length of header ...": one line, not two
        frame = pd.read_csv(
            name, dtype=str, keep_default_na=False, compression=compression(name), index_col=False, **options
        )  # index_col=False: rows longer than the header are not read as an index
    return frame.fillna("")  # short rows: their missing cells are empty, and reported per row


def read_table_chunks(
    name: str, chunk_rows: int, *, text: Collection[str], numeric: Collection[str], last: str, **options: Any
) -> Iterator[tuple[pd.DataFrame, pd.Series]]:
    """The ``text`` and ``numeric`` columns of a CSV/TSV file (plain or gzip), ``chunk_rows`` rows at
    a time (memory stays at one chunk, whatever the file's length), and which rows are short (fewer
    fields than the header); each chunk's index counts rows from the file's start. Text as
    :func:`read_table` gives it. A numeric column is parsed by pandas' C parser, missing values NaN,
    when every cell of the chunk is a number (five times faster than strings converted afterwards);
    else it stays strings, for :func:`numeric_columns` to name the bad cells.

    ``last`` is the header's last column, read with no missing-value markers (a numeric one with ``-``
    in it then stays strings, read as missing): see :func:`_short_rows`."""
    wanted = {*text, *numeric, last}
    missing_markers = {column: sorted(MISSING) for column in numeric if column != last}
    with _table_errors(name):
        reader = pd.read_csv(
            name, dtype=dict.fromkeys(text, str), keep_default_na=False, chunksize=chunk_rows,
            na_values=missing_markers, usecols=lambda column: column in wanted,
            compression=compression(name), index_col=False, **options,
        )  # fmt: skip  # index_col=False: rows longer than the header are not read as an index
        with reader:
            for frame in reader:
                short = _short_rows(frame, last, [c for c in numeric if c in frame.columns and c != last])
                present = [c for c in text if c in frame.columns]
                frame[present] = frame[present].fillna("")  # short rows: reported per row
                yield frame, short


def _short_rows(frame: pd.DataFrame, last: str, numbers: list[str]) -> pd.Series:
    """Rows that ended before the header's last column. pandas gives their missing cells as empty
    strings, as it gives an empty field, so a row is short when its last cell is empty and a number
    before it is missing too; a whole row with only its last cell empty (an edited trace) is kept."""
    cells = frame[last] if last in frame.columns else None
    if cells is None or cells.dtype.kind in "iuf":  # all numbers: no row ended early
        return pd.Series(False, index=frame.index)
    ended = cells.isna() | (cells.astype(str) == "")
    if not numbers:
        return ended
    before = frame[numbers]
    return ended & (before.isna() | (before.astype(str) == "")).any(axis=1)


def trace_name(name: str, files: Sequence[str] = ()) -> str:
    """A trace file's name in run ids: its name and a hash of its content (of ``files``, for a folder
    read from them). Two files of the same name in different folders stay apart; the same file
    imported again, from anywhere, is recognised as already there."""
    digest = hashlib.sha256()
    try:
        for path in files or (name,):
            digest.update(os.path.relpath(path, name).encode("utf-8", "surrogateescape") if files else b"")
            with open(path, "rb") as stream:
                for chunk in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(chunk)
    except OSError as err:
        raise cannot_read(name, err) from None
    return os.path.basename(os.path.abspath(name))[:220] + f"@{digest.hexdigest()[:10]}"


@dataclass(frozen=True)
class SkippedRow:
    path: str
    line: int
    reason: str
    kind: str = ""  # the reason without the row's own details, to count rows by (default: up to a colon)
    by_line: bool = True  # False: ``line`` counts records (a JSON instance's tasks), which the reason names

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}" if self.by_line else f"{self.path}: {self.reason}"


@dataclass
class ImportResult:
    observations: list[Observation] = field(default_factory=list)
    skipped: list[SkippedRow] = field(default_factory=list)


def numeric_columns(
    frame: pd.DataFrame,
    columns: tuple[str, ...],
    readers: Mapping[str, Callable[[pd.Series], pd.Series]] | None = None,
) -> tuple[dict[str, pd.Series], pd.Series]:
    """Each column as numbers (missing values NaN) and, per row, a note of values that are not numbers.

    A missing column counts as all missing; negative numbers are malformed, never clipped to zero.
    ``readers`` turn a column's cells that are not plain numbers (e.g. Nextflow's ``1.2 GB``) into
    numbers, NaN where they cannot; they see only those cells, so a raw file never pays for them.
    """
    numbers: dict[str, pd.Series] = {}
    bad = pd.Series("", index=frame.index, dtype=object)
    for column in columns:
        if column not in frame.columns:
            numbers[column] = pd.Series(float("nan"), index=frame.index)
            continue
        raw = frame[column]
        if raw.dtype.kind in "iuf":  # parsed as numbers already: NaN is a missing value
            values, malformed = raw.astype(float), pd.Series(False, index=frame.index)
        else:
            raw = raw.fillna("")  # NaN among strings: a missing value
            values = pd.to_numeric(raw, errors="coerce").astype(float)  # surrounding blanks are allowed
            unread = values.isna()  # missing (unknown), readable by a reader, or not a number (reported)
            if unread.any() and readers and column in readers:
                values[unread] = readers[column](raw[unread].astype(str))
                unread = values.isna()
            malformed = unread & ~raw.astype(str).str.strip().isin(MISSING) if unread.any() else unread
        invalid = malformed | (values < 0) | (values > MAX_NUMBER)  # inf is > too
        if invalid.any():
            bad[invalid] = bad[invalid] + f"{column}=" + raw[invalid].astype(str).str.strip() + " "
        numbers[column] = values.where(~invalid)
    return numbers, bad


def value(numbers: dict[str, pd.Series], column: str, pos: int) -> float | None:
    number = numbers[column].iat[pos]
    return None if pd.isna(number) else float(number)


def whole(number: float | None) -> int | None:
    return None if number is None else int(number)


def completed_observation(
    trace: str,
    position: int,
    family: str,
    *,
    peak_bytes: float,
    wall_seconds: float | None,
    cpu_percent: float | None = None,
    read_bytes: float | None = None,
    write_bytes: float | None = None,
    request_bytes: float | None = None,
    input_size_bytes: float | None = None,
    node_name: str | None = None,
    note: str = "",
) -> Observation:
    """A measured, completed attempt of a trace that has no retries or exit codes of its own."""
    return Observation(  # a family longer than the store's keys is fitted by the store, never cut here
        key=TaskKey(IMPORTED_DAG_ID, family, f"trace:{trace}", position, 1),
        task_family=family,
        usage=Usage(
            peak_memory_bytes=int(peak_bytes),
            cpu_core_seconds=None
            if cpu_percent is None or wall_seconds is None
            else cpu_percent / 100 * wall_seconds,
            wall_seconds=wall_seconds,
            read_bytes=whole(read_bytes),
            write_bytes=whole(write_bytes),
            peak_kind=PeakKind.MEASURED,
        ),
        exit_reason=ExitReason.COMPLETED,
        exit_code=0,
        memory_request_bytes=whole(request_bytes),
        memory_limit_bytes=whole(request_bytes),
        user_request_bytes=whole(request_bytes),
        input_size_bytes=whole(input_size_bytes),
        node_name=node_name,
        strategy="user",
        explanation=f"imported from {trace}" + (f" ({note})" if note else ""),
    )
