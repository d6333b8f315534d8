"""A new user's first mistakes with ``airflow-adaptive``: each is one line and exit 2 where it was typed
(a DAG file, a task family, a strategy name), and a pod only logs it once; tables keep whole values
off a terminal."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.cli import main
from tests.conftest import validate_pod
from tests.edges.test_cli import HEADER

HEAD = """
from datetime import datetime

from airflow.sdk import DAG, dag

from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator as Pod
"""
TASK = 'Pod(task_id="align", task_family="genomics.align", image="busybox")'
START = "schedule=None, start_date=datetime(2026, 1, 1)"
DAG_FILES = {  # how Airflow's docs write DAGs, and none binds a module-level name
    "with DAG(...): and no name": f'with DAG(dag_id="unnamed", {START}):\n    {TASK}\n',
    "a called @dag function": f"@dag({START})\ndef decorated():\n    {TASK}\n\n\ndecorated()\n",
}


def _one_line_error(code: int, err: str, *says: str) -> str:
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("airflow-adaptive: error: ")
    for words in says:
        assert words in line
    return line


def _write(path: Path, source: str) -> str:
    path.write_text(source)
    return str(path)


# -- demo --dag-file: DAGs found as Airflow finds them ----------------------------------------
@pytest.mark.parametrize("kind", list(DAG_FILES))
def test_demo_finds_a_dag_airflow_would_find(
    kind: str, tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    dag_file = _write(tmp_path / "my_dag.py", HEAD + DAG_FILES[kind])
    assert main(["demo", "--dag-file", dag_file, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    (task,) = shown["tasks"]
    assert task["task_id"] == "align" and task["strategy"] == "adaptive"
    validate_pod(task["pod"])


def test_demo_shows_the_mode_the_dags_tag_sets(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DAG tagged ``adaptive:observe`` keeps its pods' resources in the demo, as in a real run."""
    source = f'with DAG(dag_id="watched", tags=["adaptive:observe"], {START}):\n    {TASK}\n'
    assert main(["demo", "--dag-file", _write(tmp_path / "watched.py", HEAD + source), "--json"]) == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    assert task["pod"]["metadata"]["annotations"]["adaptive.airflow.io/mode"] == "observe (DAG tag)"
    assert task["strategy"] == "user" and task["explanation"].startswith("keeps the user's resources")


PLAIN_KPO = """
from datetime import datetime

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk import DAG
from kubernetes.client import models as k8s

with DAG(dag_id="plain_kpo", schedule=None, start_date=datetime(2026, 1, 1), tags=TAGS):
    KubernetesPodOperator(
        task_id="align", image="busybox",
        container_resources=k8s.V1ResourceRequirements(requests={"memory": "32Gi"}, limits={"memory": "32Gi"}),
    )
"""


@pytest.mark.parametrize(
    ("tags", "mode", "strategy", "request_gib"),
    [([], "off ([adaptive] mode): left as the user asked", None, 32), (["adaptive:recommend"], "recommend (DAG tag)", "user", 32),
     (["adaptive:enforce"], "enforce (DAG tag)", "adaptive", None)],
)  # fmt: skip
def test_demo_shows_what_the_hook_makes_of_a_plain_kubernetes_pod_operators_pod(
    tags: list[str], mode: str, strategy: str | None, request_gib: int | None, tmp_path: Path, engine: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A team that does not rewrite its DAGs tries each mode without a cluster: the demo's history
    sizes ``plain_kpo.align`` from ``genomics.align`` (the same task name) where enforced."""
    dag_file = _write(tmp_path / "plain_kpo.py", PLAIN_KPO.replace("TAGS", repr(tags)))
    assert main(["demo", "--dag-file", dag_file, "--json"]) == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    assert task["task_family"] == "plain_kpo.align" and task["mode"].startswith(mode)
    assert task["strategy"] == strategy and task["user_request_bytes"] == 32 * 2**30
    if request_gib is None:  # sized from the similar family, far below the 32 GiB asked
        assert 0 < task["memory_request_bytes"] < 16 * 2**30
    else:
        assert task["memory_request_bytes"] == request_gib * 2**30
    assert (strategy == "user") == (task["explanation"] or "").startswith("keeps the user's resources")
    validate_pod(task["pod"])
    assert main(["demo", "--dag-file", dag_file]) == 0  # the table shows the mode as written, not as markup
    assert task["mode"].split(":")[0] in capsys.readouterr().out


TEMPLATED_KPO = """
from datetime import datetime

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk import DAG

TEMPLATE = {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"containers": [
    {"name": "base", "image": "busybox", "resources": {"requests": {"memory": "32Gi"}}}]}}
with DAG(dag_id="templated", schedule=None, start_date=datetime(2026, 1, 1), tags=["adaptive:enforce"]):
    KubernetesPodOperator(task_id="align", pod_template_dict=TEMPLATE)
    KubernetesPodOperator(task_id="kept", image="busybox", labels={"adaptive.airflow.io/opt-out": "true"})
    KubernetesPodOperator.partial(task_id="many", image="busybox").expand(arguments=[["a"], ["b"]])
"""


def test_demo_reads_a_templates_ask_keeps_an_opted_out_pod_and_names_mapped_tasks(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Enforced without a cluster: no PriorityClass is looked up (the demo is a dry run)."""
    assert main(["demo", "--dag-file", _write(tmp_path / "templated.py", TEMPLATED_KPO), "--json"]) == 0
    out, err = capsys.readouterr()
    align, kept = json.loads(out)["tasks"]
    assert json.loads(out)["mapped_not_shown"] == ["many"]
    assert align["user_request_bytes"] == 32 * 2**30 and align["mode"] == "enforce (DAG tag)"
    assert align["strategy"] == "adaptive" and align["memory_request_bytes"] < 16 * 2**30
    assert kept["mode"].startswith("opted out") and kept["strategy"] is None
    assert "mapped tasks not shown (many)" in err
    assert "PriorityClasses" not in caplog.text
    validate_pod(align["pod"])


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("x = 1\n", "defines no DAG"),
        ("import no_such_module_for_the_demo\n", "cannot be imported: No module named"),
        ("from airflow.sdk import DAG\nx = (\n", "cannot be imported: '(' was never closed"),
    ],
    ids=["no DAG", "import error", "syntax error"],
)
def test_a_dag_file_without_a_dag_is_one_line(
    source: str, says: str, tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    dag_file = _write(tmp_path / "not_a_dag.py", source)
    _one_line_error(main(["demo", "--dag-file", dag_file]), capsys.readouterr().err, dag_file, says)
    missing = str(tmp_path / "missing.py")
    _one_line_error(main(["demo", "--dag-file", missing]), capsys.readouterr().err, "no such DAG file")
    _one_line_error(main(["demo", "--dag-file", str(tmp_path)]), capsys.readouterr().err, "is a folder")


def test_a_dag_without_an_adaptive_task_is_one_line_and_records_nothing(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f'from datetime import datetime\nfrom airflow.sdk import DAG\nwith DAG(dag_id="plain", {START}):\n    pass\n'
    dag_file = _write(tmp_path / "plain.py", source)
    code = main(["demo", "--dag-file", dag_file])
    said = "DAG 'plain' has no KubernetesPodOperator task"
    _one_line_error(code, capsys.readouterr().err, said, "decide --task-family plain.<task> --new-family")
    code = main(["decide", "--task-family", "genomics.align"])  # the demo's history was not recorded
    _one_line_error(code, capsys.readouterr().err, "no task family 'genomics.align'")


@pytest.mark.parametrize(("rules", "says"), [("", "a DAG tag adaptive:<mode> sets a DAG's"),
                                             ("ALIGN=observe", "family_modes outranks a DAG's adaptive:<mode> tag")])  # fmt: skip
def test_decide_says_whether_a_dags_tag_can_change_the_mode(
    rules: str, says: str, tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    _import_align(tmp_path, capsys)
    from airflow_adaptive.config import get_settings

    monkeypatch.setenv("AIRFLOW__ADAPTIVE__FAMILY_MODES", rules)
    get_settings.cache_clear()  # the import read them
    assert main(["decide", "--task-family", "ALIGN"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("mode: ")]
    assert says in line


# -- decide: a mistyped family or strategy ----------------------------------------------------
def _import_align(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [f"{i},h{i},ALIGN,ALIGN ({i}),COMPLETED,0,1,8589934592,{2**30},60000,150,1,1,{1700000000000 + i},n1"
            for i in range(1, 6)]  # fmt: skip
    (tmp_path / "trace.csv").write_text(HEADER + "\n".join(rows) + "\n")
    assert main(["history", "import", str(tmp_path / "trace.csv")]) == 0
    capsys.readouterr()


def test_an_unknown_family_is_an_error_unless_asked_for_on_purpose(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _import_align(tmp_path, capsys)
    code = main(["decide", "--task-family", "ALIGNN"])
    _one_line_error(
        code, capsys.readouterr().err, "no task family 'ALIGNN'", "did you mean 'ALIGN'?", "--new-family"
    )
    code = main(["decide", "--task-family", "nf.align"])  # its task's name, in another case and DAG
    _one_line_error(code, capsys.readouterr().err, "no task family 'nf.align'", "did you mean 'ALIGN'?")
    code = main(["decide", "--task-family", "no.such.family"])
    line = _one_line_error(code, capsys.readouterr().err, "no task family 'no.such.family'")
    assert "did you mean" not in line and "'airflow-adaptive history families' lists them" in line
    assert (
        main(["decide", "--task-family", "no.such.family", "--new-family", "--request", "4Gi", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["memory_request_bytes"] == 4 * 2**30  # a new family's decision
    assert main(["decide", "--task-family", "ALIGN", "--json"]) == 0  # a known one needs no flag
    assert json.loads(capsys.readouterr().out)["observations"] == 5
    assert main(["decide", "--task-family", "ALIGN", "--new-family", "--json"]) == 0  # said, not ignored
    said = capsys.readouterr()
    assert (
        json.loads(said.out)["observations"] == 5
        and "--new-family ignored: 'ALIGN' has 5 attempts" in said.err
    )
    for as_json in ([], ["--json"]):  # as decide says it, not exit 1 on stdout, nor an empty list
        code = main(["history", "show", "--task-family", "ALIGNN", *as_json])
        _one_line_error(
            code, capsys.readouterr().err, "history show: no task family 'ALIGNN'", "did you mean 'ALIGN'?"
        )


def test_a_store_without_our_tables_is_one_line_naming_the_migration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sqlalchemy import create_engine

    from airflow_adaptive.store import access

    empty = create_engine(f"sqlite:///{tmp_path / 'unmigrated.db'}")  # a database nobody migrated
    monkeypatch.setattr(access, "airflow_engine", lambda: empty)
    for new_family in ([], ["--new-family"]):  # no decision to show: as every other command, exit 2
        code = main(["decide", "--task-family", "genomics.align", *new_family])
        _one_line_error(
            code, capsys.readouterr().err, "no such table: adaptive_", "(run airflow db migrate?)",
            "a pod keeps the user's request meanwhile",
        )  # fmt: skip
    # a rebuild reflects the tables first: SQLAlchemy names only the table, so the message says what it is
    code = main(["history", "rebuild"])
    _one_line_error(code, capsys.readouterr().err, "no such table: adaptive_", "(run airflow db migrate?)")


@pytest.mark.parametrize(
    ("option", "typo", "says"),
    [
        ("STRATEGY", "adaptve", "[adaptive] strategy: unknown sizing strategy 'adaptve' (did you mean 'adaptive'?)"),
        ("OOM_RETRY_POLICY", "dubble", "[adaptive] oom_retry_policy: unknown OOM retry policy 'dubble' "
                                       "(did you mean 'double'?)"),
    ],
)  # fmt: skip
def test_an_unknown_strategy_in_config_is_an_error_in_the_cli(
    option: str, typo: str, says: str, tmp_path: Path, engine: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from airflow_adaptive.config import get_settings

    _import_align(tmp_path, capsys)
    monkeypatch.setenv(f"AIRFLOW__ADAPTIVE__{option}", typo)
    get_settings.cache_clear()
    for argv in (["decide", "--task-family", "ALIGN"], ["demo"]):
        line = _one_line_error(main(argv), capsys.readouterr().err, says, "known: ")
        assert '"' not in line  # no KeyError quotes around the message


def test_an_unknown_strategy_where_a_pod_is_at_stake_fails_open_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow_adaptive.advisor import Advisor
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.core.model import MemoryRequest
    from airflow_adaptive.core.units import GIB
    from tests.factories import attempt
    from tests.memory_store import InMemoryHistoryStore

    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STRATEGY", "adaptve")
    get_settings.cache_clear()
    store = InMemoryHistoryStore()
    store.record([attempt(n, peak=GIB) for n in range(5)])
    with caplog.at_level(logging.WARNING):
        pods = [
            Advisor(get_settings(), lambda: store).memory.decide("f", MemoryRequest(2 * GIB, 2 * GIB))
            for _ in "ab"
        ]
    for decision in pods:
        assert (decision.memory_request_bytes, decision.adaptive) == (2 * GIB, False)
        assert decision.explanation.startswith("unknown sizing strategy 'adaptve' (did you mean 'adaptive'?)")
    (warning,) = [r.getMessage() for r in caplog.records if "adaptve" in r.getMessage()]
    assert '"' not in warning and "pods keep the user's resources" in warning


# -- tables off a terminal: whole values --------------------------------------------------------
def test_tables_keep_whole_values_off_a_terminal(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _import_align(tmp_path, capsys)
    assert main(["history", "show", "--task-family", "ALIGN", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)[0]["key"]["run_id"]
    assert main(["history", "show", "--task-family", "ALIGN"]) == 0  # as in `... | cat`
    shown = capsys.readouterr().out
    assert "…" not in shown and "finished" in shown and f"{run_id} / 1" in shown

    long_name = tmp_path / ("a-trace-with-a-name-as-long-as-real-ones-" * 3 + ".csv")
    long_name.write_text((tmp_path / "trace.csv").read_text())
    assert main(["replay", str(long_name), "--strategy", "pc95", "--workers", "1"]) == 0
    title = f"{long_name} (5 tasks, history completed, largest node 1 GiB)"  # on one line
    shown = capsys.readouterr().out
    assert title in shown, shown.splitlines()[0]

    assert main(["demo", "--json"]) == 0
    explanations = [t["explanation"] for t in json.loads(capsys.readouterr().out)["tasks"]]
    assert main(["demo"]) == 0
    table = capsys.readouterr().out
    assert all(why in table for why in explanations)  # each on one line, not folded at 160 columns

    profiles = tmp_path / "profiles.json"
    names = [
        f"node-{i}-in-a-very-long-node-pool-name-of-a-real-cloud-provider.example.internal" for i in range(4)
    ]
    profiles.write_text(json.dumps([
        {"node": name, "benchmarks": {"cpu_events_per_s": 100.0 * (1 + i // 2)}} for i, name in enumerate(names)
    ]))  # fmt: skip
    assert main(["groups", "--profiles", str(profiles)]) == 0
    groups = capsys.readouterr().out
    assert f"{names[0]}, {names[1]}" in groups and f"{names[2]}, {names[3]}" in groups


def test_on_a_terminal_tables_take_its_width() -> None:
    import io

    from airflow_adaptive.console import OFF_TERMINAL_WIDTH, table_console

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert table_console(Terminal()).width < OFF_TERMINAL_WIDTH
    assert table_console(io.StringIO()).width == OFF_TERMINAL_WIDTH


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("HISTORY_WINDOW", "0", "history_window = '0' is not an integer >= 1"),
        ("HISTORY_WINDOW", "abc", "history_window = 'abc' is not an integer"),
        ("HISTORY_WINDOW", str(2**63), f"history_window = '{2**63}' is not an integer >= 1 and <= 1000000"),
        (
            "STORE_TIMEOUT_SECONDS",
            "1e7",
            "store_timeout_seconds = '1e7' is not a number of seconds > 0 and <= 3600",
        ),
        ("STORE_TIMEOUT_SECONDS", "-5", "store_timeout_seconds = '-5' is not a number of seconds > 0"),
        ("STORE_TIMEOUT_SECONDS", "nan", "store_timeout_seconds = 'nan' is not a number of seconds > 0"),
        (
            "METRICS_SAMPLE_INTERVAL_SECONDS",
            "0",
            "metrics_sample_interval_seconds = '0' is not a number of seconds > 0",
        ),
        (
            "SHARED_READ_BYTES_PER_SECOND",
            "-1e6",
            "shared_read_bytes_per_second = '-1e6' is not a number of bytes per second > 0",
        ),
    ],
)
def test_a_number_in_config_that_cannot_be_meant_is_one_line(
    option: str, value: str, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_adaptive.config import get_settings

    monkeypatch.setenv(f"AIRFLOW__ADAPTIVE__{option}", value)
    get_settings.cache_clear()
    try:
        _one_line_error(
            main(["decide", "--task-family", "ALIGN"]), capsys.readouterr().err, f"[adaptive] {says}"
        )
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
