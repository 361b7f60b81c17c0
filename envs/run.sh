#!/usr/bin/env bash
# nlpbench quick start on a fresh machine (Python >= 3.11 and pip; Java for the METEOR/CIDEr scorers).
#   bash envs/run.sh install [--cpu | --cuda 12 | --cuda 13]
#                                              install into .venv from a lock file with hashes (envs/lock/):
#                                              the build of torch for this machine (default: the one installed
#                                              already, else CUDA 13 or 12 by the driver nvidia-smi reports, else CPU)
#   bash envs/run.sh tables [snakemake args]   install if needed, then regenerate every table
#                                              (scale auto: cpu on a CPU, paper on a GPU)
#   bash envs/run.sh test   [pytest args]      install if needed, with the test tools, then run the test suite
#                                              on every core (pytest -n auto; -n 0 for one process)
#   bash envs/run.sh gpu-check [--dry-run]     install if needed, then check the pipeline on this machine's GPU in at
#                                              most 8 minutes and append its figures to docs/gpu.md
#   bash envs/run.sh lock   [--cpu | --cuda 12 | --cuda 13] [uv pip compile args]
#                                              rewrite the lock files (all four without a choice; needs the network)
# NLPBENCH_TORCH=cpu|cu12|cu13 chooses the build for tables and test too; NLPBENCH_VENV another venv directory.
# Offline: export NLPBENCH_MIRROR=/path/to/mirror (a directory holding babi/tasks_1-20_v1-2*.tar.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NLPBENCH_VENV:-.venv}
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac   # relative to the repository
PY=${PYTHON:-python3}
STAMP="$VENV/.nlpbench-installed"        # holds the torch build installed: cpu, cu12 or cu13
TEST_STAMP="$VENV/.nlpbench-test-installed"

# Where each build of torch comes from, on top of whatever index pip is configured with (PyTorch's wheel indexes).
# CUDA 12: the cu12x index that carries torch 2.13.0 (NLPBENCH_CU12_INDEX for another one, then run the lock step).
# NLPBENCH_CPU_INDEX= (empty): no extra index, where pip's own configuration already provides torch's CPU wheel.
torch_index() {
  case "$1" in
    cpu) echo "${NLPBENCH_CPU_INDEX-https://download.pytorch.org/whl/cpu}" ;;
    cu12) echo "${NLPBENCH_CU12_INDEX:-https://download.pytorch.org/whl/cu128}" ;;
    cu13) ;;                             # PyPI's torch is the CUDA 13 build
  esac
}
torch_pin() {
  case "$1" in
    cpu) echo "torch==2.13.0+cpu" ;;
    cu12) local idx; idx=$(torch_index cu12); echo "torch==2.13.0+${idx##*/}" ;;
    cu13) echo "torch==2.13.0" ;;
  esac
}

die() { echo "nlpbench: $*" >&2; exit 2; }

# --cpu | --cuda 12 | --cuda 13 at the head of the arguments -> BUILD; the rest stays in ARGS
parse_build() {
  BUILD=${NLPBENCH_TORCH:-}
  ARGS=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --cpu) BUILD=cpu ;;
      --cuda) [ $# -ge 2 ] || die "--cuda needs 12 or 13"; BUILD="cu$2"; shift ;;
      --cuda=*) BUILD="cu${1#--cuda=}" ;;
      *) ARGS+=("$1") ;;
    esac
    shift
  done
  case "$BUILD" in ""|cpu|cu12|cu13) ;; *) die "unknown torch build '$BUILD': use --cpu, --cuda 12 or --cuda 13 (NLPBENCH_TORCH=cpu|cu12|cu13)" ;; esac
}

detect_build() {   # the build already installed, else the one the NVIDIA driver can run
  if [ -s "$STAMP" ]; then cat "$STAMP"; return; fi
  local cuda
  cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' | head -n 1 || true)
  if [ -n "$cuda" ] && [ "$cuda" -ge 13 ]; then echo cu13
  elif [ "$cuda" = 12 ]; then echo cu12
  else echo cpu
  fi
}

install() {   # install [build] [with-tests]
  local build=${1:-} tests=${2:-} lock
  [ -n "$build" ] || build=$(detect_build)
  lock="envs/lock/$build.txt"
  grep -q '^torch==' "$lock" ||
    die "$lock holds no torch yet (its index was not reachable when it was written): on a machine that reaches $(torch_index "$build"), run 'bash envs/run.sh lock --cuda ${build#cu}', then install again"
  if [ -s "$STAMP" ] && [ "$(cat "$STAMP")" != "$build" ]; then
    echo "nlpbench: $VENV holds the $(cat "$STAMP") build of torch; making a new one for $build" >&2
    rm -rf -- "$VENV"                    # only a venv this script made (it holds the stamp)
  fi
  if ! { [ -f "$STAMP" ] && [ "$STAMP" -nt "$lock" ] && [ "$STAMP" -nt pyproject.toml ] && [ "$STAMP" -nt envs/requirements.txt ]; }; then
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    local index extra=()
    index=$(torch_index "$build")
    if [ -n "$index" ]; then
      # pip retries an unreachable index for every package: ask once; out of reach, pip's own sources must hold
      # the pinned torch (a wheel directory in pip's find-links, a mirror of the index)
      if "$VENV/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=15)' "$index" 2>/dev/null; then
        extra=(--extra-index-url "$index")
      else
        echo "nlpbench: $index is out of reach; $(grep -o '^torch==[^ ]*' "$lock") must come from pip's own configuration" >&2
      fi
    fi
    # every package and its sha256 from the lock; nlpbench itself then adds nothing
    "$VENV/bin/python" -m pip install --quiet --require-hashes "${extra[@]}" -r "$lock"
    "$VENV/bin/python" -m pip install --quiet --no-deps -e .
    echo "$build" > "$STAMP"
  fi
  if [ -n "$tests" ] && ! { [ -f "$TEST_STAMP" ] && [ "$TEST_STAMP" -nt envs/lock/test.txt ] && [ "$TEST_STAMP" -nt "$STAMP" ]; }; then
    "$VENV/bin/python" -m pip install --quiet --require-hashes -r envs/lock/test.txt   # the `test` extra, locked
    touch "$TEST_STAMP"
  fi
}

# uv pip compile of one lock file: envs/requirements.txt with torch's build pinned, every other package at the
# CPU lock's version (so that the builds differ only in torch and what it brings), hashes for every file. It runs
# in a scratch directory (the file names in the lock's "via" notes are its inputs'): give paths in ARGS absolute.
lock_one() {
  local build=$1; shift
  local out="envs/lock/$build.txt" index tmp
  index=$(torch_index "$build")
  tmp=$(mktemp -d)
  local opts=(--generate-hashes --no-header --python-version 3.11 --python-platform x86_64-manylinux_2_28)
  if [ "$build" = test ]; then
    "$VENV/bin/python" -c 'import sys, tomllib; print(*tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["test"], sep="\n")' pyproject.toml > "$tmp/test.in"   # the `test` extra
    opts+=(test.in)
  else
    cp envs/requirements.txt "$tmp/requirements.txt"
    torch_pin "$build" > "$tmp/torch.txt"
    opts+=(requirements.txt --override torch.txt)
    [ -z "$index" ] || opts+=(--extra-index-url "$index" --index-strategy unsafe-best-match)
  fi
  if [ "$build" != cpu ]; then
    [ -f envs/lock/cpu.txt ] || { echo "nlpbench: envs/lock/cpu.txt is missing: run 'bash envs/run.sh lock --cpu' first" >&2; return 1; }
    grep -E '^[A-Za-z0-9_.-]+==' envs/lock/cpu.txt | sed 's/ *\\$//' | grep -v '^torch==' > "$tmp/cpu-lock.txt"
    opts+=(-c cpu-lock.txt)
  fi
  [ ! -f "$out" ] || cp "$out" "$tmp/lock.txt"   # uv keeps the versions of the file it rewrites (--upgrade: newest)
  ( cd "$tmp" && "$VENV/bin/python" -m uv pip compile "${opts[@]}" "$@" --quiet -o lock.txt ) 2>"$tmp/err" || {
    cat "$tmp/err" >&2; rm -rf "$tmp"
    echo "nlpbench: the lock of $build could not be resolved (above); $out is unchanged" >&2
    return 1
  }
  {
    echo "# nlpbench lock file ($build): bash envs/run.sh install uses it, bash envs/run.sh lock rewrites it."
    echo "# Resolved for Linux x86_64 and Python 3.11; every file is checked against its sha256."
    grep -v '^# nlpbench lock file\|^# Resolved for ' "$tmp/lock.txt"
  } > "$tmp/with-header.txt"
  mv "$tmp/with-header.txt" "$out"
  rm -rf "$tmp"
  echo "wrote $out"
}

lock() {
  parse_build "$@"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m uv --version >/dev/null 2>&1 || "$VENV/bin/python" -m pip install --quiet "uv>=0.5"
  mkdir -p envs/lock
  local b failed=0 yaml digest
  for b in ${BUILD:-cpu test cu13 cu12}; do      # the CPU lock first: the others take its versions
    lock_one "$b" ${ARGS[@]+"${ARGS[@]}"} || failed=2
  done
  for yaml in envs/nlpbench.yaml envs/nlpbench-cuda.yaml; do   # the conda environments name their lock's digest
    b=$(sed -n 's|^# envs/lock/\([a-z0-9]*\)\.txt sha256: .*|\1|p' "$yaml")
    digest=$("$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "envs/lock/$b.txt")
    sed -i "s|^\(# envs/lock/$b\.txt sha256:\) .*|\1 $digest|" "$yaml"
  done
  return $failed
}

cmd=${1:-}
shift || true
case "$cmd" in
  tables)
    parse_build
    install "$BUILD"
    # the plan (scale, device, groups per family, ETA) is printed before the first job; one line per job after
    # (--opt=value: an option of several values must not swallow the targets and options that follow)
    PATH="$VENV/bin:$PATH" exec snakemake --cores all --quiet=rules "$@"
    ;;
  test)
    parse_build
    install "$BUILD" with-tests
    # a test file a worker, one worker a core (a file's module fixtures are built once); -n 0 runs in one process
    PATH="$VENV/bin:$PATH" exec "$VENV/bin/python" -m pytest -n auto --dist loadfile "$@"
    ;;
  install)
    parse_build "$@"
    [ ${#ARGS[@]} -eq 0 ] || die "install takes --cpu, --cuda 12 or --cuda 13, not '${ARGS[*]}'"
    install "$BUILD"
    ;;
  lock)
    lock "$@"
    ;;
  gpu-check)
    parse_build "$@"
    install "$BUILD"
    PATH="$VENV/bin:$PATH" exec "$VENV/bin/python" -m nlpbench.timing.gpu_check ${ARGS[@]+"${ARGS[@]}"}
    ;;
  *)
    echo "usage: bash envs/run.sh {install|tables|test|lock|gpu-check} [args...]" >&2
    exit 2
    ;;
esac
