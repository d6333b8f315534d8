"""The import rule is the architecture: every module of the package imports only from units of layers
below its own unit's (or from its own unit), so the loop observe -> store -> decide -> apply reads
bottom-up and no cycle between units can form. A new subpackage or top-level module must be given
a layer here; there are no exceptions."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "airflow_adaptive"

# Every unit of the package (a subpackage or a top-level module) and its layer: a unit imports only
# from units of lower layers, so no cycle between units can form.
LAYERS = {
    "exceptions": 0,
    "version": 0,
    "core": 1,  # pure policy
    "failopen": 2,
    "stopping": 2,  # SIGTERM unwinds a command as Ctrl-C does
    "console": 2,  # the commands' progress display
    "cli_args": 3,  # the commands' argument types, on core and traces
    "nodebench": 2,  # node microbenchmarks
    "traces": 2,  # trace files read into core types
    "agent": 2,  # node-local memory cgroups and the growth watch, on core
    "kubernetes": 3,  # apply and observe, on pods and nodes
    "options": 2,  # the config section as declared (Airflow imports it with itself: nothing heavy)
    "config_read": 3,  # one option read and checked (what the grow agent reads, without the sizing code)
    "config": 4,  # settings read once at the edge
    "provider_info": 4,  # the provider info Airflow reads while it imports itself
    "store": 5,  # observe and store
    "advice": 6,  # one attempt's advice by role: store -> decide
    "advisor": 7,  # the roles together, and the pod's whole decision
    "evaluation": 7,  # replay through the live decision
    "weight_rule": 8,  # least-finished-first as Airflow's weight strategy
    "shared_inputs": 8,
    "simulation": 8,
    "attempt": 8,  # one attempt's pod, whoever built it: mode, wrap, decide, apply, record
    "operators": 9,
    "observer": 9,  # records ended pods the operator does not watch (KubernetesExecutor workers)
    "policy": 10,  # Airflow's entry points, thin
    "plots": 9,  # PNG reports of replays and simulations
    "history_cli": 9,  # commands
    "plugin": 10,
    "example_dags": 10,
    "nodes_cli": 10,
    "observe_cli": 10,
    "replay_cli": 10,
    "simulate_cli": 10,
    "demo_pods": 11,  # the demo's pods, built as the operator and the pod-mutation hook build them
    "grow_agent_cli": 11,  # the grow agent's command, on observe_cli's cluster client
    "demo": 12,
    "cli": 13,
    "": 14,  # the package itself: its version, and a lazy re-export of LeastFinishedFirst (PEP 562)
}


def _layer(module: str) -> tuple[str, int]:
    """The module's unit (its first name inside the package) and that unit's layer."""
    unit = module.split(".")[1] if "." in module else ""
    return unit, LAYERS[unit]


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module of the package that ``module`` imports, relative imports resolved."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}"))
    return {name for name in found if name.split(".")[0] == "airflow_adaptive"}


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _offences(module: str, imports: set[str]) -> list[str]:
    unit, layer = _layer(module)
    offences = []
    for target in sorted(imports):
        target_unit, target_layer = _layer(target)
        if target_unit != unit and target_layer >= layer:
            offences.append(f"{module} ({layer}) imports {target} ({target_layer})")
    return offences


def test_every_module_imports_only_from_lower_layers() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    offenders = []
    for path in modules:
        module = _module(path)
        offenders += _offences(
            module, _imports(path.read_text(), module, is_package=path.name == "__init__.py")
        )
    assert offenders == []
    assert len(modules) > 80  # the rule really looked at the package


def test_the_layer_rule_reports_an_upward_import() -> None:
    imports = _imports(
        "from ..store.api import FamilyState\nfrom . import units", "airflow_adaptive.core.model"
    )
    assert imports == {"airflow_adaptive.store.api", "airflow_adaptive.core", "airflow_adaptive.core.units"}
    assert _offences("airflow_adaptive.core.model", imports) == [
        "airflow_adaptive.core.model (1) imports airflow_adaptive.store.api (5)"
    ]
    assert _offences("airflow_adaptive.cli", imports) == []  # downward: allowed


def test_the_layers_are_whole_numbers_over_every_unit() -> None:
    units = {path.relative_to(PACKAGE).parts[0].removesuffix(".py") for path in PACKAGE.rglob("*.py")}
    assert units - {"__init__"} == set(LAYERS) - {""}  # every unit has a layer, no stale names
    assert all(isinstance(layer, int) for layer in LAYERS.values())
