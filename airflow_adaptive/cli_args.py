"""The commands' argument types and parser: a value no one can mean (an empty family, try 0, a day
count that is not a number, bytes that are not UTF-8) is one line naming the option, exit 2, as
every other user mistake is (README, CLI). A command whose optional packages are missing is too."""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from airflow_adaptive.core.normalise import INT32, escape_surrogates
from airflow_adaptive.core.retention import DAYS_RULE, check_keep_days
from airflow_adaptive.exceptions import AdaptiveError, TraceFormatError
from airflow_adaptive.traces.source import cannot_read

RESEARCH_INSTALL = "pip install 'airflow-adaptive[research]'"


class MissingExtraError(AdaptiveError, ImportError):
    """A command needs a package of an extra that is not installed."""


def require_research(what: str, *modules: str) -> None:
    """Import ``modules`` now, or raise :class:`MissingExtraError` saying ``what`` needs the
    ``research`` extra (SimPy, matplotlib: a scheduler, worker or API server does not install them).
    Commands call it before any work. An import, not a spec lookup: a present but broken package
    fails here too, and its reason is in the message so it is not taken for a missing one."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise MissingExtraError(f"{what} needs the research extra ({err}): {RESEARCH_INSTALL}") from None


def require_paths(paths: Sequence[str]) -> None:
    """A named file or folder that is not there is said at once, as the trace readers say it, before
    the imports a run needs (seconds of them)."""
    for path in paths:
        if not path.strip():
            raise TraceFormatError(f"{path!r}: an empty path names no file")
        if path != "-" and not os.path.exists(path):  # "-": standard input
            raise cannot_read(path, FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT)))


def plot_folder(command: str, folder: str) -> None:
    """Make ``--plot``'s folder now, before a run that can take minutes, or say in one line why it
    cannot be written."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise AdaptiveError(f"{command} --plot {folder}: is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise AdaptiveError(f"{command} --plot {folder}: cannot create it ({err.strerror or err})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise AdaptiveError(f"{command} --plot {folder}: not writable")


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but an option the command does not take is named by the command's own
    parser (``airflow-adaptive replay: error: ... see airflow-adaptive replay --help``), with the
    closest option it does take."""
    _GIVEN[:] = list(sys.argv[1:] if argv is None else argv)  # for a missing option's hint (below)
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    command = parser
    while True:  # down to the subcommand given
        subs = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs and subs[0].dest else None
        if chosen is None:
            break
        command = subs[0].choices[chosen]
    options = [o for a in command._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    close = (
        difflib.get_close_matches(extra[0].split("=")[0], options, n=1) if extra[0].startswith("--") else []
    )
    hint = f"; did you mean {close[0]}?" if close else ""
    command.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its mistakes in one line: the usage it would print first is ``--help``'s.
    Subcommands' parsers are of the same class (argparse makes them of their parent's)."""

    def error(self, message: str) -> NoReturn:
        if message.endswith("expected one argument"):  # argparse took a value such as -8Gi for an option
            option = message.split()[1].rstrip(":")
            message += f" (none given, or one that starts with '-': write {option}=VALUE)"
        elif message.startswith("the following arguments are required"):  # perhaps given, misspelt
            message += self._misspelt_hint(message)
        # A value argparse quotes may hold bytes that were not UTF-8: escaped, as everywhere.
        self.exit(2, f"{self.prog}: error: {escape_surrogates(message)} (see {self.prog} --help)\n")

    def _misspelt_hint(self, message: str) -> str:
        """A required option that is missing, and an option given that is close to it (one argparse
        took as an abbreviation of another is not it)."""
        missing = [m.strip() for m in message.split(":", 1)[1].split(",")]
        options = [o for a in self._actions for o in a.option_strings]
        for given in (g.split("=")[0] for g in _GIVEN if g.startswith("--")):
            if any(o.startswith(given) for o in options):
                continue
            close = difflib.get_close_matches(given, missing, n=1)
            if close:
                return f" ({given} is not an option; did you mean {close[0]}?)"
        return ""


_GIVEN: list[str] = []  # the command line being parsed


def utf8_text(value: str) -> str:
    """An argument that must be text: bytes that are not UTF-8 (which Python hands over as lone
    surrogates) could be neither stored nor printed, so they are named, escaped, instead."""
    shown = escape_surrogates(value)
    if shown != value:
        raise argparse.ArgumentTypeError(f"'{shown}' has bytes that are not UTF-8 (shown escaped)")
    return value


def task_family(value: str) -> str:
    """A task family name: UTF-8 text, not empty (an empty name would match no attempt and read as
    a new family)."""
    if not utf8_text(value).strip():
        raise argparse.ArgumentTypeError("a task family name cannot be empty")
    return value


def _integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{escape_surrogates(value)}' is not a whole number") from None


def namespace_name(value: str) -> str:
    """A Kubernetes namespace's name (an RFC 1123 label), not an empty word taken as the default."""
    import re

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a namespace name (lowercase letters, digits and '-', at most 63)"
        )
    return value


def at_least_one(value: str) -> int:
    """A whole number of at least one (rows to show, observations, runs), at most 2^31 - 1 (a SQL
    LIMIT and a count the store's integers hold)."""
    number = _integer(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return _within_int32(number)


def _within_int32(number: int) -> int:
    """``number``, refused past 2^31 - 1: a SQL LIMIT and a count the store's integers hold."""
    if number > INT32:
        raise argparse.ArgumentTypeError(f"must be at most {INT32}, not {number}")
    return number


def _number(value: str, low: float, high: float, *, rule: str, low_open: bool = False) -> float:
    """A finite number within [low, high] (low excluded when ``low_open``), else one line."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{escape_surrogates(value)}' is not a number") from None
    if not math.isfinite(number) or not (low < number if low_open else low <= number) or number > high:
        raise argparse.ArgumentTypeError(f"must be {rule}, not {escape_surrogates(value)}")
    return number


def share(value: str) -> float:
    """A non-negative finite share (0.05: 5 %)."""
    return _number(value, 0.0, float("inf"), rule="a finite number >= 0")


def fraction(value: str) -> float:
    """A fraction in [0, 1] (a budget)."""
    return _number(value, 0.0, 1.0, rule="in [0, 1]")


def failure_share(value: str) -> float:
    """The share of a task's runtime an OOM kill costs: in (0, 1]."""
    return _number(value, 0.0, 1.0, low_open=True, rule="in (0, 1]")


def seconds(value: str) -> float:
    """A finite time in seconds above 0."""
    return _number(value, 0.0, float("inf"), low_open=True, rule="finite seconds > 0")


def random_seed(value: str) -> int:
    """A random seed: scikit-learn's (and numpy's legacy generators') range, 0 .. 2**32 - 1."""
    number = _integer(value)
    if not 0 <= number < 2**32:
        raise argparse.ArgumentTypeError(f"a seed runs from 0 to {2**32 - 1}, not {number}")
    return number


def interference(value: str) -> float:
    """The simulator's slowdown per co-running similar task: 0.05 is 5 %; beyond 10 (1,000 % per
    task) runtimes overflow long before they mean anything."""
    return _number(value, 0.0, 10.0, rule="in [0, 10] (0.05: 5 % slower per co-running similar task)")


def _airflow_integer(value: str, low: int, what: str) -> int:
    """A whole number Airflow stores as a 32-bit integer, from ``low`` up."""
    number = _integer(value)
    if not low <= number <= INT32:
        raise argparse.ArgumentTypeError(f"Airflow {what} run from {low} to {INT32}, not {number}")
    return number


def try_number(value: str) -> int:
    """An Airflow try number: they start at 1."""
    return _airflow_integer(value, 1, "try numbers")


def priority_weight(value: str) -> int:
    """A task's priority_weight (Airflow clamps its weights to the same range)."""
    return _airflow_integer(value, -INT32, "priority weights")


def count(value: str) -> int:
    """A number of attempts to keep; 0: no limit; at most 2^31 - 1, as ``at_least_one``."""
    number = _integer(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"{number} is not a number >= 0 (0: no limit)")
    return _within_int32(number)


def keep_days(value: str) -> float:
    """A retention in days (see :func:`check_keep_days`); beyond the calendar keeps everything."""
    try:
        return check_keep_days(float(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{escape_surrogates(value)}' is not {DAYS_RULE}") from None
