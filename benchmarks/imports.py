"""Import cost of what each Airflow component loads: the policy (scheduler, workers), the operator
(DAG parsing, workers), the plugin (api-server), and the CLI; and which heavy libraries each pulls in.

    python benchmarks/imports.py [--repeats 5] [--before REV]

``--before REV``: the same imports of a git revision of this repository (exported to a scratch
folder, first on ``PYTHONPATH``), measured in the same run, module by module beside this checkout's, and
the ratio now / before.

Each import runs in a fresh interpreter (nothing cached in ``sys.modules``), timed inside it around
the ``import`` alone, so interpreter start-up is not counted; best and median of the repeats (the
first run also pays for cold files and Airflow writing its config into a scratch AIRFLOW_HOME).
Prints a Markdown table. Measured in this run; nothing stored.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODULES = {
    # Not a floor without the provider: Airflow's settings load the `airflow.policy` entry point.
    "airflow": "Airflow (with its policy entry point)",
    # What every Airflow process does once it reads an [adaptive] option (the provider's config section).
    "airflow; from airflow.configuration import conf; conf.get('adaptive', 'strategy')": "Airflow reading [adaptive]",
    "airflow_adaptive.policy": "policy",
    "airflow_adaptive.operators.pod": "operator",
    "airflow_adaptive.plugin": "plugin",
    "airflow_adaptive.cli": "CLI",
}
HEAVY = ("simpy", "matplotlib", "sklearn", "pandas", "statsmodels")
PROBE = """
import json, sys, time
started = time.perf_counter()
import {module}
took = time.perf_counter() - started
print(json.dumps([took, [name for name in {heavy!r} if name in sys.modules]]))
"""


def measure(module: str, env: dict[str, str]) -> tuple[float, list[str]]:
    """Seconds the import took in a fresh interpreter, and the heavy libraries it left loaded."""
    done = subprocess.run(  # in a neutral folder: PYTHONPATH, not the current directory, picks the code
        [sys.executable, "-c", PROBE.format(module=module, heavy=HEAVY)],
        capture_output=True, text=True, env=env, timeout=300, cwd=env.get("AIRFLOW_HOME"),
    )  # fmt: skip
    if done.returncode != 0:  # the import's own last line, not this script's traceback
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"imports.py: error: import {module} failed: {last}")
    took, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return float(took), list(loaded)


def exported(revision: str, folder: str) -> str:
    """The package as it was at ``revision``, in ``folder``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    archive = subprocess.run(
        ["git", "-C", root, "archive", revision, "airflow_adaptive"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
    return folder


def best_ms(module: str, env: dict[str, str], repeats: int) -> tuple[float, float, set[str]]:
    runs = [measure(module, env) for _ in range(repeats)]
    times = [took * 1000 for took, _ in runs]
    return min(times), statistics.median(times), set(runs[-1][1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", help="a git revision to measure beside this checkout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="adaptive-import-bench-") as home:
        # A scratch Airflow home: importing Airflow writes a default config where AIRFLOW_HOME points.
        env = dict(os.environ, AIRFLOW_HOME=home, AIRFLOW__CORE__LOAD_EXAMPLES="False")
        old_env = None
        if args.before:
            tree = exported(args.before, tempfile.mkdtemp(dir=home))
            old_env = dict(env, PYTHONPATH=os.pathsep.join([tree, env.get("PYTHONPATH", "")]))
        print(f"Python {sys.version.split()[0]}, {args.repeats} fresh interpreters per module\n")
        before = f" | {args.before} best ms | now / before" if args.before else ""
        print("| component | module | best ms | median ms" + before + " | " + " | ".join(HEAVY) + " |")
        print("|---|---|---:|---:|" + ("---:|---:|" if args.before else "") + ":---:|" * len(HEAVY))
        for module, component in MODULES.items():
            best, median, loaded = best_ms(module, env, args.repeats)
            cells = f"{best:.0f} | {median:.0f}"
            if old_env is not None:
                old_best = best_ms(module, old_env, args.repeats)[0]
                cells += f" | {old_best:.0f} | {best / old_best:.2f}"
            marks = " | ".join("yes" if name in loaded else "no" for name in HEAVY)
            print(f"| {component} | `{module}` | {cells} | {marks} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
