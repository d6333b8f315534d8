"""The import rule is the architecture: every module of the package imports only from layers below
its own (or from its own unit), so the loop observe -> store -> decide -> apply reads bottom-up
and no cycle can form. A new module must be given a layer here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "airflow_adaptive"

# Module prefixes and their layer (lower layers know nothing of higher ones); the longest prefix wins.
LAYERS = {
    "airflow_adaptive": 0,  # the package's __init__: its version, and a lazy re-export (PEP 562)
    "airflow_adaptive.exceptions": 0,
    "airflow_adaptive.core": 1,  # pure policy
    "airflow_adaptive.kubernetes.quantity": 2,  # the Kubernetes quantity grammar, by the client library
    "airflow_adaptive.failopen": 2,
    "airflow_adaptive.console": 2,  # the commands' progress display
    "airflow_adaptive.cli_args": 2,  # the commands' argument types, on core
    "airflow_adaptive.config": 3,  # settings read once at the edge
    "airflow_adaptive.provider_info": 3.5,  # the config section it declares
    "airflow_adaptive.store": 4,  # observe and store
    "airflow_adaptive.evaluation": 3.8,  # replay and synthetic task sets: evaluation, on core only
    "airflow_adaptive.traces": 4,
    "airflow_adaptive.evaluation.report": 4.5,  # replays trace files side by side
    "airflow_adaptive.nodebench": 4,
    "airflow_adaptive.kubernetes": 4,  # apply and observe, on pods and nodes
    "airflow_adaptive.advisor": 5,  # the one orchestrator: store -> decide
    "airflow_adaptive.simulation": 5,
    "airflow_adaptive.locality": 5.5,
    "airflow_adaptive.plots": 5.5,  # PNG reports of replays and simulations
    "airflow_adaptive.priority": 5.5,
    "airflow_adaptive.operators": 6,  # Airflow's entry points, thin
    "airflow_adaptive.policy": 6,
    "airflow_adaptive.plugin": 6,
    "airflow_adaptive.example_dags": 7,
    "airflow_adaptive.history_cli": 7,  # commands
    "airflow_adaptive.nodes_cli": 7.5,  # opens the store as history_cli does
    "airflow_adaptive.demo": 8,
    "airflow_adaptive.simulation.cli": 8,
    "airflow_adaptive.cli": 9,
}
LAZY_EXPORTS = {("airflow_adaptive", "airflow_adaptive.priority")}  # imported when asked for only


def _layer(module: str) -> tuple[str, float]:
    """The module's unit (its longest listed prefix) and that unit's layer."""
    unit = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
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
        if target_unit != unit and target_layer >= layer and (module, target) not in LAZY_EXPORTS:
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
        "airflow_adaptive.core.model (1) imports airflow_adaptive.store.api (4)"
    ]
    assert _offences("airflow_adaptive.cli", imports) == []  # downward: allowed
