"""``profile-node`` says how long it will run, shows each run on stderr, and stops everything it
started at ``--timeout``. Stand-in sysbench and fio (shell scripts) keep this quick and independent
of the machine's speed; nothing here measures time."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.core.grouping import BENCHMARK_FEATURES

QUICK_SYSBENCH = 'echo "events per second: 100.0"; echo "1000.00 MiB transferred (1000.00 MiB/sec)"'
QUICK_FIO = """echo '{"jobs": [{"read": {"iops": 50.0}, "write": {"iops": 40.0}}]}'"""
# A tool that starts a process of its own and never ends, as fio does with its jobs.
# The pid is written a second after the tool starts: a signal sent before profile-node is back from
# starting the tool (inside Popen) would find no tool to stop yet, on a busy machine.
HANGING = 'sleep 600 &\nsleep 1\necho $! > "$ADAPTIVE_TEST_PIDFILE"\nwait'


def _tools(folder: Path, monkeypatch: pytest.MonkeyPatch, sysbench: str, fio: str) -> None:
    folder.mkdir()
    for name, body in (("sysbench", sysbench), ("fio", fio)):
        script = folder / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def pidfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where a hanging tool writes the pid of the process it started; that process is stopped after
    the test whatever happened."""
    path = tmp_path / "pid"
    monkeypatch.setenv("ADAPTIVE_TEST_PIDFILE", str(path))
    yield path
    if path.exists() and _running(pid := int(path.read_text())):
        os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether the process exists and has not ended (a zombie has ended; PID 1 may not reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _state(pid: int) -> str:
    """The process's state, parent and process group, for a failure's message."""
    try:
        state, parent, group = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[:3]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"
    return f"pid {pid} state {state}, parent {parent}, group {group}"


def _stopped(pid: int) -> bool:
    """Whether the process has ended, within 60 s: SIGKILL is delivered at once, and this only waits
    for the kernel to finish, which a busy machine can slow (a CI run once saw it still running at 5 s)."""
    for _ in range(1200):
        if not _running(pid):
            return True
        time.sleep(0.05)
    return False


def test_profile_node_says_how_long_and_shows_each_run_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _tools(tmp_path / "bin", monkeypatch, QUICK_SYSBENCH, QUICK_FIO)
    argv = ["profile-node", "--json", "--repeats", "2", "--seconds", "3", "--fio-dir", str(tmp_path)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    profile = json.loads(captured.out)  # stdout is the JSON alone
    assert set(profile["benchmarks"]) == set(BENCHMARK_FEATURES)
    lines = captured.err.strip().splitlines()
    assert lines[0].startswith("profiling for about 42 s (7 benchmarks x 2 runs x 3 s")
    assert "--timeout 900 s" in lines[0]
    assert lines[1:] == [f"[{i + 1}/14] {step}" for i, step in enumerate([
        "cpu, 1 thread (1 of 2)", "cpu, 1 thread (2 of 2)",
        f"cpu, {os.cpu_count()} threads (1 of 2)", f"cpu, {os.cpu_count()} threads (2 of 2)",
        "memory (1 of 2)", "memory (2 of 2)", "fio read (1 of 2)", "fio read (2 of 2)",
        "fio write (1 of 2)", "fio write (2 of 2)", "fio randread (1 of 2)", "fio randread (2 of 2)",
        "fio randwrite (1 of 2)", "fio randwrite (2 of 2)",
    ])]  # fmt: skip


def test_a_profile_that_cannot_fit_its_timeout_is_refused_before_it_starts(
    tmp_path: Path, pidfile: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _tools(tmp_path / "bin", monkeypatch, HANGING, HANGING)
    assert main(["profile-node", "--timeout", "100"]) == 2  # the defaults: 7 x 3 x 10 s = 210 s
    err = capsys.readouterr().err
    assert "Traceback" not in err and not pidfile.exists()  # nothing was started
    assert err.strip().splitlines() == [  # one line: not "profiling for about 3.5 min" first
        "airflow-adaptive: error: 7 benchmarks x 3 runs x 10 s take longer than --timeout 100 s: "
        "raise --timeout, or lower --repeats or --seconds"
    ]
    for bad in (["--seconds", "0"], ["--seconds", "1.5"], ["--timeout", "0"]):
        assert main(["profile-node", *bad]) == 2
        assert capsys.readouterr().err.startswith("airflow-adaptive: error: profile-node: --seconds must")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for bad, says in [
        (["--fio-dir", str(tmp_path / "missing")], "--fio-dir"),
        (["--fio-dir", str(a_file)], "not a folder this user can write in"),
        (["--output", str(tmp_path / "missing" / "p.json")], "--output"),
        (["--output", str(tmp_path)], "not a file this user can write"),
        (["--fio-size", "16X"], "'16X' is not a size of at least 1M"),
        (["--fio-size", "512k"], "'512k' is not a size"),
        (["--fio-size", "4096"], "'4096' is not a size"),  # no unit: bytes, as fio reads it
        (["--fio-size", "1000P", "--fio-dir", str(tmp_path)], "is more than the "),  # the disk's free space
        (["--output", "/proc/profile.json"], "not a file this user can write"),  # even as root
    ]:  # said before any benchmark starts (HANGING would leave a pid file)
        assert main(["profile-node", "--repeats", "1", "--seconds", "1", *bad]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
        assert line.startswith("airflow-adaptive: error: profile-node: ") and says in line
        assert not pidfile.exists()


def test_the_timeout_stops_the_profile_and_every_process_it_started(
    tmp_path: Path, pidfile: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _tools(tmp_path / "bin", monkeypatch, HANGING, HANGING)
    assert main(["profile-node", "--seconds", "1", "--repeats", "1", "--timeout", "7.5"]) == 2
    assert _stopped(int(pidfile.read_text())), "the tool's own process outlived the timeout"
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "airflow-adaptive: error: the node profile stopped at its --timeout of 7.5 s during sysbench cpu "
        "(raise --timeout, or lower --repeats or --seconds)"
    )


@contextlib.contextmanager
def _profile_until_a_tool_hangs(pidfile: Path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """``profile-node`` in a process of its own, once a hanging tool has started (its pid written)."""
    command = [
        sys.executable,
        "-m",
        "airflow_adaptive.cli",
        "profile-node",
        "--seconds",
        "1",
        "--repeats",
        "1",
    ]
    with subprocess.Popen([*command, *extra], stderr=subprocess.PIPE, text=True) as cli:
        for _ in range(1200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.05)
        assert pidfile.exists(), "the hanging tool never started"
        yield cli


def test_ctrl_c_stops_the_profile_and_its_tools_with_one_line(
    tmp_path: Path, pidfile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tools(tmp_path / "bin", monkeypatch, HANGING, HANGING)
    with _profile_until_a_tool_hangs(pidfile) as cli:
        cli.send_signal(signal.SIGINT)
        err = cli.communicate(timeout=60)[1]
    assert cli.returncode == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "airflow-adaptive: interrupted"
    tool = int(pidfile.read_text())
    assert _stopped(tool), _state(tool)  # its tool's own process stopped with it


def test_sigterm_stops_the_profile_and_removes_its_fio_file(
    tmp_path: Path, pidfile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``timeout`` or a stopped pod sends SIGTERM: the fio tool stops, and its test file's folder is
    removed as after Ctrl-C (a fio file left behind can be as large as --fio-size)."""
    _tools(tmp_path / "bin", monkeypatch, QUICK_SYSBENCH, HANGING)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with _profile_until_a_tool_hangs(pidfile, "--fio-dir", str(scratch)) as cli:  # fio's folder is there
        assert [p.name.startswith("adaptive-fio-") for p in scratch.iterdir()] == [True]
        cli.send_signal(signal.SIGTERM)
        err = cli.communicate(timeout=60)[1]
    assert cli.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "airflow-adaptive: stopped (SIGTERM)"
    tool = int(pidfile.read_text())
    assert _stopped(tool), _state(tool)
    assert list(scratch.iterdir()) == []


def test_a_signal_while_a_tool_starts_is_held_and_raised_once_it_can_be_stopped() -> None:
    """Between the fork and the try that stops the tool, Ctrl-C or SIGTERM would orphan it: inside the
    hold both are noted, and delivered again when the start failed."""
    from airflow_adaptive.nodebench.profiler import _signals_held

    before = signal.getsignal(signal.SIGTERM)
    with _signals_held() as held:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)  # handlers run between bytecodes
    assert held == [signal.SIGTERM, signal.SIGINT] and signal.getsignal(signal.SIGTERM) is before
    with pytest.raises(KeyboardInterrupt), _signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        raise FileNotFoundError("no such tool")  # the start failed: the held Ctrl-C is raised instead
