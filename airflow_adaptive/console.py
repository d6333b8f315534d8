"""The commands' terminal output: a progress display shown on a terminal only (quiet in pipes,
logs and CI), and the console every table is printed on; rich is imported only when a command runs."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

# Off a terminal nothing limits a line, and rich would otherwise assume 80 columns and cut
# values short ("finish…"): a file or a pipe gets whole values, each row on one line.
OFF_TERMINAL_WIDTH = 100_000


def progress(*columns: Any) -> Progress:
    """A transient progress display (rich's default columns unless given)."""
    from rich.progress import Progress

    return Progress(*columns, transient=True, disable=not sys.stderr.isatty())


def table_console(out: TextIO) -> Console:
    """Where a command prints its tables: the terminal's width on a terminal, unbounded elsewhere.
    No markup and no emoji codes: a cell or title is shown as written (a file name or an explanation
    may hold brackets, which rich would read as styles; a family name such as ``P:CAT:DOG`` holds
    ``:CAT:``, which rich would print as an emoji)."""
    from rich.console import Console

    width = None if out.isatty() else OFF_TERMINAL_WIDTH
    return Console(file=out, width=width, markup=False, emoji=False)


def print_table(table: Table, out: TextIO) -> None:
    """Print a command's table on :func:`table_console`. Off a terminal its title and caption go on
    lines of their own: rich would wrap them to the table's width, mid-word (a trace's path)."""
    console = table_console(out)
    if out.isatty():
        console.print(table)
        return
    title, caption = table.title, table.caption
    table.title = table.caption = None
    if title:
        console.print(title, soft_wrap=True, highlight=False)
    console.print(table)
    if caption:
        console.print(caption, soft_wrap=True, highlight=False)


def significant(value: float, digits: int = 3) -> str:
    """``value`` to at least ``digits`` significant digits in plain decimals (``29,069``, ``0.000609``),
    as a table of GB·h from milliseconds-long tasks to whole pipelines needs: never ``2.91e+04``,
    never ``0.00``. A whole number keeps every digit."""
    if not math.isfinite(value) or value == 0:
        return f"{abs(value) if value == 0 else value:g}"
    rounded = float(f"{value:.{digits - 1}e}")  # 99.96 is 100 first, so it gets "100", not "100.0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    return f"{round(value, decimals):,.{decimals}f}"
