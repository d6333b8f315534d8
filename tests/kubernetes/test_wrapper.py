"""The POSIX sh wrapper, run for real with sh and a fake cgroup folder."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from airflow_adaptive.core.growth_plan import rebound_of
from airflow_adaptive.core.model import PeakKind
from airflow_adaptive.core.telemetry import parse_memory_profile, parse_memory_rebound, parse_usage
from airflow_adaptive.kubernetes.command_wrapper import WRAPPER_SCRIPT, is_wrapped, wrap_command

SHELLS = [s for s in ("/bin/sh", "/bin/dash", "/bin/bash", "/bin/busybox") if shutil.which(s)]


def wrapped(shell: str, script: str) -> list[str]:
    """The wrapper around ``sh -c script``, run by ``shell``."""
    command = wrap_command(["sh", "-c", script], [])
    command[0] = shell
    if shell.endswith("busybox"):
        command.insert(1, "sh")
    return command


def environment(cgroup: Path, message: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "ADAPTIVE_CGROUP_ROOT": str(cgroup),
            "ADAPTIVE_TERMINATION_FILE": str(message)}  # fmt: skip


def run(
    tmp_path: Path, script: str, cgroup: Path, shell: str = "/bin/sh", stdin: str = ""
) -> tuple[subprocess.CompletedProcess[str], str]:
    message = tmp_path / "termination-log"
    message.write_text("")
    done = subprocess.run(
        wrapped(shell, script),
        env=environment(cgroup, message),
        capture_output=True,
        text=True,
        input=stdin,
        timeout=30,
    )
    return done, message.read_text()


@pytest.fixture
def cgroup_v2(tmp_path: Path) -> Path:
    root = tmp_path / "cg2"
    root.mkdir()
    (root / "memory.peak").write_text("734003200\n")
    (root / "cpu.stat").write_text("usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n")
    (root / "io.stat").write_text(
        "8:0 rbytes=100 wbytes=200 rios=1 wios=1\n259:0 rbytes=1000 wbytes=2000 rios=3 wios=4\n"
    )
    return root


@pytest.fixture
def cgroup_v1(tmp_path: Path) -> Path:
    root = tmp_path / "cg1"
    for sub in ("memory", "cpuacct", "blkio"):
        (root / sub).mkdir(parents=True)
    (root / "memory" / "memory.max_usage_in_bytes").write_text("52428800\n")
    (root / "cpuacct" / "cpuacct.usage").write_text("3000000000\n")
    (root / "blkio" / "blkio.throttle.io_service_bytes").write_text(
        "8:0 Read 4096\n8:0 Write 512\n8:0 Sync 0\n8:0 Total 4608\nTotal 4608\n"
    )
    return root


@pytest.mark.parametrize("shell", SHELLS)
def test_exit_code_stdout_and_stderr_are_untouched(tmp_path: Path, cgroup_v2: Path, shell: str) -> None:
    done, message = run(tmp_path, "echo out; echo err >&2; exit 42", cgroup_v2, shell)
    assert (done.returncode, done.stdout, done.stderr) == (42, "out\n", "err\n")
    usage = parse_usage(message)
    assert usage is not None
    assert usage.peak_memory_bytes == 734003200 and usage.peak_kind is PeakKind.MEASURED
    assert usage.cpu_core_seconds == pytest.approx(1.234)
    assert (usage.read_bytes, usage.write_bytes) == (1100, 2200)
    assert usage.wall_seconds is not None and usage.wall_seconds >= 0


def test_cgroup_v1_fallback(tmp_path: Path, cgroup_v1: Path) -> None:
    done, message = run(tmp_path, "true", cgroup_v1)
    usage = parse_usage(message)
    assert done.returncode == 0 and usage is not None
    assert (usage.peak_memory_bytes, usage.read_bytes, usage.write_bytes) == (52428800, 4096, 512)
    assert usage.cpu_core_seconds == pytest.approx(3.0)


def test_no_cgroup_files_give_unknowns_not_zeros(tmp_path: Path) -> None:
    done, message = run(tmp_path, "exit 0", tmp_path / "missing")
    usage = parse_usage(message)
    assert done.returncode == 0 and usage is not None
    assert (usage.peak_memory_bytes, usage.cpu_core_seconds, usage.read_bytes) == (None, None, None)


def test_stdin_reaches_the_command(tmp_path: Path, cgroup_v2: Path) -> None:
    done, _ = run(tmp_path, "cat", cgroup_v2, stdin="hello\n")
    assert done.stdout == "hello\n"


def test_existing_termination_message_is_kept(tmp_path: Path, cgroup_v2: Path) -> None:
    _done, message = run(tmp_path, 'echo "my result" > "$ADAPTIVE_TERMINATION_FILE"', cgroup_v2)
    assert message.startswith("my result\n") and parse_usage(message) is not None


def test_sigterm_is_forwarded_and_the_childs_status_returned(tmp_path: Path, cgroup_v2: Path) -> None:
    message = tmp_path / "termination-log"
    command = wrap_command(
        ["sh", "-c", "trap 'echo got-term; exit 7' TERM; while :; do sleep 0.05; done"], []
    )
    proc = subprocess.Popen(command, env=environment(cgroup_v2, message), stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert (proc.returncode, out) == (7, "got-term\n")
    assert parse_usage(message.read_text()) is not None


@pytest.mark.parametrize("shell", SHELLS)
def test_a_child_that_exits_at_once_on_term_keeps_its_code_in_100_races(tmp_path: Path, shell: str) -> None:
    """TERM as soon as the child runs; the child exits at once with its own code (not 143)."""
    command = wrapped(shell, "trap 'exit 7' TERM; echo ready; while :; do :; done")
    codes = []
    for trial in range(100):
        folder = tmp_path / str(trial)
        folder.mkdir()
        env = environment(folder, folder / "termination-log")
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        codes.append(proc.wait(timeout=10))
    assert codes == [7] * 100


@pytest.mark.parametrize("shell", SHELLS)
def test_the_childs_code_is_kept_when_it_ends_while_the_trap_runs(tmp_path: Path, shell: str) -> None:
    """The race made certain: a slow TERM trap, during which the child exits and is collected."""
    slow = WRAPPER_SCRIPT.replace(
        'kill -TERM "$child" 2>/dev/null', 'kill -TERM "$child" 2>/dev/null; sleep 0.2'
    )
    assert slow != WRAPPER_SCRIPT
    command = wrapped(shell, "trap 'exit 7' TERM; echo ready; while :; do :; done")
    command[command.index(WRAPPER_SCRIPT)] = slow
    for trial in range(5):
        folder = tmp_path / str(trial)
        folder.mkdir()
        proc = subprocess.Popen(
            command, env=environment(folder, folder / "log"), stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 7


def test_wrapping_is_recognised() -> None:
    assert is_wrapped(wrap_command(["echo"], ["hi"]))
    assert not is_wrapped(["/bin/sh", "-c", "echo hi"])
    assert not is_wrapped(None)


@pytest.mark.parametrize("shell", SHELLS)
def test_the_memory_profile_follows_the_cgroup_while_the_command_runs(
    tmp_path: Path, cgroup_v2: Path, shell: str
) -> None:
    # The command writes the cgroup's usage as a task would move it: 20 % of the peak at once, the
    # whole peak (734003200, memory.peak) after about 2.5 s.
    current = cgroup_v2 / "memory.current"
    current.write_text("146800640\n")
    script = f"sleep 2.5; {write(current, 734003200)}; sleep 1.6"
    done, message = run(tmp_path, script, cgroup_v2, shell)
    profile = parse_memory_profile(message)
    assert done.returncode == 0 and profile is not None and len(profile) == 50
    assert profile[0] == profile[9] < 1.5  # 2 % .. 20 % from the first sample on
    assert 2.0 <= profile[10] == profile[49] <= 4.5  # the rest when the jump was sampled
    usage = parse_usage(message)
    assert usage is not None and usage.wall_seconds is not None and profile[49] <= usage.wall_seconds
    assert parse_memory_rebound(message) is None  # it never fell


def write(path: Path, *lines: object) -> str:
    """A shell command that replaces a cgroup file's lines at once, as the kernel's are read (an
    ``echo >`` truncates first, and a sample read in between would see an empty file)."""
    quoted = " ".join(shlex.quote(str(line)) for line in lines)
    return f"printf '%s\\n' {quoted} > {path}.new && mv {path}.new {path}"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_rebound_is_the_working_sets_rise_after_the_task_fell_below_half(
    tmp_path: Path, cgroup_v2: Path, shell: str
) -> None:
    # working set (memory.current less inactive_file, in MiB): 700; then 600 of the 700 become
    # inactive page cache, 100 (below half: fallen, though memory.current did not fall); then 150
    # and 200 used by the task: a rebound of 100 MiB, as core's rebound_of counts it over the
    # same samples. One file changes at a time, so no sample sees half a change.
    current, stat = cgroup_v2 / "memory.current", cgroup_v2 / "memory.stat"
    current.write_text(f"{700 << 20}\n")
    stat.write_text("anon 1\ninactive_file 0\n")
    steps = [
        write(stat, "anon 1", f"inactive_file {600 << 20}"),
        write(current, 750 << 20),
        write(current, 800 << 20),
    ]
    script = "".join(f"sleep 1.5; {step}; " for step in steps) + "sleep 2.5"
    done, message = run(tmp_path, script, cgroup_v2, shell)
    assert done.returncode == 0 and parse_memory_rebound(message) == 100 << 20
    assert rebound_of([0.0, 1.5, 3.0, 4.5, 7.0], [m << 20 for m in (700, 100, 150, 200, 200)]) == 100 << 20


def test_a_fall_only_as_the_task_exits_is_no_fall(tmp_path: Path, cgroup_v2: Path) -> None:
    # the kernel frees a task's memory as it exits, before the wrapper sees it end
    current = cgroup_v2 / "memory.current"
    current.write_text(f"{700 << 20}\n")
    done, message = run(tmp_path, f"sleep 1.5; {write(current, 10 << 20)}; sleep 1.2", cgroup_v2)
    assert done.returncode == 0 and parse_memory_rebound(message) is None
    assert rebound_of([0.0, 1.0, 2.0, 2.7], [700.0, 700.0, 10.0, 10.0]) is None


def test_no_memory_file_gives_no_profile(tmp_path: Path, cgroup_v2: Path) -> None:
    done, message = run(tmp_path, "true", cgroup_v2)
    assert done.returncode == 0 and parse_memory_profile(message) is None and parse_usage(message) is not None
