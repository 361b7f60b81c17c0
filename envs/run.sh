#!/usr/bin/env bash
# nlpbench quick start on a fresh machine (Python >= 3.11 and pip; Java for the METEOR/CIDEr scorers).
#   bash envs/run.sh install [--cpu | --cuda 13]
#                                              install into .venv from a lock file with hashes (envs/lock/):
#                                              the build of torch for this machine (default: the one installed
#                                              already, else CUDA 13 where the driver nvidia-smi reports runs it,
#                                              else CPU), the lock of this platform (lock_name below)
#   bash envs/run.sh tables [snakemake args]   install if needed, then regenerate every table
#                                              (scale auto: cpu on a CPU, paper on a GPU)
#   bash envs/run.sh test   [pytest args]      install if needed, with the test tools, then run the test suite
#                                              on every core (pytest -n auto; -n 0 for one process)
#   bash envs/run.sh gpu-check [--dry-run]     install if needed, then check the pipeline on this machine's GPU in at
#                                              most 8 minutes and append its figures to docs/gpu.md
#   bash envs/run.sh lock   [--cpu | --cuda 13] [uv pip compile args]
#                                              rewrite the lock files (all five without a choice; needs the network)
#                                              and the conda environment files written from them
# NLPBENCH_TORCH=cpu|cu13 chooses the build for tables and test too; NLPBENCH_VENV another venv directory.
# Offline: export NLPBENCH_MIRROR=/path/to/mirror (a directory holding babi/tasks_1-20_v1-2*.tar.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NLPBENCH_VENV:-.venv}
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac   # relative to the repository
PY=${PYTHON:-python3}
STAMP="$VENV/.nlpbench-installed"        # holds the torch build installed: cpu or cu13
TEST_STAMP="$VENV/.nlpbench-test-installed"

die() { echo "nlpbench: $*" >&2; exit 2; }

# The lock files (envs/lock/<name>.txt) and the platforms they are resolved for:
#   cpu            Linux x86_64, torch 2.13.0+cpu from PyTorch's CPU index (no CUDA package)
#   cu13           Linux x86_64, PyPI's torch 2.13.0: the CUDA 13 build with its CUDA libraries
#   linux-aarch64  Linux aarch64, PyPI's torch 2.13.0: its CUDA 13 build too (it runs on a CPU as well)
#   macos-arm64    macOS 14 or newer on Apple silicon, PyPI's torch 2.13.0 (CPU and Apple's MPS)
#   test           the `test` extra of pyproject.toml: pure-Python wheels, installed on every platform above
# lock_name BUILD: the lock that installs BUILD (cpu or cu13) on this machine (uname -s, uname -m)
lock_name() {
  local build=$1 platform
  platform="$(uname -s) $(uname -m)"
  case "$platform" in
    "Linux x86_64") echo "$build" ;;
    "Linux aarch64"|"Linux arm64") echo linux-aarch64 ;;
    "Darwin arm64")
      [ "$build" = cpu ] || die "macOS has no CUDA build of torch: install --cpu (PyPI's torch for macOS, with Apple's MPS)"
      echo macos-arm64 ;;
    *) die "no lock file for $platform: the locks are for Linux x86_64, Linux aarch64 and macOS arm64 (docs/environment.md); elsewhere pip install -e '.[test]' installs from envs/requirements.txt without one" ;;
  esac
}

# Where torch comes from, on top of whatever index pip is configured with: PyTorch's CPU index for its CPU build
# (NLPBENCH_CPU_INDEX= (empty): no extra index, where pip's own configuration already provides that wheel); PyPI
# for every other lock. torch_index LOCK_NAME, torch_pin LOCK_NAME.
torch_index() {
  [ "$1" != cpu ] || echo "${NLPBENCH_CPU_INDEX-https://download.pytorch.org/whl/cpu}"
}
torch_pin() {
  if [ "$1" = cpu ]; then echo "torch==2.13.0+cpu"; else echo "torch==2.13.0"; fi
}
python_platform() {   # uv's target of each lock
  case "$1" in
    linux-aarch64) echo aarch64-manylinux_2_28 ;;
    macos-arm64) echo aarch64-apple-darwin ;;   # macOS 14: MACOSX_DEPLOYMENT_TARGET, as torch's wheels need
    *) echo x86_64-manylinux_2_28 ;;
  esac
}
platform_words() {   # the lock file's header
  case "$1" in
    linux-aarch64) echo "Linux aarch64" ;;
    macos-arm64) echo "macOS 14 or newer on arm64" ;;
    *) echo "Linux x86_64" ;;
  esac
}

# --cpu | --cuda 13 at the head of the arguments -> BUILD; the rest stays in ARGS
parse_build() {
  BUILD=${NLPBENCH_TORCH:-}
  ARGS=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --cpu) BUILD=cpu ;;
      --cuda) [ $# -ge 2 ] || die "--cuda needs 13"; BUILD="cu$2"; shift ;;
      --cuda=*) BUILD="cu${1#--cuda=}" ;;
      *) ARGS+=("$1") ;;
    esac
    shift
  done
  case "$BUILD" in
    ""|cpu|cu13) ;;
    cu12) die "no CUDA 12 build is locked: PyPI's torch 2.13.0 is the CUDA 13 build (an NVIDIA driver for CUDA 13, 580 or newer), and PyTorch's CUDA 12 wheels are on its own index only: use --cuda 13 with a newer driver, or --cpu (docs/environment.md: a CUDA 12 torch by hand)" ;;
    *) die "unknown torch build '$BUILD': use --cpu or --cuda 13 (NLPBENCH_TORCH=cpu|cu13)" ;;
  esac
}

detect_build() {   # the build already installed, else CUDA 13 where the NVIDIA driver runs it, else CPU
  if [ -s "$STAMP" ]; then cat "$STAMP"; return; fi
  local cuda
  cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' | head -n 1 || true)
  if [ -n "$cuda" ] && [ "$cuda" -ge 13 ]; then echo cu13
  else
    [ -z "$cuda" ] || echo "nlpbench: the NVIDIA driver runs CUDA $cuda, not 13: installing the CPU build (docs/environment.md: a CUDA 12 torch by hand)" >&2
    echo cpu
  fi
}

install() {   # install [build] [with-tests]
  local build=${1:-} tests=${2:-} name lock
  [ -n "$build" ] || build=$(detect_build)
  name=$(lock_name "$build")
  lock="envs/lock/$name.txt"
  if [ -s "$STAMP" ] && [ "$(cat "$STAMP")" != "$build" ]; then
    echo "nlpbench: $VENV holds the $(cat "$STAMP") build of torch; making a new one for $build" >&2
    rm -rf -- "$VENV"                    # only a venv this script made (it holds the stamp)
  fi
  if ! { [ -f "$STAMP" ] && [ "$STAMP" -nt "$lock" ] && [ "$STAMP" -nt pyproject.toml ] && [ "$STAMP" -nt envs/requirements.txt ]; }; then
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    [ "$name/$build" != linux-aarch64/cpu ] ||
      echo "nlpbench: Linux aarch64 has one lock, PyPI's torch: its CUDA 13 build, which runs on a CPU too" >&2
    local index extra=()
    index=$(torch_index "$name")
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
    "$VENV/bin/python" -m pip install --quiet --require-hashes ${extra[@]+"${extra[@]}"} -r "$lock"   # bash 3.2 (macOS): an empty array is unset
    "$VENV/bin/python" -m pip install --quiet --no-deps -e .
    echo "$build" > "$STAMP"
  fi
  if [ -n "$tests" ] && ! { [ -f "$TEST_STAMP" ] && [ "$TEST_STAMP" -nt envs/lock/test.txt ] && [ "$TEST_STAMP" -nt "$STAMP" ]; }; then
    "$VENV/bin/python" -m pip install --quiet --require-hashes -r envs/lock/test.txt   # the `test` extra, locked
    touch "$TEST_STAMP"
  fi
}

# uv pip compile of one lock file: envs/requirements.txt with torch's build pinned, every other package at the
# CPU lock's version (so that the locks differ only in torch and what it brings), hashes for every file. It runs
# in a scratch directory (the file names in the lock's "via" notes are its inputs'): give paths in ARGS absolute.
lock_one() {
  local name=$1; shift
  local out="envs/lock/$name.txt" index tmp
  index=$(torch_index "$name")
  tmp=$(mktemp -d)
  local opts=(--generate-hashes --no-header --python-version 3.11 --python-platform "$(python_platform "$name")")
  if [ "$name" = test ]; then
    "$VENV/bin/python" -c 'import sys, tomllib; print(*tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["test"], sep="\n")' pyproject.toml > "$tmp/test.in"   # the `test` extra
    opts+=(test.in)
  else
    cp envs/requirements.txt "$tmp/requirements.txt"
    torch_pin "$name" > "$tmp/torch.txt"
    opts+=(requirements.txt --override torch.txt)
    [ -z "$index" ] || opts+=(--extra-index-url "$index" --index-strategy unsafe-best-match)
  fi
  if [ "$name" != cpu ]; then
    [ -f envs/lock/cpu.txt ] || { echo "nlpbench: envs/lock/cpu.txt is missing: run 'bash envs/run.sh lock --cpu' first" >&2; return 1; }
    grep -E '^[A-Za-z0-9_.-]+==' envs/lock/cpu.txt | sed 's/ *\\$//' | grep -v '^torch==' > "$tmp/cpu-lock.txt"
    opts+=(-c cpu-lock.txt)
  fi
  [ ! -f "$out" ] || cp "$out" "$tmp/lock.txt"   # uv keeps the versions of the file it rewrites (--upgrade: newest)
  ( cd "$tmp" && MACOSX_DEPLOYMENT_TARGET=14.0 "$VENV/bin/python" -m uv pip compile "${opts[@]}" "$@" --quiet -o lock.txt ) 2>"$tmp/err" || {
    cat "$tmp/err" >&2; rm -rf "$tmp"
    echo "nlpbench: the lock of $name could not be resolved (above); $out is unchanged" >&2
    return 1
  }
  {
    echo "# nlpbench lock file ($name): bash envs/run.sh install uses it, bash envs/run.sh lock rewrites it."
    echo "# Resolved for $(platform_words "$name") and Python 3.11; every file is checked against its sha256."
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
  local name failed=0
  for name in ${BUILD:-cpu test cu13 linux-aarch64 macos-arm64}; do   # the CPU lock first: the others take its versions
    lock_one "$name" ${ARGS[@]+"${ARGS[@]}"} || failed=2
  done
  # the conda environments of `snakemake --sdm conda` carry their lock written out (Snakemake copies the file away
  # from envs/ before conda reads it)
  "$VENV/bin/python" envs/conda_env.py envs/lock/cpu.txt envs/nlpbench.yaml "$(torch_index cpu)" || failed=2
  "$VENV/bin/python" envs/conda_env.py envs/lock/cu13.txt envs/nlpbench-cuda.yaml || failed=2
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
    [ ${#ARGS[@]} -eq 0 ] || die "install takes --cpu or --cuda 13, not '${ARGS[*]}'"
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
