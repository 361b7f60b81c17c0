"""Where a result came from: code commit, device, time. One place for every family's table headers.

Torch is imported only to ask it about a device: planning (`nlpbench plan`, the Snakefile) runs without it.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone


def _torch_sees_cuda() -> bool:
    """Whether torch sees a CUDA device here; False where torch cannot be imported (no device it could use)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def planned_device(name: str) -> str:
    """The device params.yaml's `device` plans for, on any host: cuda and cpu as written (a CPU-only login node
    plans GPU jobs for a GPU cluster), auto as this host sees it (cuda when torch sees one). A job resolves its own
    device where it runs (resolve_device)."""
    if name == "auto":
        return "cuda" if _torch_sees_cuda() else "cpu"
    return name


def resolve_device(name: str) -> str:
    """params.yaml `device` for the process that computes: auto (cuda when torch sees one) | cpu | cuda (an error
    where torch sees no CUDA device)."""
    if name == "auto":
        return "cuda" if _torch_sees_cuda() else "cpu"
    if name == "cuda" and not _torch_sees_cuda():
        raise RuntimeError("params.yaml: device: cuda requested but torch sees no CUDA device")
    return name


def device_label(device: str, threads: int | None = None) -> str:
    """The device a process computes on; on a CPU the vector instructions torch's own kernels use (AVX2, AVX512,
    ...: they decide the last bits of softmax, the GRU cell and cross-entropy, so two CPUs that differ in them
    train other numbers; docs/reproducibility.md) and `threads` torch threads (default: this process's)."""
    import torch
    if device == "cuda":
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return (f"cpu ({platform.processor() or platform.machine()}, {torch.backends.cpu.get_cpu_capability()}, "
            f"{threads or torch.get_num_threads()} threads)")


_COMMIT_AT_START: str | None = None


def code_commit() -> str:
    """Short HEAD commit, with '+uncommitted changes' when src/ or params.yaml differ from it, as it was when this
    process first asked (the CLI asks at start): the code a process runs is the code it loaded, so a commit made
    while it trains does not relabel its runs. A copy of the tree without its .git (a rented GPU machine, say)
    names its commit in $NLPBENCH_CODE_COMMIT."""
    global _COMMIT_AT_START
    if os.environ.get("NLPBENCH_CODE_COMMIT"):
        return os.environ["NLPBENCH_CODE_COMMIT"]
    if _COMMIT_AT_START is None:
        _COMMIT_AT_START = _head_commit()
    return _COMMIT_AT_START


def _head_commit() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "src", "params.yaml"],
                               capture_output=True, text=True).stdout.strip()
        return rev.stdout.strip() + ("+uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
