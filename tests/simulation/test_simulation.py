"""The cluster simulator on hand-checked cases, its inputs, and its determinism."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from airflow_adaptive.config import load_settings
from airflow_adaptive.core.placement import DEFAULT_PLACEMENT
from airflow_adaptive.core.units import GIB
from airflow_adaptive.evaluation.replay import GB_H
from airflow_adaptive.exceptions import InvalidSettingError, SimulationInputError, TraceFormatError
from airflow_adaptive.simulation.bounds import lower_bound_s
from airflow_adaptive.simulation.cluster import Cluster, SimNode, preset
from airflow_adaptive.simulation.compare import compare
from airflow_adaptive.simulation.engine import RunResult, Simulation
from airflow_adaptive.simulation.params import SimParams
from airflow_adaptive.simulation.pegasus import KINDS, pegasus_workload
from airflow_adaptive.simulation.placements import PLACEMENTS
from airflow_adaptive.simulation.sources import load_workload, lotaru_workload
from airflow_adaptive.simulation.workload import SimTask, Workload, concurrent_runs
from tests.conftest import EXAMPLES
from tests.factories import PLAIN, node, task

# No start-up time, no interference, no CPU sharing, nodes in the given order: runtimes are exact.


def run(
    nodes: list[SimNode],
    tasks: list[SimTask],
    placement: str,
    params: SimParams = PLAIN,
    sizing: str = "user",
) -> RunResult:
    sim = Simulation(
        Cluster("test", tuple(nodes)),
        Workload("w", tuple(tasks)),
        placement,
        sizing,
        params,
        record_timeline=True,
    )
    return sim.run()


def test_two_nodes_three_tasks_exact_makespans() -> None:
    nodes = [node("slow", 1.0), node("fast", 2.0)]
    tasks = [task("a", 100), task("b", 100), task("c", 50, "a", "b")]
    # SJFN: a on the fast node (50 s), b on the slow one (100 s), then c on the fast one (25 s).
    sjfn = run(nodes, tasks, "sjfn")
    assert sjfn.makespan_s == pytest.approx(125.0)
    assert {s.task: s.node for s in sjfn.timeline} == {"a": "fast", "b": "slow", "c": "fast"}
    # Fill-nodes takes the first node with room: a on slow (100 s), b on fast (50 s), c on slow (50 s).
    fill = run(nodes, tasks, "fill-nodes")
    assert fill.makespan_s == pytest.approx(150.0)
    assert {s.task: s.node for s in fill.timeline} == {"a": "slow", "b": "fast", "c": "slow"}
    assert fill.mean_wait_s == pytest.approx(0.0) and fill.succeeded == 3 and fill.oom_kills == 0
    # Bound: the critical path on the fast node (50 + 25 s) beats perfect packing (250 core-s / 4 cores).
    assert lower_bound_s(Cluster("test", tuple(nodes)), Workload("w", tuple(tasks)), PLAIN) == pytest.approx(
        75.0
    )


def test_finish_time_prefers_the_group_where_the_family_is_expected_to_end_first() -> None:
    """The earlier run put a on a slow node and b on a fast one: a's runtime on the fast group is
    scaled from the slow one by the CPU scores (core/runtimes.py), b's the other way."""
    nodes = [node("slow", 1.0), node("fast", 2.0), node("slow2", 1.0), node("fast2", 2.0)]
    tasks = [task("a", 100), task("b", 100), task("c", 50, "a", "b")]
    sim = Simulation(Cluster("test", tuple(nodes)), Workload("w", tuple(tasks)), "finish-time", "user", PLAIN)
    slow, fast = (sim.nodes[0].group, sim.nodes[1].group)
    assert sim.expected_runtime_s(tasks[0]) == pytest.approx({slow: 100.0, fast: 50.0})
    assert sim.expected_runtime_s(tasks[1]) == pytest.approx({slow: 100.0, fast: 50.0})
    result = run(nodes, tasks, "finish-time-live")
    # a and b on the fast nodes (each keeps 1 of 2 cores busy: no sharing, 50 s), then c on a fast
    # node (25 s). Without live load (plain finish-time, what pods get by default) the same here.
    assert {s.task: s.node for s in result.timeline} == {"a": "fast", "b": "fast2", "c": "fast"}
    assert result.makespan_s == pytest.approx(75.0)
    assert run(nodes, tasks, "finish-time").makespan_s == pytest.approx(75.0)


def test_finish_time_with_live_load_weighs_cpu_sharing_as_listed_at_most_a_ttl_ago() -> None:
    """x1 and x2 each keep 6 cores busy on a 1-core request, y keeps 4; all ready at 0 s. x1 and x2
    go to the two fast nodes (100 s there, 200 s on a slow one). For y, a fast node would then share
    6 + 4 of its 4 cores: 50 s x 2.5 = 125 s, against 100 s alone on a slow node, so with a fresh
    view it goes to a slow one. With the view listed at most 10 s ago (the default, as pods get it),
    y sees the view x1 saw, idle fast nodes, and goes to a fast one."""
    nodes = [
        node(n, 2.0 if n.startswith("fast") else 1.0, cores=4) for n in ("fast", "fast2", "slow", "slow2")
    ]
    tasks = [
        task("x1", 200, request_cores=1.0, cpu_cores_used=6.0),
        task("x2", 200, request_cores=1.0, cpu_cores_used=6.0),
        task("y", 100, request_cores=1.0, cpu_cores_used=4.0),
    ]
    sharing = replace(PLAIN, cpu_sharing=True, live_load_ttl_s=0.0)
    fresh = run(nodes, tasks, "finish-time-live", sharing)
    assert {s.task: s.node for s in fresh.timeline} == {"x1": "fast", "x2": "fast2", "y": "slow"}
    # Each x alone on 4 cores keeping 6 busy: 100 s x 1.5; y alone on a slow node: 100 s.
    assert {s.task: s.end_s for s in fresh.timeline} == pytest.approx({"x1": 150.0, "x2": 150.0, "y": 100.0})
    stale = run(nodes, tasks, "finish-time-live", replace(sharing, live_load_ttl_s=10.0))
    assert {s.task: s.node for s in stale.timeline} == {"x1": "fast", "x2": "fast2", "y": "fast"}
    assert {s.task: s.end_s for s in stale.timeline}["y"] == pytest.approx(50.0 * 10.0 / 4.0)
    # Without live load the sharing is not known: y on a fast node as well.
    assert {s.task: s.node for s in run(nodes, tasks, "finish-time", sharing).timeline}["y"] == "fast"


def test_start_up_time_and_waiting_for_room() -> None:
    params = SimParams(pod_startup_s=5.0, interference_per_task=0.0, cpu_sharing=False, shuffle_nodes=False)
    result = run([node("only")], [task("a", 100), task("b", 100)], "fair", params)
    # One 2-core node: b waits for a (105 s), then starts up and runs: 210 s.
    assert result.makespan_s == pytest.approx(210.0)
    assert result.mean_wait_s == pytest.approx(105.0 / 2)


def test_the_queue_orders_by_priority_then_arrival() -> None:
    tasks = [task("a", 10), task("b", 10, priority=5), task("c", 10)]
    result = run([node("only")], tasks, "fair")
    assert {s.task: s.start_s for s in result.timeline} == {"b": 0.0, "a": 10.0, "c": 20.0}


def test_oom_kill_then_retry_with_double_the_memory() -> None:
    params = SimParams(pod_startup_s=0.0, interference_per_task=0.0, cpu_sharing=False, time_to_failure=0.5)
    result = run([node("big", memory_gib=8)], [task("a", 100, peak_gib=3, request_gib=2)], "fair", params)
    # 2 GiB is killed at half its runtime (50 s); the retry doubles to 4 GiB and runs 100 s.
    assert result.oom_kills == 1 and result.attempts == 2 and result.succeeded == 1
    assert result.makespan_s == pytest.approx(150.0)
    assert result.waste_gb_h == pytest.approx((2 * GIB * 50 + 1 * GIB * 100) / GB_H)
    assert [s.oom_killed for s in result.timeline] == [True, False]


def test_a_task_killed_at_the_largest_node_fails_and_its_children_never_run() -> None:
    result = run(
        [node("n", memory_gib=4)], [task("a", 10, peak_gib=5, request_gib=4), task("b", 10, "a")], "fair"
    )
    assert (result.failed, result.never_ran, result.oom_kills) == (1, 1, 1)


def test_a_task_needing_a_capability_waits_for_a_node_that_offers_it() -> None:
    nodes = [node("cpu"), node("gpu", capabilities=frozenset({"gpu"}), available_at_s=300.0)]
    tasks = [task("g", 100, required_capabilities=frozenset({"gpu"})), task("h", 100)]
    for placement in PLACEMENTS:
        result = run(nodes, tasks, placement)
        # h is not blocked behind g; g starts when the GPU node joins at 300 s.
        assert {s.task: (s.node, s.start_s) for s in result.timeline} == {
            "g": ("gpu", 300.0),
            "h": ("cpu", 0.0),
        }
        assert result.makespan_s == pytest.approx(400.0)
        assert result.mean_wait_s == pytest.approx(150.0)


def test_interference_and_cpu_sharing_slow_both_tasks_while_they_share_the_node() -> None:
    params = SimParams(pod_startup_s=0.0, interference_per_task=0.05, cpu_sharing=True, shuffle_nodes=False)
    tasks = [
        task("a", 100, request_cores=1, cpu_cores_used=3),
        task("b", 20, request_cores=1, cpu_cores_used=3),
    ]
    result = run([node("n", cores=4)], tasks, "fair", params)
    # Together: one similar task beside each (+5 %) and 6 busy cores on 4 (x1.5), so 1.575x slower.
    # b ends at 20 x 1.575 = 31.5 s; a has done 20 s of its work by then, and runs the last 80 alone.
    ends = {s.task: s.end_s for s in result.timeline}
    assert ends == pytest.approx({"a": 111.5, "b": 31.5})
    # Reserved: 1 core for 111.5 s and for 31.5 s; busy: 3 cores of work for 100 s and 20 s; on 4 cores.
    group = next(iter(result.utilisation_by_group))
    assert result.utilisation_by_group[group] == pytest.approx((111.5 + 31.5) / (4 * 111.5))
    assert result.busy_by_group[group] == pytest.approx(360 / (4 * 111.5))


def test_an_attempt_started_beside_a_busy_node_speeds_up_when_the_others_end() -> None:
    params = SimParams(pod_startup_s=2.0, interference_per_task=0.0, cpu_sharing=True, shuffle_nodes=False)
    tasks = [task(f"s{i}", 10, request_cores=1, cpu_cores_used=4) for i in range(2)]
    tasks.append(task("long", 1000, request_cores=1, cpu_cores_used=4))
    result = run([node("n", cores=4, memory_gib=8)], tasks, "fair", params)
    # 12 busy cores on 4 while all three run (x3): the short ones end at 2 + 10 x 3 = 32 s, when the
    # long one has done 10 s of its work; its last 990 s run alone (2 s of start-up are not slowed).
    ends = {s.task: s.end_s for s in result.timeline}
    assert ends == pytest.approx({"s0": 32.0, "s1": 32.0, "long": 32.0 + 990.0})


def test_tarema_sends_heavy_families_to_the_strong_group_and_light_ones_to_idle_or_weak_nodes() -> None:
    heavy = [
        task(f"h{i}", 60, family="heavy", request_cores=1, cpu_cores_used=4, peak_gib=8, request_gib=10)
        for i in range(6)
    ]
    light = [
        task(f"l{i}", 60, family="light", request_cores=1, cpu_cores_used=0.5, peak_gib=1, request_gib=2)
        for i in range(6)
    ]
    workload = Workload("w", tuple(heavy + light))
    placed = {}
    for policy in ("tarema", "tarema-idle"):
        sim = Simulation(preset("5,5,5"), workload, policy, "user", PLAIN, record_timeline=True)
        placed[policy] = {s.task: s.node.split("-")[0] for s in sim.run().timeline}
        assert {placed[policy][t.id] for t in heavy} == {"c2"}
    assert [placed["tarema"][t.id] for t in light] == ["n1"] * 6
    # Told which nodes are idle, light tasks still leave C2 to the heavy ones but use idle N2 nodes
    # while there are any (no one to share with there), then their own group, N1.
    assert [placed["tarema-idle"][t.id] for t in light] == ["n2"] * 5 + ["n1"]


def test_adaptive_sizing_wastes_less_than_the_users_requests() -> None:
    workload = concurrent_runs(pegasus_workload("epigenomics", 120, SimParams(), seed=1), 2)
    report, _ = compare(preset("5,4,4,2"), workload, ["tarema"], ["user", "adaptive"], SimParams(), seed=1)
    user, adaptive = report["results"]["tarema+user"], report["results"]["tarema+adaptive"]
    assert adaptive["waste_gb_h"] < 0.5 * user["waste_gb_h"]
    assert user["failed"] == adaptive["failed"] == 0


def test_online_history_learns_while_prior_run_history_starts_warm() -> None:
    chain = [task("t0", 60, family="f", peak_gib=1, request_gib=4)]
    chain += [task(f"t{i}", 60, f"t{i - 1}", family="f", peak_gib=1, request_gib=4) for i in range(1, 6)]
    cluster, workload = Cluster("test", (node("n", memory_gib=8),)), Workload("w", tuple(chain))
    allocated = {}
    for history in ("online", "prior-run"):
        params = SimParams(pod_startup_s=0.0, interference_per_task=0.0, cpu_sharing=False, history=history)
        sim = Simulation(cluster, workload, "tarema", "adaptive", params)
        sim.run()
        allocated[history] = [a.memory_bytes for a in sim.attempts]
    # Online: the first task gets the user's 4 GiB (nothing known yet), and so does the second (the
    # P99 bound of one peak is above the request); from the third on, two identical peaks are far
    # steadier than the prior spread, their own spread bounds them (1.12 GiB), and the first rule,
    # P95 + 15 %, gives 1.15 GiB.
    online = allocated["online"]
    assert online[:2] == [4 * GIB] * 2
    assert all(a == pytest.approx(1.15 * GIB, rel=1e-6) for a in online[2:])
    # Prior run: every task starts from the earlier run's six peaks.
    assert all(a == pytest.approx(1.15 * GIB, rel=1e-6) for a in allocated["prior-run"])


def test_presets_group_like_table_iv() -> None:
    for name, sizes in (("5,5,5", [5, 5, 5]), ("5;4;4;2", [9, 4, 2])):
        report, _ = compare(preset(name), pegasus_workload("cybershake", 10, SimParams()), ["fair"])
        assert [len(m) for m in report["cluster"]["groups"].values()] == sizes


def test_workloads_must_be_dags_with_known_parents() -> None:
    with pytest.raises(SimulationInputError, match="not a DAG"):
        Workload("w", (task("a", 1, "b"), task("b", 1, "a")))
    with pytest.raises(SimulationInputError, match="unknown parents"):
        Workload("w", (task("a", 1, "zzz"),))
    with pytest.raises(SimulationInputError, match="expected wfformat:FILE"):
        load_workload("synthetic:nosuch:10", SimParams())
    with pytest.raises(SimulationInputError, match=r"^/no/such/dir: not a folder \(lotaru:DIR:WORKFLOW"):
        load_workload("lotaru:/no/such/dir:bacass", SimParams())
    too_many = ("synthetic:montage:99999999999", "shared:125001:1Gi")  # before anything is generated
    for spec, says in (("synthetic:montage:0", "TASKS must be"), ("shared:-1:1Gi", "RUNS must be"),
                       (too_many[0], "TASKS must be .* to 1000000"), (too_many[1], r"RUNS must be .* to 125000 \(8 tasks each\)")):  # fmt: skip
        with pytest.raises(SimulationInputError, match=says):
            load_workload(spec, SimParams())


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_synthetic_workloads_are_seeded_dags_of_about_the_asked_size(kind: str) -> None:
    a = pegasus_workload(kind, 400, SimParams(), seed=3)
    assert 300 <= len(a.tasks) <= 400 and len(a.order) == len(a.tasks)
    assert a == pegasus_workload(kind, 400, SimParams(), seed=3)
    assert a != pegasus_workload(kind, 400, SimParams(), seed=4)
    assert any(t.parents for t in a.tasks)


def test_lotaru_tasks_run_for_their_measured_time_on_the_mapped_machine() -> None:
    workload = lotaru_workload(str(EXAMPLES / "lotaru"), "bacass", SimParams())
    assert len(workload.tasks) == 50
    by_id = {t.id: t for t in workload.tasks}
    machines = set()
    for cluster in ("5,5,5", "lotaru"):
        sim = Simulation(preset(cluster), workload, "round-robin", "user", PLAIN, record_timeline=True)
        spans = sim.run().timeline
        assert len(spans) == 50
        for span in spans:
            machine = span.node.split("-")[0]  # the presets name nodes after the machine they map to
            machines.add(machine)
            measured = by_id[span.task].runtime_by_machine
            assert measured is not None and span.end_s - span.start_s == pytest.approx(measured[machine])
    assert machines == {"asok01", "asok02", "n1", "n2", "c2", "wallyRedCpu"}
    groups = sorted(preset("lotaru").grouping.groups, key=lambda g: g.id)  # 1 = weakest
    assert {m.split("-")[0] for m in groups[0].members} <= {"asok01", "asok02"}
    assert groups[-1].members == ("c2-1", "c2-2")
    with pytest.raises(TraceFormatError):
        load_workload("wfformat:" + str(EXAMPLES / "lotaru" / "n1" / "bacass.csv"), SimParams())


def _simulate_json(*extra: str) -> str:
    argv = [sys.executable, "-m", "airflow_adaptive.cli", "simulate", "--cluster", "5,4,4,2",
            "--workload", "synthetic:montage:150", "--runs", "2", "--sizing", "user,adaptive", "--json", *extra]  # fmt: skip
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=300).stdout


def test_cli_json_is_deterministic_and_complete() -> None:
    first, second = _simulate_json("--seed", "7"), _simulate_json("--seed", "7")
    assert first == second  # separate processes, so string hashing differs too
    report = json.loads(first)
    assert set(report) >= {"cluster", "workload", "results"}
    assert len(report["results"]) == 2 * len(PLACEMENTS)
    for metrics in report["results"].values():
        assert set(metrics) >= {
            "makespan_s",
            "mean_wait_s",
            "oom_kills",
            "waste_gb_h",
            "utilisation_by_group",
        }
        assert metrics["makespan_s"] > 0 and set(metrics["utilisation_by_group"]) == {"1", "2", "3"}
    assert json.loads(_simulate_json("--seed", "8"))["results"] != report["results"]


def test_a_synthetic_workload_of_another_size_than_asked_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_adaptive.simulate_cli import _workload

    made = len(_workload("synthetic:montage:100", SimParams(), 0, 1).tasks)
    assert made != 100 and f"note: synthetic:montage:100 makes {made} tasks" in capsys.readouterr().err
    assert (
        len(_workload("synthetic:cybershake:60", SimParams(), 0, 1).tasks) == 60
        and not capsys.readouterr().err
    )


def test_cli_reports_bad_input_and_writes_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_adaptive.cli import main

    assert (
        main(["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:60", "--placement", "nope"])
        == 2
    )
    assert "unknown placement nope; known: " in capsys.readouterr().err
    argv = ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:60", "--placement", "defualt"]
    assert main(argv) == 2
    assert "unknown placement defualt (did you mean 'default'?); known: " in capsys.readouterr().err
    lotaru = Path(__file__).resolve().parents[2] / "docs" / "examples" / "lotaru"
    assert main(["simulate", "--cluster", "lotaru", "--workload", f"lotaru:{lotaru}:nope"]) == 2
    assert f"{lotaru}: no Lotaru workflow 'nope' (known: " in capsys.readouterr().err
    assert (
        main(["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:60", "--ram-disk", "1m"]) == 2
    )
    assert "--ram-disk 1m is 0.001 bytes" in capsys.readouterr().err
    assert (
        main(["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:60", "--ram-disk", "8Gi"]) == 2
    )
    assert "--ram-disk stages shared inputs for a +locality placement" in capsys.readouterr().err
    assert (
        main(["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:60", "--runs", "99999999"]) == 2
    )
    assert (
        "--runs 99999999 of synthetic:ligo:60's 44 tasks: at most 1000000 tasks in one simulation"
        in capsys.readouterr().err
    )
    args = ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:60", "--placement", "tarema,sjfn"]
    assert main([*args, "--plot", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "gantt-sjfn.png",
        "gantt-tarema.png",
        "makespan.png",
    ]
    assert "tarema" in capsys.readouterr().out
    # A --plot folder that cannot be written is one line, before any work (replay's too).
    a_file = tmp_path / "makespan.png"
    trace = Path(__file__).resolve().parents[2] / "docs" / "examples" / "nextflow" / "chipseq_trace.txt"
    for command in ([*args, "--plot", str(a_file)], ["replay", str(trace), "--plot", str(a_file)]):
        assert main(command) == 2
        assert capsys.readouterr().err.strip().endswith(f"--plot {a_file}: is a file, not a folder")
    assert main([*args, "--plot", str(a_file / "below")]) == 2
    assert f"--plot {a_file / 'below'}: cannot create it (" in capsys.readouterr().err


def test_size_cpu_packs_by_the_cores_tasks_use() -> None:
    """Four tasks of one family, each using 1 core on a 2-core request, on one 2-core node: by the
    users' requests one runs at a time (400 s); with size_cpu, once the family has history (prior
    run), P90 of 1 core is requested and two run side by side (200 s)."""
    nodes = [node("n", 1.0, cores=2, memory_gib=16)]
    tasks = [task(f"t{i}", 100, family="f", request_gib=1.0, peak_gib=0.5) for i in range(4)]
    warm = replace(PLAIN, history="prior-run")
    assert run(nodes, tasks, "fill-nodes", warm, "adaptive").makespan_s == pytest.approx(400.0)
    sized = run(nodes, tasks, "fill-nodes", replace(warm, size_cpu=True), "adaptive")
    assert sized.makespan_s == pytest.approx(200.0) and sized.succeeded == 4
    assert run(nodes, tasks, "fill-nodes", replace(warm, size_cpu=True), "user").makespan_s == pytest.approx(
        400.0
    )


def test_the_default_placement_is_what_pods_get_and_runs_by_that_name() -> None:
    """``simulate --placement default`` runs the provider's default placement, whichever it is, and
    keeps the name it was asked by; a misspelt name lists it among the known ones."""
    assert load_settings().placement_policy == DEFAULT_PLACEMENT  # what pods get when nothing is set
    workload = concurrent_runs(pegasus_workload("montage", 120, SimParams(), seed=1), 2)
    by_name = {
        p: Simulation(preset("5,4,4,2"), workload, p, "user").run() for p in ("default", DEFAULT_PLACEMENT)
    }
    assert by_name["default"].placement == "default"
    assert not Simulation(preset("5,4,4,2"), workload, "default", "user").storage.locality
    assert Simulation(preset("5,4,4,2"), workload, "default+locality", "user").storage.locality
    assert by_name["default"].makespan_s == by_name[DEFAULT_PLACEMENT].makespan_s
    with pytest.raises(InvalidSettingError, match="known: default, round-robin"):
        Simulation(preset("5,4,4,2"), workload, "defalt", "user")
