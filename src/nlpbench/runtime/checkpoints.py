"""Torch files (checkpoints, trained models, prepared tensors): written atomically, read without running code.

Every family saves and loads its `.pt` files through `save` and `load`. `load` reads with torch's weights-only
unpickler: a file may hold tensors, torch generator states and plain Python data (dicts, lists, tuples, sets,
numbers, strings, None), nothing that names a function or class to call. What nlpbench writes is only that, so a
file that holds anything else did not come from nlpbench as it stands (a crafted file received with shared runs,
say): it is refused unread with LoadError, as is a damaged one. `save` reports a failed write (a full disk) as
io.OutputError naming the file.

torch is imported on first use, so that commands which train nothing start without it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from nlpbench.runtime import io

DEFAULT_REMEDY = ("delete it and let nlpbench write it again (a checkpoint: training starts afresh; a run's model: "
                  "train its group again), or put back a copy from a source you trust")


class LoadError(Exception):
    """A torch file that cannot be loaded safely (the message names the file, the reason and a remedy)."""

    def __init__(self, path: Path, reason: str, remedy: str = DEFAULT_REMEDY):
        super().__init__(f"cannot load {path}: {reason}; {remedy}")
        self.path = path


def load(path: str | os.PathLike, map_location: Any = None, remedy: str = DEFAULT_REMEDY) -> Any:
    """The contents of the torch file `path`, read with the weights-only unpickler (see the module's text);
    LoadError where it holds more than tensors and plain data, or cannot be read."""
    import pickle

    import torch

    path = Path(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise LoadError(path, _unpickling_reason(str(e)), remedy) from None
    except OSError as e:
        raise LoadError(path, e.strerror or str(e), remedy) from None
    except Exception as e:   # torch.load on arbitrary bytes fails in many ways (EOFError, RuntimeError, KeyError, ...)
        detail = str(e).split(". ")[0].strip()
        raise LoadError(path, f"not a readable torch file ({type(e).__name__}{': ' + detail if detail else ''})",
                        remedy) from None


def _unpickling_reason(message: str) -> str:
    """Why torch's weights-only unpickler refused a file, from its message: an object it may not build (what
    a crafted file holds), or bytes that are no pickle at all (a damaged file)."""
    if (what := re.search(r"GLOBAL (\S+)", message)) is not None:
        return (f"it holds a Python object ({what.group(1)}) other than tensors and plain data, which loading could "
                "run as code, so it was not loaded")
    detail = re.search(r"WeightsUnpickler error:\s*(.+)", message) or re.search(r"(.+)", message)
    return f"not a readable torch file ({detail.group(1).strip()})"


def save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save `obj` to `path` atomically; io.OutputError naming `path` where writing fails (a full disk)."""
    path = Path(path)
    with io.atomic_path(path) as tmp:
        write(obj, tmp, output=path)


def write(obj: Any, file: str | os.PathLike, output: str | os.PathLike | None = None) -> None:
    """torch.save `obj` into `file` (a temporary file of an atomic write of `output`, which errors name)."""
    import torch

    # torch is given a Python file rather than a name: its own C++ writer reports a failed write only as
    # "unexpected pos ...", while through a Python file the OSError (and its errno) survives.
    with open(file, "wb") as f:
        try:
            torch.save(obj, f)
        except RuntimeError as e:
            cause = _os_error_behind(e)
            if cause is None:
                raise
            raise io.OutputError(Path(output or file), cause) from e


def _os_error_behind(e: BaseException) -> OSError | None:
    """The OSError an exception was raised while handling (torch wraps a failed write of its writer so)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, OSError):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None
