"""``airflow-adaptive grow-agent``: the node agent that grows pods' memory in place (see
kubernetes/grow_agent.py and deploy/grow-agent.yaml)."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from airflow_adaptive.cli_args import seconds
from airflow_adaptive.exceptions import AdaptiveError, InvalidSettingError

if TYPE_CHECKING:
    from airflow_adaptive.core.growth import GrowthRule


def cmd_grow_agent(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_adaptive.kubernetes.grow_agent import GrowthAgent

    node = args.node or os.environ.get("NODE_NAME", "")
    if not node:
        raise AdaptiveError("grow-agent: --node (or NODE_NAME, from the downward API) names this node")
    if not Path(args.cgroup_root).is_dir():
        raise AdaptiveError(f"grow-agent: {args.cgroup_root} is no folder (mount the host's /sys/fs/cgroup)")
    latency_s = args.resize_latency
    if latency_s is None:  # one option, read without the sizing code config.py would load
        from airflow_adaptive.config_read import growth_latency_s

        latency_s = growth_latency_s()
    rule = growth_rule(args, latency_s)  # a bad setting is said before the cluster is asked
    agent = GrowthAgent(_api_client(), node, Path(args.cgroup_root), rule)
    if args.once:
        from airflow_adaptive.failopen import one_round

        print(f"asked {one_round('grow-agent: the look', agent.cycle)} resizes", file=out)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: agent.stop.set())
    print(f"growing labelled pods on node {node!r} every {args.interval:g} s", file=out, flush=True)
    agent.run()  # off, it idles until stopped: the reason was logged when growth turned off
    return 0


def growth_rule(args: argparse.Namespace, latency_s: float) -> GrowthRule:
    """The agent's rule from its command line: the latency, the sampling interval, and with
    ``--no-lowering`` no limit lowered (``kept_headrooms`` 0)."""
    from airflow_adaptive.core.growth import GrowthRule

    try:
        never_lower = {"kept_headrooms": 0.0} if args.no_lowering else {}
        return GrowthRule(latency_s=latency_s, sample_s=args.interval, **never_lower)
    except InvalidSettingError as err:
        raise AdaptiveError(f"grow-agent: {err}") from None


def _api_client() -> Any:
    from airflow_adaptive.observe_cli import _api_client as client

    return client()


def add_grow_agent_command(sub: Any) -> None:
    what = "grow running pods' memory in place before an OOM kill (a DaemonSet, see deploy/)"
    grow = sub.add_parser(
        "grow-agent",
        help=what,
        description=f"The node agent: {what}. It reads the cgroups of this node's pods labelled for "
        "growth and PATCHes pods/resize by the plan each pod carries (docs/growth.md). The plans were "
        "learnt for [adaptive] grow_resize_latency_seconds, the agent's default: a --resize-latency that "
        "differs from it does not match them.",
    )
    grow.add_argument("--node", help="this node's name (default: $NODE_NAME)")
    grow.add_argument(
        "--cgroup-root", default="/sys/fs/cgroup", help="the host's cgroup folder (default /sys/fs/cgroup)"
    )
    grow.add_argument("--interval", type=seconds, default=2.0, help="seconds between samples (default 2)")
    grow.add_argument(
        "--resize-latency",
        type=float,
        help="seconds a resize takes to reach the cgroup on this cluster "
        "(default: [adaptive] grow_resize_latency_seconds, 5; see replay --time-series)",
    )
    grow.add_argument(
        "--no-lowering",
        action="store_true",
        help="never lower a limit once a task stops rising (Kubernetes 1.34+ applies a decrease; "
        "1.33 refuses it, and the agent then stops asking by itself)",
    )
    grow.add_argument("--once", action="store_true", help="one look at every pod, then exit")
    grow.set_defaults(func=cmd_grow_agent)
