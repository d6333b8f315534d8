"""A corpus of malformed inputs: every one ends in a result or one clear line, never a traceback,
and nothing impossible is stored."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.core.units import counted
from tests.conftest import sql_store

HEADER = ["task_id", "hash", "process", "name", "status", "exit", "attempt", "memory", "peak_rss", "realtime",
          "%cpu", "rchar", "wchar", "complete", "hostname"]  # fmt: skip
GOOD = ["1", "ab/cd", "ALIGN", "ALIGN (1)", "COMPLETED", "0", "1", "8589934592", "1073741824", "60000", "150",
        "1000", "2000", "1700000000000", "n1"]  # fmt: skip
NUMERIC = (
    "task_id",
    "exit",
    "attempt",
    "memory",
    "peak_rss",
    "realtime",
    "%cpu",
    "rchar",
    "wchar",
    "complete",
)
BAD_NUMBERS = ("", "-", "abc", "-5", "inf", "nan", "1e400", "9" * 30, "1.5", "0x10", "253402300800000000")


def _csv(rows: list[list[str]], sep: str = ",") -> str:
    return "\n".join(sep.join(r) for r in [HEADER, *rows]) + "\n"


def nextflow_cases() -> Iterator[tuple[str, bytes]]:
    for column in NUMERIC:
        for bad in BAD_NUMBERS:
            row = list(GOOD)
            row[HEADER.index(column)] = bad
            yield f"nf-{column}-{bad[:12]}", _csv([GOOD, row]).encode()
    texts = {
        "empty": "",
        "header-only": ",".join(HEADER) + "\n",
        "ragged-short": _csv([GOOD, GOOD[:5]]),
        "ragged-long": _csv([GOOD, [*GOOD, "x", "y"]]),
        "every-row-long": _csv([[*GOOD, "x", "y"], ["2", *GOOD[1:], "x", "y"]]),  # pandas read an index
        "only-ragged": _csv([GOOD[:3]]),
        "tabs": _csv([GOOD, GOOD], "\t"),
        "mixed-separators": _csv([GOOD]).replace(",", "\t", 3),
        "quoted-commas": _csv([GOOD]) + '2,h,"A,B","A,B (2)",COMPLETED,0,1,1,1,1,1,1,1,1,n\n',
        "unterminated-quote": _csv([GOOD]) + '2,h,"ALIGN,x,COMPLETED,0,1,1,1,1,1,1,1,1,n\n',
        "long-process": _csv([GOOD, [GOOD[0], "h", "P" * 1000, *GOOD[3:]]]),
        "unicode-process": _csv([GOOD, [GOOD[0], "h", "日本語—🙂", *GOOD[3:]]]),
        "empty-process": _csv([GOOD, [GOOD[0], "h", "", *GOOD[3:]]]),
        "duplicate-keys": _csv([GOOD, GOOD, GOOD]),
        "unknown-status": _csv([[*GOOD[:4], "WEIRD", *GOOD[5:]]]),
        "all-aborted": _csv([[*GOOD[:4], "ABORTED", *GOOD[5:]]]),
        "no-status-column": "task_id,process\n1,A\n",
        "bom": "\ufeff" + _csv([GOOD]),
        "crlf": _csv([GOOD, GOOD]).replace("\n", "\r\n"),
        "nul-bytes": _csv([GOOD]).replace("ALIGN", "AL\x00IGN"),
        "blank-lines": _csv([GOOD]) + "\n\n\n",
        "spaces-only-row": _csv([GOOD]) + "   \n",
    }
    for name, text in texts.items():
        yield f"nf-{name}", text.encode()
    yield "nf-latin1", _csv([[GOOD[0], "h", "PROZESS_Ü", *GOOD[3:]]]).encode("latin-1")
    for name, (text, _, _) in ROW_CASES.items():
        yield name, text.encode()
    yield "nf-binary", bytes(range(256)) * 4


def _row(task_id: int, **cells: str) -> list[str]:
    row = [str(task_id), *GOOD[1:]]
    for column, cell in cells.items():
        row[HEADER.index(column.replace("cpu_", "%cpu"))] = cell
    return row


# Rows the importers must skip, by line, while keeping every good row around them (whether the bad
# rows share a chunk with good ones or not): file, attempts imported, lines skipped.
ROW_CASES: dict[str, tuple[str, int, list[int]]] = {
    "nf-short-and-bad-number-in-one-chunk": (
        _csv([_row(1), ["25001", "ab/cd", "MAL01", "MAL01 (25001)"], _row(3, peak_rss="lots"), _row(4)]), 2, [3, 4]
    ),
    "nf-short-after-good": (_csv([_row(1), _row(2)[:9]]), 1, [3]),
    "nf-task-id-out-of-range": (_csv([_row(1), _row(3000000000), _row(3)]), 2, [3]),
    "nf-attempt-out-of-range": (_csv([_row(1), _row(2, attempt="2147483648"), _row(3)]), 2, [3]),
    "nf-short-bad-and-out-of-range": (
        _csv([_row(1), _row(2)[:4], _row(3, memory="x"), _row(2**40), _row(5, attempt="99999999999")]), 1, [3, 4, 5, 6]
    ),
    "nf-two-long-names": (
        _csv([_row(1, process="P" * 10_000 + "a"), _row(2, process="P" * 10_000 + "b")]), 2, []
    ),
}  # fmt: skip


def wfformat_cases() -> Iterator[tuple[str, bytes]]:
    task = {"id": "t1", "name": "t1", "category": "align", "runtimeInSeconds": 10, "memoryInBytes": 2**30,
            "parents": [], "files": []}  # fmt: skip
    docs: dict[str, Any] = {
        "not-json": "{",
        "array": "[]",
        "number": "5",
        "workflow-number": {"workflow": 5},
        "tasks-number": {"workflow": {"tasks": 5}},
        "tasks-of-strings": {"workflow": {"tasks": ["a", "b"]}},
        "task-missing-fields": {"workflow": {"tasks": [{}]}},
        "negative-runtime": {"workflow": {"tasks": [{**task, "runtimeInSeconds": -1}]}},
        "string-memory": {"workflow": {"tasks": [{**task, "memoryInBytes": "lots"}]}},
        "huge-memory": {"workflow": {"tasks": [{**task, "memoryInBytes": 10**40}]}},
        "null-name": {"workflow": {"tasks": [{**task, "name": None}]}},
        "unknown-parent": {"workflow": {"tasks": [{**task, "parents": ["nope"]}]}},
        "cycle": {"workflow": {"tasks": [{**task, "parents": ["t1"]}]}},
        "specification-only": {"workflow": {"specification": {"tasks": [task]}}},
    }
    for name, doc in docs.items():
        text = doc if isinstance(doc, str) else json.dumps(doc)
        yield f"wf-{name}", text.encode()
    yield "wf-infinity", b'{"workflow": {"tasks": [{"id": "t", "name": "t", "runtimeInSeconds": Infinity}]}}'
    yield "wf-deep", b"{" + b'"a":[' * 100_000 + b"]" * 100_000 + b"}"
    yield "wf-deep-objects", b'{"a":' * 200_000 + b"1" + b"}" * 200_000


def cctools_cases() -> Iterator[tuple[str, bytes]]:
    for name, text in {
        "delimiter-only": "-- 8< --\n",
        "garbage-after": "-- 8< --\ncategory: x\nnot a pair\n",
        "bad-numbers": "-- 8< --\ncategory: x\nmemory: lots\nwall_time: -1\n",
    }.items():
        yield f"cct-{name}", text.encode()


CASES = [*nextflow_cases(), *wfformat_cases(), *cctools_cases()]


def test_the_corpus_is_big_enough() -> None:
    assert len(CASES) + 2 * len(BAD_QUANTITIES) + len(BAD_ARGV) + len(BAD_CONFIG) >= 200


@pytest.mark.parametrize("chunk_rows", [25_000, 2], ids=["whole", "chunked"])
@pytest.mark.parametrize(("name", "content"), CASES, ids=[c[0] for c in CASES])
def test_malformed_trace_is_one_line_or_a_result(
    name: str,
    content: bytes,
    chunk_rows: int,
    tmp_path: Path,
    engine: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_adaptive.traces import nextflow

    monkeypatch.setattr(nextflow, "CHUNK_ROWS", chunk_rows)  # Nextflow traces are read a chunk at a time
    path = tmp_path / f"{name}.csv"
    path.write_bytes(content)
    for argv in (
        ["history", "import", str(path)],
        ["replay", str(path), "--json", "--strategy", "user", "--workers", "1"],
    ):
        code = main(argv)  # an exception here is the traceback a user would see
        captured = capsys.readouterr()
        assert code in (0, 1, 2), (argv, code)
        if code == 2:
            assert captured.err.strip().splitlines()[-1].startswith("airflow-adaptive: error: ")
            said = [line for line in captured.err.strip().splitlines() if not line.startswith("skipped ")]
            assert "Traceback" not in captured.err and len(said) == 1, said
        if name in ROW_CASES and argv[0] == "history":
            _, imported, lines = ROW_CASES[name]
            assert code == 0 and f"{counted(imported, 'attempt')} imported" in captured.out, captured
            assert [int(n) for n in re.findall(r"\.csv:(\d+): ", captured.err)] == lines, captured.err
    if name in ROW_CASES:
        stored = sum(f.attempts for f in sql_store(engine).families(limit=1000))
        assert stored == ROW_CASES[name][1]
    for family in sql_store(engine).families(limit=1000):
        for obs in sql_store(engine).history(family.task_family):
            for number in (obs.usage.peak_memory_bytes, obs.usage.wall_seconds, obs.usage.cpu_core_seconds,
                           obs.memory_request_bytes, obs.memory_limit_bytes):  # fmt: skip
                assert number is None or (math.isfinite(number) and number >= 0), (name, obs)


BAD_QUANTITIES = ("lots", "-1Gi", "1.5XB", "1e400", "Gi", " ", "1 Gi", "0x10Mi", "∞", "nan", "inf", "1..5Gi",
                  "--1", "+-1", "1Gi1", "10Zi", "1e99999", "\u0661Gi", "0", "1/2Gi", "Mi1", "8Gi ")  # fmt: skip
BAD_ARGV = (
    ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20", "--runs", "0"],
    ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20", "--time-to-failure", "2"],
    ["simulate", "--cluster", "no-such-cluster", "--workload", "synthetic:ligo:20"],
    ["simulate", "--cluster", "5,5,5", "--workload", "bad:spec"],
    ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:nope:20"],
    ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:-3"],
    ["simulate", "--cluster", "5,5,5", "--workload", "wfformat:/no/such/file.json"],
    ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20", "--queue", "lifo"],
    ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20", "--sizing", "magic"],
    ["replay", "/no/such/trace.csv"],
    ["replay", "/no/such/trace.csv", "--strategy", "nope"],
    ["history", "import", "/no/such/trace.csv"],
    ["history", "import", "--format", "nextflow", "/no/such/trace.csv"],
    ["groups", "--profiles", "/no/such/profiles.json"],
    ["decide", "--task-family", "f", "--input-size-bytes", "-5"],
    ["decide", "--task-family", "f", "--input-size-bytes", "99999999999999999999999"],
)
BAD_CONFIG = (
    ("HISTORY_WINDOW", "abc"), ("STORE_TIMEOUT_SECONDS", "soon"), ("MIN_MEMORY", "lots"),
    ("MAX_ALLOCATABLE_MEMORY", "-1Gi"), ("LFF_FAILURES", "maybe"), ("MIN_OBSERVATIONS", "1.5"),
    ("RETENTION_DAYS", "forever"), ("LIMIT_TO_REQUEST_RATIO", "x"), ("MAX_OOM_RATE", "2%"),
    ("MAX_OOM_RATE", "1.5"), ("MAX_OOM_RATE", "-0.01"), ("LIMIT_TO_REQUEST_RATIO", "0.5"),
    ("LIMIT_TO_REQUEST_RATIO", "nan"), ("WARM_STARTS", "maybe"), ("SIZE_CPU", "ture"),
    ("MUTATE_ALL_PODS", "yes please"),
)  # fmt: skip


def _one_line_error(code: int, err: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(("airflow-adaptive: error: ", "airflow-adaptive decide: error"))
    )


@pytest.mark.parametrize("quantity", BAD_QUANTITIES)
def test_bad_quantity_on_the_command_line(
    quantity: str, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_line_error(main(["decide", "--task-family", "f", f"--request={quantity}"]), capsys.readouterr().err)


@pytest.mark.parametrize("argv", BAD_ARGV, ids=[" ".join(a[:3]) + f"#{i}" for i, a in enumerate(BAD_ARGV)])
def test_bad_arguments(argv: list[str], engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's own usage error: usage line and one error line, exit 2
        code = int(stop.code or 0)
        assert code == 2 and "Traceback" not in capsys.readouterr().err
        return
    _one_line_error(code, capsys.readouterr().err)


EXAMPLE_TRACE = str(
    Path(__file__).resolve().parents[2] / "docs" / "examples" / "nextflow" / "chipseq_trace.txt"
)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["decide", "--task-family", "f", "--request", "8Gi", "--limit", "1Gi"],
            "--limit 1Gi is below --request 8Gi",
        ),
        (["replay", EXAMPLE_TRACE, "--strategy", ","], "--strategy ',' names no strategy"),
        (["replay", EXAMPLE_TRACE, "--cap-bytes", "2Mi"], "--cap-bytes 2Mi is below the floor"),
        (
            ["replay", EXAMPLE_TRACE, "--strategy", "pc95,grow-5s"],
            "grow-5s replays memory over time: add --time",
        ),
    ],
    ids=["limit below request", "no strategy", "cap below floor", "growth without time series"],
)
def test_values_no_one_can_mean_are_named(
    argv: list[str], says: str, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    _one_line_error(code, err)
    assert says in err


@pytest.mark.parametrize(("option", "raw"), BAD_CONFIG)
def test_bad_config_names_the_option(
    option: str, raw: str, engine: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_adaptive.config import get_settings

    monkeypatch.setenv(f"AIRFLOW__ADAPTIVE__{option}", raw)
    get_settings.cache_clear()
    code = main(["decide", "--task-family", "f"])
    err = capsys.readouterr().err
    _one_line_error(code, err)
    assert option.lower() in err


@pytest.mark.parametrize("quantity", BAD_QUANTITIES)
def test_bad_quantity_in_a_pod_spec_is_a_clear_error_when_the_dag_is_parsed(quantity: str) -> None:
    from kubernetes.client import models as k8s

    from airflow_adaptive.exceptions import InvalidQuantityError
    from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

    with pytest.raises(InvalidQuantityError, match="container_resources memory") as raised:
        AdaptiveKubernetesPodOperator(
            task_id="t", image="busybox",
            container_resources=k8s.V1ResourceRequirements(limits={"memory": quantity}),
        )  # fmt: skip
    assert "\n" not in str(raised.value)
