"""Memory cgroups grown in place against the kernel's own OOM killer, in a real child cgroup (v1
and/or v2, where this process may make one).

The tests start a process that joins a fresh cgroup limited to 48 MiB and then grows to 120 MiB,
4 MiB every 0.1 s of the test's own clock: without growth the kernel kills it, with
``watch_locally`` it finishes, and with no room above the first limit it is killed again. The
test paces the grower, so nothing depends on how busy the machine is.
"""

from __future__ import annotations

import errno
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from airflow_adaptive.agent.cgroup import MemoryCgroup
from airflow_adaptive.agent.watch import watch_locally
from airflow_adaptive.core.growth import GrowthRule

MiB = 1 << 20


# --- the kernel ------------------------------------------------------------------------------

FIRST_LIMIT = 48 * MiB
STEPS, STEP_S = 30, 0.1  # the grower's 4 MiB allocations, one per 0.1 s of the test's clock
# One 4 MiB block per line read, acknowledged by a line: the test paces it, so the watch samples
# between allocations on a clock of its own, and a busy machine cannot make it lose a race.
GROWER = (
    "import sys\nblocks = []\nfor _ in sys.stdin:\n"
    "    blocks.append(bytearray(b'\\x01') * (4 << 20))\n    print(len(blocks), flush=True)\n"
)


def _mount(fstype: str, wanted: str) -> Path | None:
    """The mount of a cgroup hierarchy with the memory controller (v1: in its options)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, where, kind, options, *_ = line.split()
        if kind != fstype:
            continue
        if fstype == "cgroup" and wanted in options.split(","):
            return Path(where)
        if fstype == "cgroup2" and wanted in _words(Path(where) / "cgroup.controllers"):
            return Path(where)
    return None


def _words(file: Path) -> list[str]:
    try:
        return file.read_text().split()
    except OSError:
        return []


def _parent(version: int) -> Path:
    """Where a test cgroup can be made, or skip saying why not."""
    if os.geteuid() != 0:
        pytest.skip("making a memory cgroup needs root")
    mount = _mount("cgroup", "memory") if version == 1 else _mount("cgroup2", "memory")
    if mount is None:
        v2 = "no cgroup2 hierarchy has the memory controller (it is bound to v1, or absent)"
        pytest.skip("no cgroup v1 hierarchy with the memory controller" if version == 1 else v2)
    if version == 2 and "memory" not in _words(mount / "cgroup.subtree_control"):
        pytest.skip(f"memory is not enabled in {mount}/cgroup.subtree_control")
    if not os.access(mount, os.W_OK):
        pytest.skip(f"{mount} is read-only here")
    return mount


def _configure(path: Path, version: int) -> None:
    """48 MiB and no swap, so nothing but the limit decides and the kill is not put off."""
    if version == 2:
        (path / "memory.max").write_text(str(FIRST_LIMIT))
        if (path / "memory.swap.max").exists():
            (path / "memory.swap.max").write_text("0")
        return
    (path / "memory.limit_in_bytes").write_text(str(FIRST_LIMIT))  # before memsw: memsw >= limit
    if (path / "memory.memsw.limit_in_bytes").exists():
        (path / "memory.memsw.limit_in_bytes").write_text(str(FIRST_LIMIT))
    (path / "memory.swappiness").write_text("0")
    assert (path / "memory.swappiness").read_text().strip() == "0"


def _remove(path: Path) -> None:
    """Kill whatever is left in the cgroup, then remove it (EBUSY until the kill is through)."""
    for _ in range(200):
        for pid in _words(path / "cgroup.procs"):
            with suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as err:
            if err.errno != errno.EBUSY:
                raise
            time.sleep(0.05)
    raise AssertionError(f"{path} is still busy")


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def kernel_cgroup(request: pytest.FixtureRequest) -> Iterator[MemoryCgroup]:
    version: int = request.param
    path = _parent(version) / f"adaptive-test-{uuid.uuid4().hex[:12]}"
    try:
        path.mkdir()
    except OSError as err:
        pytest.skip(f"cannot make a cgroup in {path.parent}: {err.strerror}")
    try:
        _configure(path, version)
        cgroup = MemoryCgroup(path)
        assert (cgroup.version, cgroup.limit_bytes()) == (version, FIRST_LIMIT)
        yield cgroup
    finally:
        _remove(path)


class Grower:
    """A process in the cgroup before it allocates anything (the shell joins, then execs it),
    that takes a 4 MiB step whenever the test's clock passes the next 0.1 s."""

    def __init__(self, cgroup: MemoryCgroup) -> None:
        python = f"{shlex.quote(sys.executable)} -I -S -c {shlex.quote(GROWER)}"
        procs = shlex.quote(str(cgroup.path / "cgroup.procs"))
        command = ["sh", "-c", f"echo $$ > {procs} && exec {python}"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.clock_s, self.steps, self.over = 0.0, 0, False

    def sleep(self, seconds: float) -> None:
        self.clock_s += seconds
        while not self.over and self.steps < int(round(self.clock_s / STEP_S, 6)):
            self._step()

    def _step(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(b"\n")
            self.process.stdin.flush()
            acknowledged = bool(self.process.stdout.readline())
        except BrokenPipeError:
            acknowledged = False
        self.steps += 1
        self.over = not acknowledged or self.steps >= STEPS

    def finish(self) -> int:
        with suppress(BrokenPipeError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        return self.process.wait(timeout=60)


def _run(cgroup: MemoryCgroup, room_bytes: int | None) -> tuple[int, list[tuple[float, int, int]]]:
    """The grower's return code and the growths made, watched locally unless room is None. The
    rule is learnt-like (a 30 % share): at 40 MiB/s and 0.2 s latency a rescue at the last tenth
    of the limit would come too late, by design."""
    grower, growths = Grower(cgroup), []
    if room_bytes is None:
        grower.sleep(STEPS * STEP_S)
    else:
        rule = GrowthRule(latency_s=2 * STEP_S, sample_s=STEP_S, default_headroom=0.3)
        clock = lambda: grower.clock_s  # noqa: E731
        growths = watch_locally(cgroup, rule, room_bytes, lambda: grower.over, grower.sleep, clock)
    return grower.finish(), growths


def _killed(cgroup: MemoryCgroup) -> bool:
    failcnt = cgroup.path / "memory.failcnt"  # v1, for kernels without the oom_kill line
    return cgroup.oom_kills() >= 1 or (failcnt.exists() and int(failcnt.read_text()) > 0)


def test_kernel_kills_the_grower_without_growth(kernel_cgroup: MemoryCgroup) -> None:
    code, _ = _run(kernel_cgroup, room_bytes=None)
    assert code == -signal.SIGKILL
    assert _killed(kernel_cgroup)


def test_growth_in_place_lets_the_grower_finish(kernel_cgroup: MemoryCgroup) -> None:
    code, growths = _run(kernel_cgroup, room_bytes=512 * MiB)
    assert code == 0, f"grower ended with {code} after growths {growths}"
    assert growths and growths[0][1] == FIRST_LIMIT
    assert all(old < new <= 512 * MiB for _, old, new in growths)
    assert kernel_cgroup.limit_bytes() == growths[-1][2]
    assert kernel_cgroup.oom_kills() == 0


def test_no_room_above_the_first_limit_means_the_kill(kernel_cgroup: MemoryCgroup) -> None:
    code, growths = _run(kernel_cgroup, room_bytes=FIRST_LIMIT)
    assert code == -signal.SIGKILL
    assert growths == []
    assert kernel_cgroup.limit_bytes() == FIRST_LIMIT
    assert _killed(kernel_cgroup)
