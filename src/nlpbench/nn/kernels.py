"""Elementwise-heavy functions run op by op (eager) or fused into a few kernels by torch.compile.

On a CPU, many small elementwise passes over a model's parameters cost more in memory traffic and dispatch than
in arithmetic; torch.compile (inductor) fuses them, but it needs a C++ compiler on the machine. A setting names
how to run them: "eager" (op by op, everywhere), "compiled" (fused; an error where torch.compile cannot build
kernels), or "auto" (fused on a CPU where it can, eager elsewhere). The two compute the same formulas; the
numbers agree up to float rounding, as they do between devices.

torch.compile keeps the kernels it builds in a cache, by default in the system's temporary directory; here it is
the user's cache instead, $XDG_CACHE_HOME/nlpbench/torch-compile (~/.cache/nlpbench/torch-compile without
XDG_CACHE_HOME), unless TORCHINDUCTOR_CACHE_DIR already names one. Triton's kernels (on a GPU) go under it as
well, unless TRITON_CACHE_DIR names their own.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable, Mapping, MutableMapping

import torch

SETTINGS = ("auto", "eager", "compiled")


def _probe(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).exp().sum()


CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"      # torch.compile's cache (inductor's; Triton's under it)


def compile_cache_dir(environ: Mapping[str, str], torch_default: str | None = None) -> str:
    """The directory torch.compile should cache its kernels in, given the environment `environ`: the one the
    user set, else the user's cache. `torch_default`: torch's own temp-directory default, which torch writes into
    the environment itself when it loads its compiler, so that it does not count as the user's."""
    if environ.get(CACHE_ENV) and environ[CACHE_ENV] != torch_default:
        return environ[CACHE_ENV]
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".cache")
    return str(Path(base) / "nlpbench" / "torch-compile")


def use_compile_cache(environ: MutableMapping[str, str] = os.environ) -> None:
    """Point torch.compile's cache at `compile_cache_dir` (torch reads it from the environment as it compiles)."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        torch_default = default_cache_dir()
    except ImportError:          # another torch: its default is then not recognised
        torch_default = None
    environ[CACHE_ENV] = compile_cache_dir(environ, torch_default)


@functools.cache
def compiler_works(device_type: str) -> bool:
    """Whether torch.compile builds and runs a small fused kernel on this kind of device here."""
    use_compile_cache()
    try:
        return bool(torch.isfinite(torch.compile(_probe)(torch.ones(8, device=device_type))))
    except Exception:      # no C++ compiler (inductor's InvalidCxxCompiler), no Triton, a failed build, ...
        return False


def check(setting: str, key: str) -> str:
    """`setting` if it is one of SETTINGS, else an error naming `key`."""
    if setting not in SETTINGS:
        raise ValueError(f"{key}: unknown value {setting!r} (expected one of {', '.join(SETTINGS)})")
    return setting


def resolve(setting: str, device: torch.device | str, key: str) -> str:
    """"eager" or "compiled" for `setting` on `device`; `key` names the setting in errors."""
    device_type = torch.device(device).type
    check(setting, key)
    if setting == "auto":
        return "compiled" if device_type == "cpu" and compiler_works("cpu") else "eager"
    if setting == "compiled" and not compiler_works(device_type):
        raise ValueError(f"{key}: 'compiled', but torch.compile cannot build kernels on {device_type} here "
                         "(on a CPU it needs a C++ compiler such as g++); use 'auto' or 'eager'")
    return setting


RECOMPILE_LIMIT = 64     # one process may build models of many sizes (the timing benchmark's one-run trainers, the
                         # tests); past torch's default of 8 shapes a compiled function would silently run eager


@functools.cache
def _compiled(fn: Callable) -> Callable:
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    use_compile_cache()
    return torch.compile(fn)


def run_as(fn: Callable, how: str) -> Callable:
    """`fn` itself ("eager") or its torch.compile'd form ("compiled"; one per function, kept for the process)."""
    return _compiled(fn) if how == "compiled" else fn
