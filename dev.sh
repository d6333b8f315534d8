#!/usr/bin/env bash
# airflow-adaptive developer entry point.
#   ./dev.sh demo [--trace FILE] [--dag-file FILE] [--json] [--no-serve]   install, migrate the embedded SQLite store, show the example
#                                  DAG's adaptive pods, then serve the Airflow UI with the Adaptive page
#   ./dev.sh test                  install, lint, type-check, run the tests on SQLite and PostgreSQL
set -euo pipefail
CALLER=$PWD  # where the user ran it: their relative paths (demo --trace, --dag-file) start there
cd "$(dirname "$0")"
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ] || [ constraints.txt -nt "$VENV/.installed" ]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -U pip
    # constraints.txt pins the whole resolution so every fresh install is the same.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[dev]"
    touch "$VENV/.installed"
  fi
  export PATH="$VENV/bin:$PATH"
}

airflow_env() {
  # The demo's own store, whatever the shell points at: it writes a generated history, which must
  # not land in a deployment's metadata database.
  local own=$ROOT/.airflow-home
  if [ -n "${AIRFLOW_HOME:-}" ] && [ "$AIRFLOW_HOME" != "$own" ]; then
    echo "note: the demo uses its own store in $own, not AIRFLOW_HOME=$AIRFLOW_HOME" >&2
  fi
  export AIRFLOW_HOME=$own
  local var
  for var in AIRFLOW_CONFIG AIRFLOW__DATABASE__SQL_ALCHEMY_CONN AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD \
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_SECRET AIRFLOW__CORE__SQL_ALCHEMY_CONN AIRFLOW__ADAPTIVE__HISTORY_CONN_ID \
    AIRFLOW_CONN_ADAPTIVE_HISTORY_DEFAULT; do
    if [ -n "${!var:-}" ]; then
      echo "note: the demo ignores $var (it uses its own SQLite store)" >&2
      unset "$var"
    fi
  done
  export AIRFLOW__CORE__LOAD_EXAMPLES=False
  export AIRFLOW__CORE__DAGS_FOLDER=${AIRFLOW__CORE__DAGS_FOLDER:-$ROOT/dags}
  mkdir -p "$AIRFLOW_HOME"
}

serve_ui() {
  # The real api-server on the demo's SQLite store, loopback only, one generated admin password.
  local port=${ADAPTIVE_DEMO_PORT:-28080}
  local passwords=$AIRFLOW_HOME/demo-passwords.json
  [ -f "$passwords" ] || python -c 'import json, secrets; print(json.dumps({"admin": secrets.token_urlsafe(12)}))' >"$passwords"
  export AIRFLOW__API__HOST=127.0.0.1 AIRFLOW__API__PORT=$port
  export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=admin:admin AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=$passwords
  airflow dags reserialize >/dev/null 2>&1 || true
  echo
  echo "Airflow UI with the Adaptive page: http://127.0.0.1:$port/plugin/adaptive"
  echo "log in as admin / $(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["admin"])' "$passwords")   (Ctrl-C stops it)"
  exec airflow api-server --port "$port"
}

demo_port_free() {
  # Said before the demo runs, not after Airflow's banner: a port that is not one, or is taken.
  python - "${ADAPTIVE_DEMO_PORT:-28080}" <<'PY'
import socket, sys
value = sys.argv[1]
if not (value.isascii() and value.isdigit() and 0 < int(value) < 65536):
    sys.exit(f"dev.sh demo: ADAPTIVE_DEMO_PORT={value!r} is not a port (1-65535)")
with socket.socket() as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the api-server binds
    try:
        probe.bind(("127.0.0.1", int(value)))
    except OSError as err:
        sys.exit(f"dev.sh demo: port {value} is taken ({err.strerror}): set ADAPTIVE_DEMO_PORT to a free one, or pass --no-serve")
PY
}

postgres_url() {
  echo "${ADAPTIVE_TEST_POSTGRES_URL:-postgresql+psycopg2://postgres@127.0.0.1:5432/test}"
}

postgres_up() {
  python - "$(postgres_url)" <<'PY'
import sys
from sqlalchemy import create_engine, text
try:
    with create_engine(sys.argv[1], connect_args={"connect_timeout": 3}).connect() as conn:
        conn.execute(text("select 1"))
except Exception as err:
    print(f"PostgreSQL not reachable: {err}".splitlines()[0], file=sys.stderr)
    sys.exit(1)
PY
}

cmd=${1:-}
shift || true
case "$cmd" in
  demo)
    setup
    airflow_env
    airflow db migrate >/dev/null
    serve=1
    args=()
    path_next=0
    for arg in "$@"; do
      if [ "$path_next" = 1 ]; then  # an option's FILE: relative to where dev.sh was run
        if [ "${arg#/}" = "$arg" ] && [ "$arg" != - ]; then arg=$CALLER/$arg; fi
        path_next=0; args+=("$arg"); continue
      fi
      case "$arg" in
        --no-serve) serve=0; continue ;;
        --trace|--dag-file) path_next=1 ;;
        --trace=-) ;;
        --trace=[!/]*|--dag-file=[!/]*) arg=${arg%%=*}=$CALLER/${arg#*=} ;;
        --trace=*|--dag-file=*|--json|-h|--help) ;;
        -*) known=""  # argparse takes a prefix of an option: --dag for --dag-file
            for option in --trace --dag-file --json; do
              if [[ "$arg" == --?* && "$option" == "${arg%%=*}"* ]]; then known=$option; fi
            done
            if [ -z "$known" ]; then
              echo "dev.sh demo: unknown option $arg (it takes --trace FILE, --dag-file FILE, --json, --no-serve)" >&2
              exit 2
            fi
            if [ "$known" != --json ] && [ "${arg#*=}" = "$arg" ]; then path_next=1; fi ;;
      esac
      args+=("$arg")
    done
    if [ "$serve" = 1 ]; then demo_port_free; fi
    airflow-adaptive demo "${args[@]}"
    if [ "$serve" = 1 ]; then serve_ui; fi
    ;;
  test)
    setup
    # Every step runs and reports even when an earlier one failed; the exit code is non-zero if any did.
    failed=()
    step() { local name=$1; shift; echo "== $name =="; "$@" || failed+=("$name"); }
    step "ruff check" ruff check .
    step "ruff format" ruff format --check .
    step "mypy" mypy
    # The two databases' runs side by side (each keeps about one core busy): PostgreSQL's in the
    # background, its output shown once the SQLite run has finished.
    pg_pid="" pg_log=""
    if postgres_up; then
      pg_log=$(mktemp)
      # Its own pytest cache (--lf, --ff work in both runs and neither writes over the other's).
      env ADAPTIVE_TEST_DB=postgres ADAPTIVE_TEST_POSTGRES_URL="$(postgres_url)" \
        python -m pytest -o cache_dir=.pytest_cache_postgres "$@" >"$pg_log" 2>&1 &
      pg_pid=$!
      trap 'kill "$pg_pid" 2>/dev/null; rm -f "$pg_log"; exit 130' INT TERM
    elif [ "${ADAPTIVE_REQUIRE_POSTGRES:-0}" = 1 ]; then
      echo "PostgreSQL is required here (ADAPTIVE_REQUIRE_POSTGRES=1) but not reachable" >&2
      failed+=("PostgreSQL unreachable")
    else
      echo "== PostgreSQL not reachable: skipped the PostgreSQL run =="
    fi
    step "tests on SQLite" env ADAPTIVE_TEST_DB=sqlite python -m pytest "$@"
    if [ -n "$pg_pid" ]; then
      echo "== tests on PostgreSQL =="
      pg_status=0
      wait "$pg_pid" || pg_status=$?
      cat "$pg_log"
      rm -f "$pg_log"
      [ "$pg_status" = 0 ] || failed+=("tests on PostgreSQL")
    fi
    if [ ${#failed[@]} -gt 0 ]; then
      printf '== FAILED: %s ==\n' "${failed[@]}" >&2
      exit 1
    fi
    echo "== all passed =="
    ;;
  *)
    echo "usage: ./dev.sh demo [--trace FILE] [--dag-file FILE] [--json] [--no-serve] | ./dev.sh test [pytest args]" >&2
    exit 2
    ;;
esac
