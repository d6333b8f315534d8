"""Where a trace's bytes come from: plain or gzip-compressed files, and pipes read once.

Importers read a file more than once (format detection, header, rows), so input that cannot be
read twice (``-`` for stdin, a pipe, ``<(…)``) is first copied into a temporary file of the same
base name (the run id keeps it). First lines are read with a bound: a file whose first line is
longer than any header is refused before pandas would hold all of it in memory.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import os
import shutil
import stat
import sys
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import IO, cast

from airflow_adaptive.exceptions import TraceFormatError

# A header of every Nextflow trace field is under 1 KiB: a first line longer than this is no trace.
MAX_HEADER_BYTES = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b"
STDIN = "-"


def is_gzip(name: str) -> bool:
    """Whether the file starts as gzip does (by content, not name: a pipe has no extension)."""
    try:
        with open(name, "rb") as stream:
            return stream.read(2) == _GZIP_MAGIC
    except OSError:
        return False


# What reading a trace's bytes raises for a missing or unreadable file, or a gzip one cut short
# (EOFError) or corrupt (zlib.error, gzip.BadGzipFile: an OSError).
READ_ERRORS = (OSError, EOFError, zlib.error)


def cannot_read(name: str, err: BaseException) -> TraceFormatError:
    """One line naming the file and why its bytes could not be read."""
    return TraceFormatError(f"{name}: cannot read ({getattr(err, 'strerror', None) or err})")


def compression(name: str) -> str | None:
    """pandas' ``compression`` option for the file."""
    return "gzip" if is_gzip(name) else None


def open_bytes(name: str) -> IO[bytes]:
    """The file's bytes, decompressed when it is gzip."""
    return cast(IO[bytes], gzip.open(name, "rb")) if is_gzip(name) else open(name, "rb")


def first_line(name: str, limit: int = MAX_HEADER_BYTES) -> str:
    """The file's first line without its line end, reading at most ``limit`` bytes; a longer
    first line, one that is not UTF-8, or an empty file is a TraceFormatError."""
    try:
        with open_bytes(name) as stream:
            head = stream.readline(limit + 1)
    except READ_ERRORS as err:
        raise cannot_read(name, err) from None
    if not head:
        raise TraceFormatError(f"{name}: empty file")
    if len(head) > limit:
        raise TraceFormatError(f"{name}: first line longer than {limit} bytes: not a trace header")
    try:
        return head.decode("utf-8-sig").rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise TraceFormatError(f"{name}: cannot read (first line is not UTF-8: {err.reason})") from None


def has_rows(name: str, limit: int = MAX_HEADER_BYTES) -> bool:
    """Whether a line-based trace has anything but blank lines after its header (reading at most
    ``limit`` bytes past it: a longer run of blanks counts as rows, for the reader to judge)."""
    try:
        with open_bytes(name) as stream:
            stream.readline(limit + 1)
            seen = 0
            while seen <= limit:
                line = stream.readline(limit + 1)
                if not line:
                    return False
                if line.strip():
                    return True
                seen += len(line)
    except READ_ERRORS as err:
        raise cannot_read(name, err) from None
    return True


def header_fields(line: str, sep: str) -> list[str]:
    """The column names of a header line (quoted as CSV quotes them), stripped."""
    return [field.strip() for field in next(csv.reader([line], delimiter=sep), [])]


def check_unique(name: str, fields: Iterable[str], wanted: Iterable[str]) -> None:
    """A column the importer reads named twice in the header is a TraceFormatError naming it (pandas
    would silently read the first and rename the other)."""
    counts = Counter(fields)
    twice = sorted(f for f in set(wanted) if counts[f] > 1)
    if twice:
        raise TraceFormatError(f"{name}: column {', '.join(twice)} named twice in the header")


@contextlib.contextmanager
def readable_copy(name: str) -> Iterator[str]:
    """``name`` when it is a regular file (or missing: the importer says so); else its content
    copied once into a temporary file of the same base name, removed afterwards."""
    if name != STDIN:
        try:
            mode = os.stat(name).st_mode
        except OSError:
            mode = stat.S_IFREG
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            yield name
            return
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):  # e.g. /dev/zero: it never ends
            raise TraceFormatError(f"{name}: not a file or a pipe")
    with tempfile.TemporaryDirectory(prefix="adaptive-trace-") as folder:
        base = "stdin" if name == STDIN else os.path.basename(name) or "input"
        copy = os.path.join(folder, base)
        try:
            with _source(name) as source, open(copy, "wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
        except OSError as err:
            raise cannot_read(name, err) from None
        yield copy


def _source(name: str) -> contextlib.AbstractContextManager[IO[bytes]]:
    return contextlib.nullcontext(sys.stdin.buffer) if name == STDIN else open(name, "rb")
