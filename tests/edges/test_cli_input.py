"""A careless user's values on the command line and in ``[adaptive]``: bytes that are not UTF-8 in a
family or a file name, a day count past the calendar, sub-byte memory, empty names, try 0. Each is a
result or one line naming the option, exit 2; never a traceback."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.cli import main
from tests.edges.test_cli import HEADER

NOT_UTF8 = os.fsdecode(b"trace-\xff\xfe")  # what Python makes of such bytes in argv or a file name
ESCAPED = "trace-\\xff\\xfe"
README = str(Path(__file__).parents[2] / "README.md")  # not YAML: a backtick cannot start a token


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of the command; an exception other than exit is the traceback."""
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse stops on an argument it cannot use
        code = int(stop.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str], *says: str) -> str:
    code, _, err = _run(argv, capsys)
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("airflow-adaptive")
    assert ": error: " in line
    for words in says:
        assert words in line, line
    return line


def _write_trace(path: Path) -> str:
    """Five attempts of ALIGN that finished in November 2023."""
    rows = [
        f"{i},h{i},ALIGN,ALIGN ({i}),COMPLETED,0,1,8589934592,{2**30},60000,150,1,1,{1700000000000 + i},n1"
        for i in range(1, 6)
    ]
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return str(path)


# -- item 9: bytes that are not UTF-8 ------------------------------------------------------------
@pytest.mark.parametrize("command", [["decide"], ["decide", "--new-family"], ["history", "show"]])
def test_a_family_that_is_not_utf8_is_one_line_with_its_bytes_escaped(
    command: list[str], engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_line([*command, "--task-family", NOT_UTF8], capsys, "--task-family", ESCAPED, "UTF-8")


def test_a_trace_file_whose_name_is_not_utf8_imports_under_its_escaped_name(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _write_trace(tmp_path / f"{NOT_UTF8}.csv")
    code, out, err = _run(["history", "import", trace], capsys)
    assert code == 0 and "Traceback" not in err
    assert f"{ESCAPED}.csv: 5 attempts imported (5 new, 0 already there)" in out
    code, out, _ = _run(["history", "show", "--task-family", "ALIGN", "--json"], capsys)
    run_ids = {attempt["key"]["run_id"] for attempt in json.loads(out)}
    (run_id,) = run_ids
    assert run_id.startswith(f"trace:{ESCAPED}.csv@")
    code, out, _ = _run(["history", "show", "--task-family", "ALIGN"], capsys)
    assert code == 0 and f"{run_id} / 1" in out
    code, out, _ = _run(["history", "import", trace], capsys)  # found again under the same name
    assert code == 0 and "(0 new, 5 already there)" in out
    code, out, err = _run(["replay", trace, "--strategy", "pc95", "--workers", "1"], capsys)
    assert code == 0 and f"{ESCAPED}.csv (5 tasks" in out and "Traceback" not in err


def test_the_store_keeps_names_with_such_bytes_escaped(store: Any) -> None:
    from airflow_adaptive.core.normalise import fit_key
    from tests.factories import attempt

    assert fit_key(NOT_UTF8) == ESCAPED and fit_key("ünïcode") == "ünïcode"
    assert fit_key("lone \ud800 high surrogate") == "lone \\ud800 high surrogate"
    store.record([attempt(n, family=NOT_UTF8) for n in range(3)])
    assert len(store.history(NOT_UTF8)) == 3  # reads apply the same rule
    assert [h.task_family for h in store.history(ESCAPED)] == [ESCAPED] * 3


# -- item 10: a retention past the calendar keeps everything -------------------------------------
@pytest.mark.parametrize("days", ["999999", "1e8", "1e12", "inf", "1e400"])
def test_a_retention_before_the_earliest_date_keeps_everything(
    days: str,
    tmp_path: Path,
    engine: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from airflow_adaptive.config import get_settings

    _run(["history", "import", _write_trace(tmp_path / "trace.csv")], capsys)
    code, out, _ = _run(["history", "prune", "--keep-days", "1", "--dry-run"], capsys)
    assert code == 0 and "would remove 5 attempts" in out  # a real limit still removes them
    code, out, err = _run(["history", "prune", "--keep-days", days, "--dry-run"], capsys)
    assert (code, err) == (0, "") and out.startswith("would remove 0 attempts of 0 task families")
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__RETENTION_DAYS", days)
    get_settings.cache_clear()
    code, out, err = _run(["history", "prune"], capsys)
    assert (code, err) == (0, "") and out.startswith("removed 0 attempts")


def test_the_cutoff_is_none_when_it_falls_before_any_date(store: Any) -> None:
    from airflow_adaptive.core.retention import prune_cutoff
    from tests.factories import T0, attempt

    now = T0 + timedelta(days=30)
    assert prune_cutoff(now, 1.5) == now - timedelta(days=1.5)
    assert prune_cutoff(now, 0) is None  # 0: no day limit
    for days in (999_999, 1e8, 1e12, float("inf"), float("nan")):
        assert prune_cutoff(now, days) is None
    store.record([attempt(n) for n in range(3)])
    assert store.prune(keep_attempts=0, keep_days=1e12, now=now).attempts == 0
    assert store.prune(keep_attempts=0, keep_days=1e-9, now=now, dry_run=True).attempts == 3


# -- item 13: values accepted without complaint ---------------------------------------------------
BAD_ARGUMENTS = [
    (["history", "prune", "--keep-days", "nan", "--dry-run"], "--keep-days", "'nan'"),
    (["history", "prune", "--keep-days", "-1", "--dry-run"], "--keep-days", ">= 0"),
    (["history", "prune", "--keep-days", "soon"], "--keep-days", "'soon'"),
    (["history", "prune", "--keep-attempts", "-3"], "--keep-attempts", ">= 0"),
    (["history", "prune", "--keep-attempts", "9" * 23, "--dry-run"], "--keep-attempts", "at most 2147483647"),
    (["decide", "--new-family", "--task-family", "f", "--request=1e-400"], "--request", "1e-400"),
    (["decide", "--new-family", "--task-family", "f", "--request=0.0001"], "--request", "0.0001 bytes"),
    (["decide", "--new-family", "--task-family", "f", "--request=1m"], "--request 1m is 0.001 bytes",
     "did you mean 1Mi?"),
    (["decide", "--new-family", "--task-family", "f", "--limit=512k"], "--limit 512k is 512000 bytes"),
    (["decide", "--new-family", "--task-family", "f", "--request", ""], "--request", "'' is not a Kubernetes quantity"),
    (["decide", "--new-family", "--task-family", "f", "--request", "8GB"], "did you mean 8Gi (binary, as",
     "or 8G (decimal)?"),
    (["decide", "--new-family", "--task-family", "f", "--limit", "1.5 GiB"], "did you mean 1.5Gi?"),
    (["decide", "--new-family", "--task-family", ""], "--task-family", "empty"),
    (["decide", "--new-family", "--task-family", "  "], "--task-family", "empty"),
    (["history", "show", "--task-family", ""], "--task-family", "empty"),
    (["history", "families", "--limit", "9" * 20], "--limit", "must be at most 2147483647"),
    (["history", "import", ""], "'': an empty path names no file"),
    (["demo", "--trace", ""], "'': an empty path names no file"),  # not the generated history instead
    (["decide", "--new-family", "--task-family", "f", "--try-number", "0"], "--try-number", "from 1 to 2147483647"),
    (["decide", "--new-family", "--task-family", "f", "--try-number", "9" * 20], "--try-number", "not 99999"),
    (["decide", "--new-family", "--task-family", "f", "--priority-weight", "2147483648"], "--priority-weight",
     "from -2147483647 to 2147483647"),
    (["decide", "--new-family", "--task-family", "f", "--try-number", "-5"], "--try-number", "not -5"),
    (["decide", "--new-family", "--task-family", "f", "--try-number", "two"], "--try-number", "'two'"),
    (["decide", "--new-family", "--task-family", "f", "--previous-oom", "--try-number", "1"],
     "--previous-oom is for a retry", "--try-number 2"),
    (["replay", "--time-series", "--resize-latency", "2,,5", "trace"], "--resize-latency", "not '2,,5'"),
    (["simulate", "--cluster", README, "--workload", "synthetic:ligo:20"], "cannot start any token, line"),
    (["decide", "--new-family", "--task-family", "f", "--image", NOT_UTF8], "--image", ESCAPED),
    (["decide", "--task-family", "f", "--request", "-8Gi"], "--request: expected one argument",
     "write --request=VALUE"),
    (["replay", "--workers", "-2", "trace.csv"], "--workers", "at least 1, not -2"),
    (["replay", "--workers", "0", "trace.csv"], "--workers", "not 0"),
    (["replay", "--resize-latency", "5", "trace.csv"], "--resize-latency is for --time-series"),
    (["replay", "--refit-growth=-1", "trace.csv"], "--refit-growth", ">= 0, not -1"),
    (["replay", "--refit-growth", "nan", "trace.csv"], "--refit-growth", ">= 0, not nan"),
    (["replay", "--refit-growth", "often", "trace.csv"], "--refit-growth", "'often' is not a number"),
    (["replay", "--max-oom-rate", "2", "trace.csv"], "--max-oom-rate", "in [0, 1], not 2"),
    (["replay", "--min-observations", "0", "trace.csv"], "--min-observations", "at least 1, not 0"),
    (["replay", "--time-to-failure", "0", "trace.csv"], "--time-to-failure", "in (0, 1], not 0"),
    (["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20", "--runs", "0"], "--runs", "not 0"),
    (["grow-agent", "--interval", "-1"], "--interval", "finite seconds > 0, not -1"),
    (["observe", "--interval", "inf"], "--interval", "finite seconds > 0, not inf"),
    (["observe", "--namespace", ""], "--namespace", "'' is not a namespace name"),
    (["observe", "--namespace", "Airflow"], "--namespace", "'Airflow' is not a namespace name"),
    (["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20", "--seed", "-1"], "--seed",
     "from 0 to 4294967295, not -1"),
    (["groups", "--profiles", "p.json", "--seed", str(2**32)], "--seed", "not 4294967296"),
    (["simulate", "--cluster", "5,5,5", "--workload", "wfformat:/no/such.json"],
     "/no/such.json: cannot read (No such file or directory)"),
    (["decide", "--task-famly", "x"], "required: --task-family (--task-famly is not an option; did you mean"
     " --task-family?)"),
    (["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20", "--interference", "inf"],
     "--interference", "in [0, 10]", "not inf"),
    (["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20", "--interference", "nan"],
     "--interference", "not nan"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "says"), [(a[0], a[1:]) for a in BAD_ARGUMENTS], ids=[f"{a[0][0]} {a[0][-2:]!r}" for a in BAD_ARGUMENTS])  # fmt: skip
def test_a_value_that_cannot_be_meant_is_one_line_naming_the_option(
    argv: list[str], says: tuple[str, ...], engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_line(argv, capsys, *says)


def test_the_replays_cap_is_bytes_or_a_quantity() -> None:
    from airflow_adaptive.cli import build_parser
    from airflow_adaptive.replay_cli import _replay_config

    for cap in ("77309411328", "72Gi"):
        args = build_parser().parse_args(["replay", "--cap-bytes", cap, "--min-memory", "64Mi", "t.csv"])
        assert _replay_config(args).cap_bytes == 72 * 2**30


def test_a_request_of_at_least_a_mebibyte_is_taken(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        ["decide", "--new-family", "--task-family", "f", "--request", "1Mi", "--json"], capsys
    )
    assert code == 0 and json.loads(out)["memory_request_bytes"] >= 2**20


def test_decide_json_gives_the_bytes_the_pod_gets(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["decide", "--new-family", "--task-family", "f", "--request=1000000001", "--limit=1500000001"]
    code, out, _ = _run([*argv, "--json"], capsys)
    decision = json.loads(
        out
    )  # a new family keeps its request, rounded up to whole MiB as the pod's quantity
    assert code == 0 and (decision["memory_request_bytes"], decision["memory_limit_bytes"]) == (
        954 * 2**20,
        1431 * 2**20,
    )
    assert decision["cpu_request_millicores"] is None  # size_cpu off: the user's CPU request stays


BAD_CONFIG = [
    ("RETENTION_DAYS", "nan", "retention_days"),
    ("RETENTION_DAYS", "-1", "retention_days"),
    ("RETENTION_ATTEMPTS", "-1", "retention_attempts"),
    ("RETENTION_ATTEMPTS", "9" * 23, "an integer from 0 (no limit) to 2147483647"),
    ("MIN_MEMORY", "1m", "[adaptive] min_memory 1m is 0.001 bytes"),
    ("MAX_ALLOCATABLE_MEMORY", "100k", "[adaptive] max_allocatable_memory 100k is 100000 bytes"),
    ("CACHE_BUDGET", "5m", "[adaptive] cache_budget 5m is 0.005 bytes"),
    ("SMALL_INPUT_BELOW", "0.5", "[adaptive] small_input_below 0.5 is 0.5 bytes"),
    ("MIN_MEMORY", "100Gi", "[adaptive] min_memory = '100Gi' is above max_allocatable_memory = '64Gi'"),
    ("CACHE_ROOT", "cache/here", "[adaptive] cache_root = 'cache/here' is not an absolute path"),
    ("CACHE_ROOT", "/var/../", "[adaptive] cache_root = '/var/../' is a system folder: staging would write"),
    ("CACHE_ROOT", "//etc", "[adaptive] cache_root = '//etc' is a system folder"),
    (
        "CACHE_ROOT",
        "/var/lib/kubelet/pods",
        "[adaptive] cache_root = '/var/lib/kubelet/pods' is a system folder",
    ),
    ("SMALL_INPUT_BELOW", "2G", "[adaptive] small_input_below = '2G' is above big_input_from = '1G'"),
]


def test_staging_without_an_image_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_adaptive.config import load_settings
    from airflow_adaptive.exceptions import InvalidConfigError

    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STAGING_IMAGE", " ")
    assert load_settings().staging.image == ""  # staging off: no init container, no image needed
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__CACHE_ROOT", "/mnt/adaptive-cache")
    with pytest.raises(InvalidConfigError, match=r"^\[adaptive\] staging_image is empty"):
        load_settings()


@pytest.mark.parametrize(("option", "raw", "says"), BAD_CONFIG)
@pytest.mark.parametrize(
    "command", [["history", "prune", "--dry-run"], ["decide", "--new-family", "--task-family", "f"]]
)
def test_config_and_command_line_agree(
    option: str, raw: str, says: str, command: list[str], engine: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from airflow_adaptive.config import get_settings

    monkeypatch.setenv(f"AIRFLOW__ADAPTIVE__{option}", raw)
    get_settings.cache_clear()
    _one_line(command, capsys, "airflow-adaptive: error: ", says)


@pytest.mark.parametrize(
    ("argv", "setting", "check"),
    [
        (
            ["decide", "--task-family", "f"],
            ("DATABASE__SQL_ALCHEMY_CONN", "notaurl"),
            "[database] sql_alchemy_conn and its database driver",
        ),
        (
            ["demo"],
            ("DATABASE__SQL_ALCHEMY_CONN", "notaurl"),
            "[database] sql_alchemy_conn and its database driver",
        ),
        (
            ["decide", "--task-family", "f"],
            ("LOGGING__LOGGING_CONFIG_CLASS", "no.such"),
            "the Airflow configuration",
        ),
    ],
)
def test_a_setting_airflow_cannot_start_with_is_one_line_not_its_traceback(
    tmp_path: Path, argv: list[str], setting: tuple[str, str], check: str
) -> None:
    """Importing Airflow sets up its database and logging from the configuration: a value it cannot
    use stops that import, in a new process, before any of our code reads a setting."""
    import subprocess
    import sys

    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path), **{f"AIRFLOW__{setting[0]}": setting[1]})
    done = subprocess.run(
        [sys.executable, "-m", "airflow_adaptive.cli", *argv], env=env, capture_output=True, text=True,
        timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "error:" in line]
    assert "Airflow cannot start with this configuration (" in line and line.endswith(f"check {check}")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["replay", "t.csv", "--stratgy", "all"], "airflow-adaptive replay: error: unrecognized arguments: "
                                                  "--stratgy all; did you mean --strategy? "
                                                  "(see airflow-adaptive replay --help)"),
        (["history", "show", "--task-family", "f", "--jsn"], "airflow-adaptive history show: error: unrecognized "
                                                             "arguments: --jsn; did you mean --json?"),
        (["config-reference", "--zzz"], "airflow-adaptive config-reference: error: unrecognized arguments: --zzz "
                                        "(see"),
    ],
    ids=["replay", "history show", "no close option"],
)  # fmt: skip
def test_an_option_the_command_does_not_take_is_named_by_the_command(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(says) and len(err.splitlines()) == 1


def test_names_in_config_are_read_without_surrounding_space(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_adaptive.config import check_sizing_names, load_settings

    monkeypatch.setenv("AIRFLOW__ADAPTIVE__PLACEMENT_POLICY", " tarema ")
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STRATEGY", "adaptive ")
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__OOM_RETRY_POLICY", "\tdouble")
    settings = load_settings()
    check_sizing_names(settings)  # no "did you mean 'adaptive'?" for a trailing space
    assert (settings.sizing.strategy, settings.sizing.retry_policy, settings.placement_policy) == (
        "adaptive",
        "double",
        "tarema",
    )
