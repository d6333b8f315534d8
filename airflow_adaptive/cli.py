"""``airflow-adaptive``: import history, inspect it, ask for decisions, replay traces, profile nodes, simulate."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from airflow_adaptive.cli_args import (
    OneLineParser,
    parse_command_line,
    priority_weight,
    require_paths,
    task_family,
    try_number,
    utf8_text,
)
from airflow_adaptive.core.lff import PriorityChoice
from airflow_adaptive.core.normalise import escape_surrogates
from airflow_adaptive.exceptions import (
    AdaptiveError,
    ClusterUnavailableError,
    InvalidQuantityError,
)
from airflow_adaptive.failopen import airflow_start_failure, first_line, quiet_retries
from airflow_adaptive.grow_agent_cli import add_grow_agent_command
from airflow_adaptive.history_cli import add_history_commands, open_cli_store, print_json, unknown_family
from airflow_adaptive.nodes_cli import add_node_commands
from airflow_adaptive.observe_cli import add_observe_command
from airflow_adaptive.replay_cli import add_replay_command
from airflow_adaptive.simulate_cli import add_simulate_command
from airflow_adaptive.stopping import TERMINATED_EXIT, Terminated, sigterm_stops

if TYPE_CHECKING:
    from airflow_adaptive.advisor import Advisor
    from airflow_adaptive.core.model import Decision, MemoryRequest


def cmd_decide(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_adaptive.advisor import Advisor
    from airflow_adaptive.config import check_sizing_names, get_settings
    from airflow_adaptive.core.model import MemoryRequest
    from airflow_adaptive.kubernetes.quantity import as_pod_gets_it, parse_memory_amount
    from airflow_adaptive.traces.common import MAX_NUMBER, NOT_A_NUMBER

    if args.input_size_bytes is not None and not 0 <= args.input_size_bytes <= MAX_NUMBER:
        raise InvalidQuantityError(f"--input-size-bytes {args.input_size_bytes}: {NOT_A_NUMBER}")
    user = MemoryRequest.asked(
        parse_memory_amount(args.request, what="--request") if args.request is not None else None,
        parse_memory_amount(args.limit, what="--limit") if args.limit is not None else None,
    )
    if user.request_bytes and user.limit_bytes and user.limit_bytes < user.request_bytes:
        raise InvalidQuantityError(
            f"--limit {args.limit} is below --request {args.request}: Kubernetes refuses such a pod"
        )
    settings = get_settings()
    check_sizing_names(settings)  # here a typo is an error; a pod's decision fails open instead
    advisor = Advisor(settings, open_cli_store)
    _require_known_family(args.task_family, args.new_family)
    decision = _decision(advisor, args, user)
    placement = advisor.placement.place(
        args.task_family, frozenset(args.require_capability), decision.memory_request_bytes
    )
    priority = advisor.placement.priority(args.task_family, args.priority_weight)
    modes = _modes(settings, args.task_family)
    growth = _growth_line(advisor, args.task_family, decision) if settings.grow_in_place else None
    payload = {
        "task_family": args.task_family,
        "memory_request_bytes": as_pod_gets_it(decision.memory_request_bytes),  # as the text says it
        "memory_limit_bytes": as_pod_gets_it(decision.memory_limit_bytes),
        "cpu_request_millicores": decision.cpu_request_millicores,  # with size_cpu (None: the user's)
        "strategy": decision.strategy,
        "explanation": decision.explanation,
        "observations": decision.observations,
        "adaptive": decision.adaptive,
        "details": decision.details,
        "task_labels": dict(placement.labels or {}),
        "preferred_groups": list(placement.preferred_groups),
        "required_capabilities": sorted(args.require_capability),
        "placement": placement.explain(),
        "priority": priority_json(priority),
        "mode": modes,
        "growth": growth,  # None: [adaptive] grow_in_place is off
    }
    if args.json:
        print_json(payload, out)
    else:
        print(f"{decision.strategy}: {decision.explanation}\nplacement: {placement.explain()}", file=out)
        print(
            f"priority: {priority.explain() if priority else 'unknown (history store unavailable)'}", file=out
        )
        print(mode_line(modes), file=out)
        if growth:
            print(f"growth in place (enforced pods): {growth}", file=out)
    return 0


def _growth_line(advisor: Advisor, task_family: str, decision: Decision) -> str:
    """What ``grow_in_place`` does to an enforced pod of this decision, as its annotation says it."""
    from airflow_adaptive.attempt import growth_plan_of, pod_mode
    from airflow_adaptive.kubernetes.resize import plan_note

    modes = (pod_mode(advisor.settings, task_family, dag=None, task=None, operator=o) for o in (False, True))
    if not any(choice.mode.enforces for choice in modes):  # a DAG's adaptive:enforce tag still could
        return "none: the family's pods are not enforced (mode, above)"
    if not decision.adaptive:
        return "none: the pod keeps the user's resources"
    plan = growth_plan_of(advisor, task_family, decision)
    if plan is not None:
        return plan_note(plan)
    why = (
        "the retry of an OOM-killed try" if "oom_retry" in decision.details else "no memory profiles to read"
    )
    return f"at the decision, grown in place only as a rescue ({why})"


def mode_line(modes: dict[str, str]) -> str:
    """The modes a family's pods get, and what a DAG's tag can change (a family_modes rule outranks it)."""
    from airflow_adaptive.core.modes import FAMILY_RULE_SOURCE

    tags = (
        "family_modes outranks a DAG's adaptive:<mode> tag"
        if modes["set_by"] == FAMILY_RULE_SOURCE
        else "a DAG tag adaptive:<mode> sets a DAG's"
    )
    return (
        f"mode: {modes['pods']} for plain KubernetesPodOperator and executor pods, {modes['operator_pods']} "
        f"for the operator's; {tags} (observe and recommend keep the user's resources: the decision above "
        "is the recommendation)"
    )


def _modes(settings: Any, task_family: str) -> dict[str, str]:
    """The family's mode where no DAG tag sets one, for each pod kind."""
    from airflow_adaptive.attempt import pod_mode

    pods = pod_mode(settings, task_family, dag=None, task=None, operator=False)
    return {
        "pods": pods.note(),
        "operator_pods": pod_mode(settings, task_family, dag=None, task=None, operator=True).note(),
        "set_by": pods.source,  # a family_modes rule outranks a DAG's tag; nothing else does
    }


def _decision(advisor: Advisor, args: argparse.Namespace, user: MemoryRequest) -> Decision:
    """The decision for the next try; with ``--previous-oom``, the retry after that try was killed."""
    from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage

    number = 2 if args.try_number is None else args.try_number
    if args.previous_oom and number < 2:
        raise AdaptiveError("decide: --previous-oom is for a retry: --try-number 2 or more (the default)")
    tool = {"image": args.image, "program": args.program}
    decision = advisor.memory.decide(args.task_family, user, input_size_bytes=args.input_size_bytes, **tool)
    if not args.previous_oom:
        return decision
    killed_at = decision.memory_limit_bytes or decision.memory_request_bytes
    previous = Observation(
        key=TaskKey("cli", "cli", "cli", -1, number - 1),
        task_family=args.task_family,
        usage=Usage(peak_kind=PeakKind.CENSORED),
        exit_reason=ExitReason.OOM_KILLED,
        memory_request_bytes=killed_at,
        memory_limit_bytes=killed_at,
    )
    return advisor.memory.decide(
        args.task_family, user, input_size_bytes=args.input_size_bytes, previous_attempt=previous, **tool
    )


def _require_known_family(task_family: str, new_family: bool) -> None:
    """A family the store has no attempt of is more often a typo than a new family: an error naming
    the closest stored names, unless ``--new-family`` asks for a new family's decision on purpose.
    A store that cannot be read is an error too, as for every other command (a pod keeps the
    user's request then; the CLI says why it has no decision to show)."""
    from airflow_adaptive.core.units import counted
    from airflow_adaptive.exceptions import HistoryUnavailableError

    try:  # the store itself, not the advisor, which would log the fail-open warning as a pod does
        store = open_cli_store()
        known = store.family(task_family)
        if known is not None and new_family:  # a flag that changes nothing is said, not ignored
            attempts = counted(known.rollup.attempts, "attempt")
            print(f"--new-family ignored: {task_family!r} has {attempts} in the store", file=sys.stderr)
        if known is not None or new_family:
            return
        error = unknown_family("decide", task_family, store)
    except HistoryUnavailableError as err:
        raise HistoryUnavailableError(f"{err}; a pod keeps the user's request meanwhile") from None
    raise AdaptiveError(f"{error} (--new-family: the decision a new family gets)")


def priority_json(choice: PriorityChoice | None) -> dict[str, object] | None:
    if choice is None:
        return None
    return {
        "weight": choice.weight,
        "priority_class": choice.class_name,
        "successes": choice.progress.successes,
        "failures": choice.progress.failures,
        "families": choice.families,
        "median_successes": choice.median_successes,
        "share_with_fewer": round(choice.share_ahead, 4),
        "explanation": choice.explain(),
    }


def cmd_priority_classes(args: argparse.Namespace, out: TextIO) -> int:
    """Print the PriorityClass manifests, or create the missing ones in the current cluster."""
    from airflow_adaptive.kubernetes.priority_classes import create_missing, manifests

    if args.kubeconfig and not args.create:
        raise AdaptiveError("priority-classes: --kubeconfig is for --create (printing needs no cluster)")
    if not args.create:
        import yaml

        print(yaml.safe_dump_all(manifests(), sort_keys=False), file=out, end="")
        return 0
    import yaml
    from kubernetes import config
    from kubernetes.client import ApiClient

    from airflow_adaptive.kubernetes.kubeconfig import names_a_file, unusable

    if args.kubeconfig and not names_a_file(args.kubeconfig):  # ~ and lists, as the client reads them
        raise ClusterUnavailableError(
            f"cannot create PriorityClasses: --kubeconfig {args.kubeconfig}: not a file"
        )
    # load_config's own choice, without the line it prints when it falls back to in-cluster
    from_file = args.kubeconfig or os.path.exists(os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION))
    try:
        if from_file:
            config.load_kube_config(config_file=args.kubeconfig)
        else:
            config.load_incluster_config()
    except (
        config.ConfigException,
        TypeError,
        AttributeError,
        yaml.YAMLError,
        UnicodeDecodeError,
        OSError,
    ) as err:
        # no kubeconfig (the client's TypeError: a file that is no mapping; YAMLError or UnicodeDecodeError: no
        # YAML; OSError: unreadable), or neither it nor a pod's account
        where = (
            f"kubeconfig {args.kubeconfig or config.KUBE_CONFIG_DEFAULT_LOCATION} unusable"
            if from_file
            else "no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a cluster"
        )
        raise ClusterUnavailableError(
            f"cannot create PriorityClasses: {where} ({unusable(err, 300)})"
        ) from None
    quiet_retries()
    try:
        created = create_missing(ApiClient())
    except Exception as err:  # unreachable API, RBAC refusal: one line, no traceback
        raise ClusterUnavailableError(
            f"cannot create PriorityClasses: {type(err).__name__} {first_line(err, 300)}"
        ) from None
    print(f"created: {', '.join(created) or 'none (all present)'}", file=out)
    return 0


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    require_paths([] if args.trace is None else [args.trace])  # "" too: it names no trace
    # The operators' INFO lines repeat the decisions the table shows: Airflow's own per-namespace
    # levels keep them out of stderr (set before Airflow configures its logging; a user's setting wins).
    os.environ.setdefault("AIRFLOW__LOGGING__NAMESPACE_LEVELS", "airflow.task.operators=warning")
    from airflow_adaptive.demo import run_demo

    return run_demo(out, trace=args.trace, dag_file=args.dag_file, as_json=args.json)


def cmd_config_reference(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_adaptive.options import OPTIONS, SECTION

    print(f"| `[{SECTION}]` option | type | default | meaning |\n|---|---|---|---|", file=out)
    for name, (kind, default, description) in OPTIONS.items():
        print(f"| `{name}` | {kind} | `{default}` | {description} |", file=out)
    return 0


def _add_decision_commands(sub: Any) -> None:
    decide = sub.add_parser("decide", help="the memory decision for a task family, and why")
    decide.add_argument(
        "--task-family",
        required=True,
        type=task_family,
        help="the family to decide for (history show lists its attempts)",
    )
    decide.add_argument(
        "--new-family", action="store_true", help="the family has no history yet: decide anyway, on purpose"
    )
    decide.add_argument(
        "--try-number",
        type=try_number,
        help="with --previous-oom, the retry decided (default 2); a first try's decision is the same",
    )
    decide.add_argument("--previous-oom", action="store_true", help="as if the previous try was OOM-killed")
    decide.add_argument("--request", help="the user's memory request (Kubernetes quantity)")
    decide.add_argument("--limit", help="the user's memory limit (Kubernetes quantity)")
    decide.add_argument(
        "--input-size-bytes", type=int, help="the task's input size, for strategies that use it"
    )
    decide.add_argument(
        "--image", type=utf8_text, help="the container image the task runs (for a cold family's warm start)"
    )
    decide.add_argument(
        "--program", type=utf8_text, help="the program its command starts (for a cold family's warm start)"
    )
    decide.add_argument(
        "--require-capability", action="append", default=[], metavar="NAME",
        help="a node capability the task needs (repeatable), as the operator's required_capabilities",
    )  # fmt: skip
    decide.add_argument(
        "--priority-weight", type=priority_weight, default=1, help="the task's own priority_weight"
    )
    decide.add_argument("--json", action="store_true", help="the decision as JSON on stdout")
    decide.set_defaults(func=cmd_decide)

    classes = sub.add_parser(
        "priority-classes", help="print the least-finished-first PriorityClass manifests (or create them)"
    )
    classes.add_argument("--create", action="store_true", help="create the missing ones in the cluster")
    classes.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    classes.set_defaults(func=cmd_priority_classes)


def build_parser() -> argparse.ArgumentParser:
    from airflow_adaptive.version import __version__

    parser = OneLineParser(prog="airflow-adaptive", description=__doc__.replace("``", ""))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    add_history_commands(sub)

    _add_decision_commands(sub)

    add_replay_command(sub)

    add_simulate_command(sub)

    add_node_commands(sub)

    add_observe_command(sub)

    add_grow_agent_command(sub)

    demo = sub.add_parser(
        "demo",
        help="show the adaptive pod of every task of the example DAG (records its history in the "
        "configured store: use a throwaway AIRFLOW_HOME)",
    )
    demo.add_argument("--trace", help="warm the store from this Nextflow trace; - reads stdin")
    demo.add_argument("--dag-file", help="DAG file to show (default: the bundled example)")
    demo.add_argument("--json", action="store_true", help="the pods and why as JSON on stdout")
    demo.set_defaults(func=cmd_demo)

    ref = sub.add_parser("config-reference", help="print the [adaptive] options as a Markdown table")
    ref.set_defaults(func=cmd_config_reference)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_command_line(build_parser(), argv)
    out = sys.stdout
    if isinstance(out, io.TextIOWrapper):  # a name we did not escape is shown escaped, not a traceback
        out.reconfigure(errors="backslashreplace")
    try:
        # Results go to stdout; everything Airflow logs meanwhile goes to stderr, so --json pipes cleanly.
        with sigterm_stops(), contextlib.redirect_stdout(sys.stderr):
            return int(args.func(args, out))
    except AdaptiveError as err:
        print(f"airflow-adaptive: error: {escape_surrogates(str(err))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Terminated:
        print("airflow-adaptive: stopped (SIGTERM)", file=sys.stderr)
        return TERMINATED_EXIT
    except KeyboardInterrupt:  # Ctrl-C: a user's choice, not a crash; 130 as a shell reports SIGINT
        print("airflow-adaptive: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        reason = airflow_start_failure(err)
        if reason is None:
            raise
        print(f"airflow-adaptive: error: {escape_surrogates(reason)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
