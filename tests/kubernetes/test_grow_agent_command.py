"""The ``grow-agent`` command: one cycle, its setting read without the sizing code, the option's
checks, the shipped manifest, and an API that does not answer."""

from __future__ import annotations

import logging

import pytest
from kubernetes import config as kube_config

from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.core.units import MIB
from airflow_adaptive.kubernetes.grow_agent import GrowthAgent
from tests.conftest import shipped_config_map, shipped_manifest
from tests.fake_kubernetes import FakeKubernetesApi
from tests.kubernetes.growing import start_pod


def test_the_grow_agent_command_runs_one_cycle_and_says_a_missing_node_in_one_line(
    api: FakeKubernetesApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_adaptive.cli import main

    monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__IN_CLUSTER", "False")
    monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE", str(api.kubeconfig))
    start_pod(api, "cli", headroom=16 * MIB)
    for _ in range(20):  # 88 MiB of 100: within the headroom
        api.step("cli")
    assert main(["grow-agent", "--once", "--node", "node-a", "--cgroup-root", str(api.cgroup_root)]) == 0
    assert "asked 1 resizes" in capsys.readouterr().out
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["grow-agent", "--once", "--cgroup-root", str(api.cgroup_root)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("--node (or NODE_NAME, from the downward API) names this node")
    )


def test_the_grow_agent_command_reads_its_setting_without_loading_the_sizing_code(
    api: FakeKubernetesApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node agent on every node: the sizing code (config.py's settings import it, and it loads
    scikit-learn) would cost each about 130 MB for nothing. Its one setting is still read: a bad
    value is the option's one-line error."""
    import os
    import subprocess
    import sys

    start_pod(api, "light", headroom=16 * MIB)
    program = (
        "import sys; from airflow_adaptive.cli import main; "
        f"code = main(['grow-agent', '--once', '--node', 'node-a', '--cgroup-root', {str(api.cgroup_root)!r}]); "
        "print('loaded:', sorted(m for m in sys.modules if m in ('sklearn', 'airflow_adaptive.config') "
        "or m.startswith('airflow_adaptive.core.sizing')), 'exit', code)"
    )
    env = os.environ | {
        "AIRFLOW__KUBERNETES_EXECUTOR__IN_CLUSTER": "False",
        "AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE": str(api.kubeconfig),
    }
    for latency, says in (("2", "asked 0 resizes"), ("3600", "grow_resize_latency_seconds = '3600' is not")):
        env["AIRFLOW__ADAPTIVE__GROW_RESIZE_LATENCY_SECONDS"] = latency
        done = subprocess.run(
            [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120
        )
        assert says in done.stdout + done.stderr, done.stdout + done.stderr
        assert done.stdout.splitlines()[-1].startswith("loaded: [] exit"), done.stdout + done.stderr


def test_no_lowering_on_the_command_line_keeps_every_limit_it_grew() -> None:
    import argparse

    from airflow_adaptive.exceptions import AdaptiveError
    from airflow_adaptive.grow_agent_cli import add_grow_agent_command, growth_rule

    parser = argparse.ArgumentParser()
    add_grow_agent_command(parser.add_subparsers())
    lowering = growth_rule(parser.parse_args(["grow-agent", "--interval", "1"]), 5.0)
    never = growth_rule(parser.parse_args(["grow-agent", "--no-lowering"]), 5.0)
    assert lowering.kept_headrooms == 1.25 and lowering.sample_s == 1.0
    assert never.kept_headrooms == 0 and never.latency_s == 5.0
    with pytest.raises(AdaptiveError, match="grow-agent: resize latency must be in"):
        growth_rule(parser.parse_args(["grow-agent"]), -1.0)


def test_the_shipped_grow_agent_manifest_is_valid_runs_as_no_root_and_asks_only_what_it_uses() -> None:
    docs = shipped_manifest("grow-agent.yaml")
    pod = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["command"][:2] == ["airflow-adaptive", "grow-agent"]
    assert shipped_config_map(pod) == "airflow-airflow-config"  # the chart's "<release>-airflow-config"
    assert container["volumeMounts"][0]["readOnly"] is True  # it reads cgroups; the kubelet writes limits
    rules = {
        (r["resources"][0], *sorted(r["verbs"]))
        for r in next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    }
    assert rules == {("pods", "list", "patch"), ("pods/resize", "patch"), ("nodes", "get")}


def test_an_api_that_does_not_answer_is_said_once_and_the_agent_keeps_going(
    api: FakeKubernetesApi,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A DaemonSet's agent that exits is restarted, to fail again: it logs a failing API once, keeps
    trying, and idles once growth is off; ``--once`` says the failure in one line."""
    import threading

    from airflow_adaptive.cli import main

    closed = api.refused_kubeconfig()
    api.cgroup_root.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__IN_CLUSTER", "False")
    monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE", str(closed))
    assert main(["grow-agent", "--once", "--node", "node-a", "--cgroup-root", str(api.cgroup_root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grow-agent: the look failed (" in err[0] and "Connection refused" in err[0], err
    agent = GrowthAgent(kube_config.new_client_from_config(str(closed)), "node-a", api.cgroup_root,
                        GrowthRule(sample_s=0.01))  # fmt: skip
    runner = threading.Thread(target=agent.run)
    with caplog.at_level(logging.WARNING):
        runner.start()
        for _ in range(200):  # up to 10 s for the first failed cycle
            if any("cycle failed" in r.message for r in caplog.records):
                break
            runner.join(0.05)
        runner.join(0.5)  # more cycles fail the same way
        agent.off_reason = "the cluster refuses pods/resize"
        runner.join(0.3)
        assert runner.is_alive()  # off, it idles rather than exit
        agent.stop.set()
        runner.join(5)
    assert not runner.is_alive()
    failed = [r.message for r in caplog.records if "cycle failed" in r.message]
    assert len(failed) == 1 and "trying again" in failed[0], failed
