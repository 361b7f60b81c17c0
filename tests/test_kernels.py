"""nn.kernels: where torch.compile keeps the kernels it builds."""

import os
from pathlib import Path

from nlpbench.nn import kernels


def test_the_compile_cache_is_the_users_cache_not_the_temp_directory():
    assert kernels.compile_cache_dir({"HOME": "/home/u"}) == "/home/u/.cache/nlpbench/torch-compile"
    assert kernels.compile_cache_dir({"HOME": "/home/u", "XDG_CACHE_HOME": "/c"}) == "/c/nlpbench/torch-compile"


def test_a_cache_the_user_set_is_kept_and_torchs_own_temp_default_is_not():
    env = {"HOME": "/home/u", "TORCHINDUCTOR_CACHE_DIR": "/fast/inductor"}
    kernels.use_compile_cache(env)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/fast/inductor"
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    env = {"HOME": "/home/u", "TORCHINDUCTOR_CACHE_DIR": default_cache_dir()}   # as torch sets it on loading
    kernels.use_compile_cache(env)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/home/u/.cache/nlpbench/torch-compile"


def test_compiling_uses_the_cache_directory(monkeypatch, tmp_path):
    """Set in the environment before torch.compile runs (inductor reads it there; Triton's cache follows it)."""
    import torch
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "")            # restored after the test, whatever it was
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    seen = {}

    def compile(fn):
        seen["dir"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        return fn
    monkeypatch.setattr(torch, "compile", compile)
    kernels._compiled.cache_clear()
    try:
        kernels.run_as(len, "compiled")
    finally:
        kernels._compiled.cache_clear()
    assert seen["dir"] == str(Path(tmp_path) / "nlpbench" / "torch-compile")
