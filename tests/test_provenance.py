"""Where a result came from: commit, device."""

import pytest
import torch

from nlpbench.runtime import provenance


def test_code_commit_names_head_or_the_commit_a_copied_tree_declares(monkeypatch):
    monkeypatch.delenv("NLPBENCH_CODE_COMMIT", raising=False)
    head = provenance.code_commit()                              # "unknown" where CI checks out without .git
    assert head == "unknown" or len(head.split("+")[0]) >= 7
    monkeypatch.setenv("NLPBENCH_CODE_COMMIT", "abc1234")        # a tree copied without its .git
    assert provenance.code_commit() == "abc1234"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_without_a_gpu_is_a_clear_error():
    assert provenance.resolve_device("auto") == "cpu"
    with pytest.raises(RuntimeError, match="device: cuda"):
        provenance.resolve_device("cuda")


def test_the_code_commit_is_the_one_the_process_started_from(monkeypatch):
    """A commit made while a group trains must not relabel its runs: the first answer of a process stands."""
    monkeypatch.delenv("NLPBENCH_CODE_COMMIT", raising=False)
    monkeypatch.setattr(provenance, "_COMMIT_AT_START", None)
    heads = iter(["aaaaaaa", "bbbbbbb"])
    monkeypatch.setattr(provenance, "_head_commit", lambda: next(heads))
    assert provenance.code_commit() == "aaaaaaa"               # at start (the CLI asks before running a command)
    assert provenance.code_commit() == "aaaaaaa"               # later, after HEAD moved on


def test_a_cpu_label_names_the_vector_instructions_of_torchs_kernels(monkeypatch):
    """Two CPUs whose torch kernels use other instructions (AVX2, AVX512) train other numbers: a table says which."""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert provenance.device_label("cpu", 1).endswith(", AVX2, 1 threads)")
