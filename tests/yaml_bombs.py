"""YAML that is small to write and too big or too deep to walk: what the configuration readers must refuse."""


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """`levels` anchored lists of `width` aliases of the list before (9 x 9: 9**9 values once expanded), as lines of
    a YAML mapping (keys l0, l1, ...): the one at line `levels` expands the most."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def alias_bomb_value(levels: int = 9, width: int = 9) -> str:
    """The same as one flow value, for --set and --config."""
    parts = [f"&a0 [{', '.join(['lol'] * width)}]"]
    parts += [f"&a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


DEEP = "[" * 10_000 + "]" * 10_000
