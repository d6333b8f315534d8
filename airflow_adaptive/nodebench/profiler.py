"""Microbenchmarks of the machine we run on (Tarema's profiler): sysbench CPU and memory, fio I/O.

Each benchmark is a subprocess with a hard timeout; the whole run has a time
bound. Results use the feature names of :mod:`airflow_adaptive.core.grouping`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from airflow_adaptive.exceptions import AdaptiveError

STOPS = (signal.SIGINT, signal.SIGTERM)  # what stops a profile: Ctrl-C, and timeout or a stopped pod

# CPU flags that become node capabilities (label values), by the flag that proves them.
CAPABILITY_FLAGS = {
    "avx512f": "avx512",
    "avx2": "avx2",
    "avx": "avx",
    "sse4_2": "sse4.2",
    "aes": "aes",
    "sha_ni": "sha",
}


class ProfilerError(AdaptiveError):
    """A benchmark tool is missing, failed, or the profile ran out of time."""


IO_BENCHMARKS = (
    ("read", "io_seq_read_iops"),
    ("write", "io_seq_write_iops"),
    ("randread", "io_rand_read_iops"),
    ("randwrite", "io_rand_write_iops"),
)
BENCHMARKS = 3 + len(IO_BENCHMARKS)  # sysbench CPU (1 thread, all cores) and memory, and fio's


@dataclass(frozen=True)
class ProfilerSettings:
    seconds_per_benchmark: float = 10.0
    fio_directory: str | None = None  # default: a temporary folder
    fio_size: str = "256M"
    total_timeout_seconds: float = 900.0  # 7 benchmarks x 3 runs x 10 s, and fio's file writes
    repeats: int = 3  # runs per benchmark: their spread is the noise grouping must see past


def _require(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ProfilerError(
            f"{tool} is not installed: install the package {package!r} (e.g. apt-get install {package})"
        )
    return path


@dataclass(frozen=True)
class Deadline:
    """When the whole profile must have stopped (``--timeout`` after it started)."""

    at: float  # time.monotonic()
    total_seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def out_of_time(self, doing: str) -> ProfilerError:
        return ProfilerError(
            f"the node profile stopped at its --timeout of {self.total_seconds:g} s during {doing} "
            "(raise --timeout, or lower --repeats or --seconds)"
        )


@contextlib.contextmanager
def _signals_held() -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM are noted, not raised, while the block runs: raised inside Popen, after the
    fork, they would leave the tool running with no one to stop it. Delivered again if it fails."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():  # only there can handlers be set
        yield held
        return
    before = {signum: signal.signal(signum, lambda n, _: held.append(n)) for signum in STOPS}
    try:
        yield held
    except BaseException:
        _restore(before)
        for signum in held:
            signal.raise_signal(signum)
        raise
    _restore(before)


def _restore(handlers: dict[signal.Signals, Any]) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


def _run(command: list[str], deadline: Deadline, seconds: float, doing: str) -> str:
    remaining = deadline.at - time.monotonic()
    if remaining <= 0:
        raise deadline.out_of_time(doing)
    bound = min(remaining, seconds + 60)
    # Its own process group: at a timeout the tool and everything it started stop (fio forks a
    # process per job, which killing fio alone would leave running).
    with _signals_held() as held:
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
    with child:
        try:
            for signum in held:  # Ctrl-C or SIGTERM while the tool started: stopped here, with it
                signal.raise_signal(signum)
            stdout, stderr = child.communicate(timeout=bound)
        except BaseException as stop:  # the timeout, or Ctrl-C (which no longer reaches the group)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            if not isinstance(stop, subprocess.TimeoutExpired):
                raise
            if bound >= remaining:
                raise deadline.out_of_time(doing) from None
            raise ProfilerError(f"{doing} did not finish within {bound:g} s") from None
    if child.returncode != 0:
        raise ProfilerError(f"{' '.join(command[:3])} failed ({child.returncode}): {stderr.strip()[:300]}")
    return stdout


def _sysbench(test: str, options: list[str], pattern: str, seconds: float, deadline: Deadline) -> float:
    """Run one sysbench test and read the number ``pattern`` captures from its report."""
    command = [_require("sysbench", "sysbench"), test, *options, f"--time={seconds:g}", "run"]
    match = re.search(pattern, _run(command, deadline, seconds, f"sysbench {test}"))
    if not match:
        raise ProfilerError(f"unexpected sysbench {test} output")
    return float(match.group(1))


def sysbench_cpu(threads: int, seconds: float, deadline: Deadline) -> float:
    options = ["--cpu-max-prime=20000", f"--threads={threads}"]
    return _sysbench("cpu", options, r"events per second:\s*([\d.]+)", seconds, deadline)


def sysbench_memory(seconds: float, deadline: Deadline) -> float:
    options = ["--memory-block-size=1M", "--memory-total-size=10000G", "--threads=1"]
    return _sysbench("memory", options, r"\(([\d.]+) MiB/sec\)", seconds, deadline)


def fio_iops(mode: str, directory: str, size: str, seconds: float, deadline: Deadline) -> tuple[float, bool]:
    """IOPS of one fio pattern with libaio at depth 64; direct I/O unless the file system refuses it."""
    block = "4k" if mode.startswith("rand") else "1M"
    for direct in (1, 0):
        command = [
            _require("fio", "fio"), "--name=adaptive", f"--directory={directory}", f"--size={size}", f"--rw={mode}",
            f"--bs={block}", f"--direct={direct}", "--ioengine=libaio", "--iodepth=64", f"--runtime={seconds:g}",
            "--time_based", "--output-format=json",
        ]  # fmt: skip
        try:
            job = json.loads(_run(command, deadline, seconds, f"fio {mode}"))["jobs"][0]
        except ProfilerError as err:
            message = str(err).lower()
            if direct and ("direct" in message or "invalid argument" in message):
                continue  # e.g. tmpfs has no O_DIRECT
            raise
        except (ValueError, KeyError, IndexError):
            raise ProfilerError(f"unexpected fio output for {mode}") from None
        side = "read" if "read" in mode else "write"
        return float(job[side]["iops"]), bool(direct)
    raise ProfilerError(f"fio {mode} failed with and without direct I/O")


def static_facts() -> dict[str, Any]:
    flags: set[str] = set()
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "flags" and not flags:
                    flags = set(value.split())
                elif key.strip() == "model name":
                    model = value.strip()
    except OSError:
        pass
    memory_bytes = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    memory_bytes = int(line.split()[1]) * 1024
    except OSError:
        pass
    capabilities = sorted(
        {cap for flag, cap in CAPABILITY_FLAGS.items() if flag in flags} | {platform.machine()}
    )
    return {
        "cores": os.cpu_count(),
        "memory_bytes": memory_bytes,
        "cpu_model": model,
        "capabilities": capabilities,
    }


def check_fits(settings: ProfilerSettings) -> None:
    """ProfilerError when the benchmarks take longer than the timeout: they could only be killed midway."""
    if benchmark_seconds(settings) > settings.total_timeout_seconds:
        raise ProfilerError(
            f"{BENCHMARKS} benchmarks x {settings.repeats} runs x {settings.seconds_per_benchmark:g} s "
            f"take longer than --timeout {settings.total_timeout_seconds:g} s: "
            "raise --timeout, or lower --repeats or --seconds"
        )


def profile_node(
    node: str, settings: ProfilerSettings, on_step: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The profile of this machine in the shape ``airflow-adaptive groups --profiles`` reads: each
    benchmark's mean over ``settings.repeats`` runs and their coefficient of variation (the noise
    grouping compares spreads with)."""
    _require("sysbench", "sysbench")
    _require("fio", "fio")
    check_fits(settings)
    deadline = Deadline.after(settings.total_timeout_seconds)
    seconds = settings.seconds_per_benchmark
    facts = static_facts()
    cores = int(facts["cores"] or 1)
    runs: dict[str, list[float]] = {}
    direct_io = True

    def measure(name: str, feature: str, run: Callable[[], float]) -> None:
        for i in range(settings.repeats):
            if on_step:
                on_step(f"{name} ({i + 1} of {settings.repeats})" if settings.repeats > 1 else name)
            runs.setdefault(feature, []).append(run())

    measure("cpu, 1 thread", "cpu_events_per_s", lambda: sysbench_cpu(1, seconds, deadline))
    measure(f"cpu, {cores} threads", "cpu_multi_events_per_s", lambda: sysbench_cpu(cores, seconds, deadline))
    measure("memory", "memory_mib_per_s", lambda: sysbench_memory(seconds, deadline))
    with tempfile.TemporaryDirectory(prefix="adaptive-fio-", dir=settings.fio_directory) as folder:
        for mode, feature in IO_BENCHMARKS:

            def fio(mode: str = mode) -> float:
                nonlocal direct_io
                iops, direct = fio_iops(mode, folder, settings.fio_size, seconds, deadline)
                direct_io = direct_io and direct
                return iops

            measure(f"fio {mode}", feature, fio)
    if on_step:
        on_step("done")
    return {
        "node": node, **facts, "direct_io": direct_io, "repeats": settings.repeats,
        "benchmarks": {f: statistics.fmean(values) for f, values in runs.items()},
        "benchmark_cv": {f: _cv(values) for f, values in runs.items()},
    }  # fmt: skip


def _cv(values: list[float]) -> float:
    """Coefficient of variation of repeated runs (sample standard deviation / mean; 0 for one run)."""
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if len(values) > 1 and mean > 0 else 0.0


def steps(repeats: int) -> int:
    """How many steps :func:`profile_node` reports (for a progress bar)."""
    return BENCHMARKS * repeats + 1


def benchmark_seconds(settings: ProfilerSettings) -> float:
    """How long the benchmarks run: each runs ``seconds_per_benchmark``, ``repeats`` times (fio
    first writes its test file, and the tools start and stop: a little more)."""
    return BENCHMARKS * settings.repeats * settings.seconds_per_benchmark
