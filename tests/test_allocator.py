"""allocator.keep_freed_memory: the memory a step's large tensors freed stays in the process's heap for the next
step, instead of going back to the kernel, which must fault it in and zero it again (checked with glibc's own
accounting, not timed)."""

import subprocess
import sys

import pytest

STEP = """
import ctypes, sys, torch
from nlpbench.runtime.allocator import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
if not hasattr(libc, "mallinfo2"):                            # glibc < 2.33: nothing to read the heap with
    print("unknown 0 0")
    sys.exit()
libc.mallinfo2.restype = MallInfo2
kept = keep_freed_memory() if sys.argv[1] == "keep" else False
info = libc.mallinfo2
mapped, heap = info().hblkhd, info().arena
t = torch.ones(4 << 20)                                       # a step's 16 MiB tensor, the process's first
mapped_alive = info().hblkhd - mapped                         # served by a fresh mmap?
del t
heap_after = info().arena - heap                              # its memory still the process's after the free?
print(kept, mapped_alive, heap_after)
"""


def _tensor_memory(mode: str) -> tuple[str, int, int]:
    out = subprocess.run([sys.executable, "-c", STEP, mode], capture_output=True, text=True, check=True).stdout
    kept, mapped_alive, heap_after = out.split()
    return kept, int(mapped_alive), int(heap_after)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and mallinfo2")
def test_a_large_tensor_comes_from_the_heap_and_stays_there_when_freed():
    kept, mapped_alive, heap_after = _tensor_memory("keep")
    if kept != "True":
        pytest.skip("not glibc >= 2.33: mallopt or mallinfo2 missing")
    assert mapped_alive == 0                 # not a fresh mmap ...
    assert heap_after >= 16 << 20            # ... and kept after the free, for the next step
    _, mapped_alive, _ = _tensor_memory("default")
    assert mapped_alive >= 16 << 20          # glibc's default: its own mmap, unmapped (and faulted in anew) each time


def test_keep_freed_memory_is_set_by_the_commands_that_train(monkeypatch):
    from nlpbench import cli
    from nlpbench.runtime import allocator
    calls = []
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda: calls.append(1) or True)

    class Args:
        threads = 0
    cli._threads(Args())
    assert calls == [1]
