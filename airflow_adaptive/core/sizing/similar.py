"""Warm starts across families: a family with no history borrows the model of a similar one.

Many families are the same tool in another DAG or sub-workflow (``FASTQC`` in two nf-core
pipelines, ``SAMTOOLS_SORT`` after two aligners, one ``bwa`` image in two DAGs). A family is named
``<dag>.<task>`` (or by the user, or ``<pipeline>:<process>`` in traces), so its *task name* is the
last part of its name after ``.``, ``:`` or ``/``, compared without case. Where known, a family
also has the container *image* it runs (without its tag or digest: a new version of a tool is
still the tool) and the *program* its command starts (see :func:`program_of`). Similarity of
two families is the larger of two scores:

- by name: 1.0 when their task names are equal (``fastqc`` and ``fastqc``); 0.5 when one task
  name is the other plus ``_`` qualifiers (``fastqc`` and ``fastqc_raw``); else 0;
- by tool: 0.5 for the same image, plus 0.5 for the same program (1.0 for both). One alone is
  weaker than a task name: an image often holds several tools, and a program says nothing of the
  data. A program includes its subcommand (``samtools sort`` is not ``samtools index``). Two
  programs name no tool, so they count for nothing: an interpreter running inline code
  (``python -c``), and Airflow's own task runner, which every KubernetesExecutor worker starts in
  Airflow's image (neither its image counts then).

A cold family's donor is the most similar other family, at least ``min_similarity`` alike (1 by
default: replayed on the shared traces, qualified names and images alone brought more OOM kills
than they saved waste), with at least ``min_samples`` samples (more samples, then the name, break
ties). Its model sizes the cold family's first tries, never above the user's request (a borrowed
model is a guess too), until the family has history of its own; but only a try that starts while
none of the family's attempts is running: the tasks that start beside it keep the request, so a
donor that ran on other data costs one OOM kill, not a batch of them.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .base import Predictor

_SEPARATORS = re.compile(r"[.:/]")
SAME_TASK_NAME = 1.0
QUALIFIED_TASK_NAME = 0.5
SAME_IMAGE = 0.5
SAME_PROGRAM = 0.5
MIN_DONOR_SAMPLES = 3
MIN_SIMILARITY = SAME_TASK_NAME
# Words that start a command without being its program: wrappers, interpreters (their script is
# the program, or the interpreter itself for an inline ``-c``/``-e`` one), shells, and shell
# builtins that set up or guard a script before its program runs.
WRAPPERS = frozenset({"env", "exec", "time", "nice", "nohup", "timeout", "tini", "dumb-init"})
INTERPRETERS = frozenset({"python", "python3", "Rscript", "perl", "ruby", "node", "java"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash"})
BUILTINS = frozenset(
    {"set", "cd", "export", "source", ".", "umask", "ulimit", "trap", "true", ":", "test", "[", "[["}
)
# Airflow's task runners: ``airflow tasks run`` (Airflow 2) and ``python -m airflow.sdk.execution_time...``
_AIRFLOW_RUNNER = re.compile(r"airflow( tasks$|\.sdk\.execution_time\.)")
_VERSIONED_PYTHON = re.compile(r"(python3?)\.\d+")
_SEPARATOR_TOKENS = frozenset({";", "&&", "||", "|", "&"})
_SUBCOMMAND = re.compile(r"[A-Za-z][\w-]*")  # ``mem`` in ``bwa mem``: a word, not a path, file or number


@dataclass(frozen=True)
class Identity:
    """What is known of what a family runs: its name, and its image and program when recorded."""

    family: str
    image: str | None = None
    program: str | None = None


def task_name(family: str) -> str:
    """The last part of a family's name, without case: what it runs, whatever DAG it is in."""
    return _SEPARATORS.split(family)[-1].casefold()


def image_name(image: str | None) -> str | None:
    """A container image without its tag or digest (``quay.io/biocontainers/samtools``)."""
    if not image or not image.strip():
        return None
    name = image.strip().split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return (f"{head}/" if head else "") + last.split(":", 1)[0]


def program_of(argv: Sequence[str] | None) -> str | None:
    """The program a container command starts, with its subcommand when the next word is one
    (``bwa mem``, ``samtools sort``: one binary, tools of different appetite): the base name of the
    first word that is not a wrapper (``env``), an option or a ``NAME=value``. An interpreter's
    script is the program (``python3 train.py``), or the interpreter for an inline one; a shell's
    ``-c`` script is read for its first command that is not a builtin (``bash -c "set -e; cd /data
    && STAR ..."`` starts ``STAR``)."""
    words = [str(w) for w in argv or ()]
    while words:
        word = words.pop(0)
        name = posixpath.basename(word)
        if name in SHELLS:
            if "-c" in words[:-1]:  # a script given inline
                return _script_program(words[words.index("-c") + 1])
            return program_of([w for w in words if not w.startswith("-")][:1])  # a script file
        interpreter = _interpreter(name)
        if interpreter and {"-c", "-e"} & set(_leading_options(words)):  # not ``x.py -c``: its own option
            return interpreter
        if not name or word.startswith("-") or "=" in word or name in WRAPPERS or interpreter:
            continue
        sub = words[0] if words and _SUBCOMMAND.fullmatch(words[0]) else None
        return f"{name} {sub}" if sub else name
    return None


def _interpreter(name: str) -> str | None:
    """The interpreter a word names (``python3.11`` is ``python3``), or None."""
    if name in INTERPRETERS:
        return name
    found = _VERSIONED_PYTHON.fullmatch(name)
    return found.group(1) if found else None


def _leading_options(words: list[str]) -> list[str]:
    """The options before an interpreter's first argument that is none (its script or module)."""
    leading = []
    for word in words:
        if not word.startswith("-"):
            break
        leading.append(word)
    return leading


def _script_program(script: str) -> str | None:
    """The first program of a shell script that is not a builtin."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    command: list[str] = []
    try:
        for token in [*lexer, ";"]:
            if token not in _SEPARATOR_TOKENS:
                command.append(token)
                continue
            found = program_of(command) if command and command[0] not in BUILTINS else None
            if found:
                return found
            command = []
    except ValueError:  # unbalanced quotes: the script's first word
        return program_of(script.split()[:1])
    return None


def _name_score(a: str, b: str) -> tuple[float, str]:
    a, b = task_name(a), task_name(b)
    if not a or not b:
        return 0.0, ""
    if a == b:
        return SAME_TASK_NAME, "the same task name"
    short, long = sorted((a, b), key=len)
    return (QUALIFIED_TASK_NAME, "a qualified task name") if long.startswith(short + "_") else (0.0, "")


def airflow_runner(program: str | None) -> bool:
    """Whether a program is Airflow's own task runner (a KubernetesExecutor worker's)."""
    return bool(program and _AIRFLOW_RUNNER.match(program))


def names_a_tool(program: str | None) -> bool:
    """Whether a program says what a task runs: not an interpreter's inline code, not Airflow's runner."""
    return bool(program) and program not in INTERPRETERS and not airflow_runner(program)


def _scored(a: Identity, b: Identity) -> tuple[float, str]:
    """How alike two families are (see the module's table), and why."""
    airflows = airflow_runner(a.program) or airflow_runner(b.program)  # the image is Airflow's then
    same_image = not airflows and bool(a.image) and image_name(a.image) == image_name(b.image)
    same_program = names_a_tool(a.program) and a.program == b.program
    tool = SAME_IMAGE * same_image + SAME_PROGRAM * same_program
    why = " and ".join(w for w, same in (("image", same_image), ("program", same_program)) if same)
    return max(_name_score(a.family, b.family), (tool, f"the same {why}"))


def similarity(a: Identity | str, b: Identity | str) -> float:
    """How alike two families are (see the module's table)."""
    return _scored(as_identity(a), as_identity(b))[0]


def as_identity(value: Identity | str) -> Identity:
    return value if isinstance(value, Identity) else Identity(value)


@dataclass(frozen=True)
class Donor:
    """The family whose model sizes a cold one, and why it was chosen."""

    family: str
    similarity: float
    samples: int
    reason: str = "the same task name"

    def explain(self) -> str:
        return (
            f"similar family {self.family!r} ({self.reason}, similarity {self.similarity:g}, "
            f"{self.samples} samples)"
        )


def pick_donor(
    family: Identity | str,
    candidates: Iterable[tuple[Identity | str, int]],
    *,
    min_similarity: float = MIN_SIMILARITY,
    min_samples: int = MIN_DONOR_SAMPLES,
) -> Donor | None:
    """The most similar other family of ``candidates`` (identity, samples) with ``min_samples``
    or more."""
    cold = as_identity(family)
    best: Donor | None = None
    for candidate, samples in candidates:
        other = as_identity(candidate)
        if other.family == cold.family or samples < min_samples:
            continue
        score, reason = _scored(cold, other)
        if score <= 0.0 or score < min_similarity:
            continue
        if best is None or (score, samples, best.family) > (best.similarity, best.samples, other.family):
            best = Donor(other.family, score, samples, reason)
    return best


def borrowed_allocation(
    donor_model: Predictor, input_size_bytes: int | None, user_request_bytes: int | None
) -> tuple[int, str]:
    """A cold task's first allocation from its donor's fitted model, at most the user's request,
    and what its input changed in the model's answer (past the donor's inputs)."""
    allocation, note = donor_model.predict_noted(input_size_bytes, user_request_bytes)
    return (min(allocation, user_request_bytes) if user_request_bytes else allocation), note
