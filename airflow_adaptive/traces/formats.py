"""The trace formats by name, apart from their readers: the command line lists them in its help
without importing pandas (``traces/load.py`` maps each to its reader)."""

from __future__ import annotations

TRACE_FORMATS = ("nextflow", "lotaru", "cctools", "wfformat", "series")
FORMATS = ("auto", *TRACE_FORMATS)
