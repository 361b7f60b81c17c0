#!/usr/bin/env bash
# nlpbench quick start on a fresh machine (Python >= 3.11 and pip; Java for the METEOR/CIDEr scorers).
#   bash envs/run.sh tables [snakemake args]   install into .venv if needed, then regenerate every table
#                                              (scale auto: cpu on a CPU, paper on a GPU)
#   bash envs/run.sh test   [pytest args]      install into .venv if needed, then run the test suite
# Offline: export NLPBENCH_MIRROR=/path/to/mirror (a directory holding babi/tasks_1-20_v1-2*.tar.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NLPBENCH_VENV:-.venv}
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac   # relative to the repository
PY=${PYTHON:-python3}

install() {
  local stamp="$VENV/.nlpbench-installed"
  if [ -f "$stamp" ] && [ "$stamp" -nt envs/requirements.txt ] && [ "$stamp" -nt pyproject.toml ]; then
    return
  fi
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  # torch is pinned (2.13.0): on CPU machines pip takes the local CPU wheel instead of a multi-GB CUDA build
  "$VENV/bin/python" -m pip install --quiet -e .   # dependencies: envs/requirements.txt
  touch "$stamp"
}

cmd=${1:-}
shift || true
case "$cmd" in
  tables)
    install
    # the plan (scale, device, groups per family, ETA) is printed before the first job; one line per job after
    # (--opt=value: an option of several values must not swallow the targets and options that follow)
    PATH="$VENV/bin:$PATH" exec snakemake --cores all --resources=gpu=1 --quiet=rules "$@"
    ;;
  test)
    install
    PATH="$VENV/bin:$PATH" exec "$VENV/bin/python" -m pytest "$@"
    ;;
  install)
    install
    ;;
  *)
    echo "usage: bash envs/run.sh {tables|test|install} [args...]" >&2
    exit 2
    ;;
esac
