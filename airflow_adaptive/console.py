"""The commands' terminal output: a progress display shown on a terminal only (quiet in pipes,
logs and CI), with rich imported only when a command runs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress


def progress(*columns: Any) -> Progress:
    """A transient progress display (rich's default columns unless given)."""
    from rich.progress import Progress

    return Progress(*columns, transient=True, disable=not sys.stderr.isatty())
