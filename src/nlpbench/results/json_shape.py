"""Checks that a JSON document read back (a table's sidecar) has the keys and kinds of value its writer gave it:
the first that does not is an InputError naming the file and the key, on one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nlpbench.runtime.io import InputError

NUMBER = (int, float)
KIND_NAMES = {str: "text", list: "a list", dict: "a mapping", int: "a whole number", float: "a number",
              bool: "true or false", type(None): "null"}


def _is(value: Any, kinds: type | tuple[type, ...]) -> bool:
    """isinstance, except that true and false are not numbers (JSON keeps them apart)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


def _names(kinds: type | tuple[type, ...]) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    names = dict.fromkeys("a number" if k in NUMBER else KIND_NAMES.get(k, k.__name__) for k in kinds)
    return " or ".join(names)


class Checker:
    """The checks of one file; `remedy` says what to do about a file that fails them."""

    def __init__(self, path: str | Path, remedy: str):
        self.path, self.remedy = Path(path), remedy

    def fail(self, key: str, problem: str) -> None:
        where = f"{self.path}: {key}" if key else str(self.path)
        raise InputError(f"{where}: {problem}; {self.remedy}")

    def value(self, value: Any, key: str, kinds: type | tuple[type, ...]) -> None:
        if not _is(value, kinds):
            self.fail(key, f"expected {_names(kinds)}, found {value!r:.60}")

    def mapping(self, value: Any, key: str, required: dict[str, Any], optional: dict[str, Any] | None = None) -> None:
        """`value` is a mapping holding every key of `required` and, where present, those of `optional`, each of
        its kinds."""
        self.value(value, key or "the document", dict)
        for name, kinds in required.items():
            if name not in value:
                self.fail(f"{key}.{name}" if key else name, "missing")
        for name, kinds in {**required, **(optional or {})}.items():
            if name in value:
                self.value(value[name], f"{key}.{name}" if key else name, kinds)

    def items(self, value: list, key: str, kinds: type | tuple[type, ...]) -> None:
        for i, item in enumerate(value):
            self.value(item, f"{key}[{i}]", kinds)
