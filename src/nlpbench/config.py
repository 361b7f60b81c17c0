"""params.yaml and the declarations: loading, overrides, scales, validation.

The core knows no family. A family's settings live under its own top-level key of params.yaml (`memnet:`, `dmn:`,
...). Every table and every other output has one home, `pipeline/tables/<source>/<name>.yaml` or
`pipeline/outputs/<source>/<name>.yaml` beside params.yaml (the paper's numbers beside it as `<name>.paper.csv`),
and names the family that fills it (src/nlpbench/registry.py); `load` assembles them as `tables.<source>.<name>`
and `outputs.<source>.<name>`, so a dotted override reaches them like any setting. A home's `by_scale:` holds its
own keys at other scales (a key the home lacks may be added there; the schema checks it). What a family needs beyond the schema it checks itself (`Family.check`, run by
nlpbench.registry.load). An error names the file that sets the key and the key inside it (`where`): a
declaration's key its home, any other key params.yaml.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA = Path(__file__).with_name("schema") / "params.schema.yaml"


class ConfigError(ValueError):
    """A bad params.yaml or home: the message names the file and the key inside it (`where`)."""


@functools.cache
def _schema() -> dict:
    return yaml.safe_load(SCHEMA.read_text())


def name_pattern() -> str:
    """The one pattern of every name that becomes a file name or a word of a command (the schema's `name`)."""
    return _schema()["$defs"]["name"]["pattern"]


NAME_RULE = "letters, digits, '.', '_' and '-', not starting with '.' or '-' and without '..'"


def check_name(name: str, what: str) -> None:
    """A ConfigError naming `what` unless `name` is a valid name (see name_pattern)."""
    if not isinstance(name, str) or not re.fullmatch(name_pattern(), name):
        raise ConfigError(f"{what}: {name!r} is not a valid name ({NAME_RULE}): it names files and is passed "
                          "to commands")


# a value as an error line shows it: the first items of a long or deep list, at most SHOWN_CHARACTERS in all
_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 40
_SHOWN.maxlist = _SHOWN.maxdict = 4
_SHOWN.maxlevel = 2
SHOWN_CHARACTERS = 160


def _shown(value: Any) -> str:
    text = _SHOWN.repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS - 3] + "..."


def _error_line(e: jsonschema.ValidationError, key: str) -> str:
    """One schema error, `key` (inside the file the message names) first."""
    key = key or "(top level)"
    # a bad key of a mapping: the error's path stops at the mapping, and the key is the instance
    what = "key " if "propertyNames" in e.schema_path else ""
    shown = _shown(e.instance)
    if e.validator == "pattern" and e.validator_value == name_pattern():
        return f"  {key}: {what}{shown} is not a valid name ({NAME_RULE})"
    return f"  {key}: {what}{e.message.replace(repr(e.instance), shown)}"


# What one YAML text or one override may hold: values once its aliases are expanded (params.yaml and every home
# together hold about 6,600) and levels of nesting (they use 8). A text beyond either would take Python minutes,
# or its call stack, to walk (an alias bomb: nine lists of nine aliases of the list before), so it is refused.
MAX_VALUES = 100_000
MAX_DEPTH = 50


def read_yaml(text: str, where: str, what: str = "not valid YAML") -> Any:
    """yaml.safe_load, with an error that names `where` and says what is wrong and at which line and column; a
    text beyond MAX_VALUES or MAX_DEPTH is refused likewise (check_yaml_size)."""
    try:
        check_yaml_size(text, where)
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        at = [f"line {mark.line + 1}, column {mark.column + 1}"] if mark else []
        context = [e.context] if getattr(e, "context", None) else []
        detail = f" ({'; '.join(at + context)})" if at or context else ""
        raise ConfigError(f"{where}: {what}: {problem}{detail}") from None


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)     # yaml.safe_load in libyaml where PyYAML has it


def check_yaml_size(text: str, where: str) -> None:
    """A ConfigError naming `where` and the line unless the YAML `text` stays within MAX_VALUES values, its
    aliases expanded, and MAX_DEPTH levels, or if an alias lies inside its own anchor (a value that holds itself).
    Read from the parser's events, before any value is built; a YAML error is raised as PyYAML words it."""
    try:
        _check_events(yaml.parse(text, Loader=_FAST_LOADER), where)
    except yaml.YAMLError:      # libyaml words its errors otherwise, and stops at a depth of its own: read again
        _check_events(yaml.parse(text, Loader=yaml.SafeLoader), where)


def _check_events(events, where: str) -> None:
    """check_yaml_size over a parser's events: an alias counts the values of its anchor's whole node."""
    expanded: dict[str, int] = {}        # anchor -> the values under it, its own aliases expanded
    open_: list[tuple[str | None, int]] = []     # the collections entered: (anchor, values before it)
    values = 0
    for event in events:
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, before = open_.pop()
            if anchor is not None:
                expanded[anchor] = values - before
            continue
        if not isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
            continue
        at = f"line {event.start_mark.line + 1}"
        if isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in open_):
                raise ConfigError(f"{where}: the alias *{event.anchor} ({at}) lies inside its own anchor: "
                                  "a value that holds itself")
            values += expanded.get(event.anchor, 1)      # an unknown anchor: yaml.safe_load names it
        else:
            values += 1
            if isinstance(event, yaml.CollectionStartEvent):
                open_.append((event.anchor, values - 1))
                if len(open_) > MAX_DEPTH:
                    raise ConfigError(f"{where}: nested more than {MAX_DEPTH} levels deep ({at})")
            elif event.anchor is not None:
                expanded[event.anchor] = 1
        if values > MAX_VALUES:
            raise ConfigError(f"{where}: more than {MAX_VALUES:,} values once its aliases are expanded ({at}): "
                              "write the values out, or fewer of them")


def check_value_size(value: Any, where: str) -> None:
    """check_yaml_size for a value already read (Snakemake's --config, which it reads itself): a ConfigError naming
    `where` beyond MAX_VALUES values (a shared list counted as often as it occurs) or MAX_DEPTH levels."""
    values, todo = 1, [(value, 1)]
    while todo:
        node, depth = todo.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise ConfigError(f"{where}: nested more than {MAX_DEPTH} levels deep")
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        values += len(children)
        if values > MAX_VALUES:
            raise ConfigError(f"{where}: more than {MAX_VALUES:,} values once its aliases are expanded: write the "
                              "values out, or fewer of them")
        todo.extend((child, depth + 1) for child in children)


# a number as YAML 1.2 writes it; PyYAML (YAML 1.1) reads some, such as `1e-2` or `5E3`, as text
_NUMBER = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?")


def _as_number(text: str) -> int | float:
    return int(text) if re.fullmatch(r"[-+]?[0-9]+", text) else float(text)


def _numbers_written_as_text(errors) -> dict[tuple, int | float]:
    """{path: number} for every value the schema wants as a number that was given as the text of one (`lr: 1e-2`,
    which YAML 1.1 reads as a string): what the user meant. Any other text stays an error."""
    out = {}
    for e in errors:
        wanted = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        if e.validator == "type" and "number" in wanted and isinstance(e.instance, str) \
                and _NUMBER.fullmatch(e.instance.strip()):
            out[tuple(e.absolute_path)] = _as_number(e.instance.strip())
        out.update(_numbers_written_as_text(e.context or []))      # the branches of a oneOf / anyOf
    return out


def _set_path(node, path: tuple, value) -> None:
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _validate(params: dict, files: dict, context: str = "") -> None:
    """Validate `params` against the schema; a number written as text where the schema wants a number is read as
    that number in place (see _numbers_written_as_text). Each error names the file that sets its key (a
    declaration's home, or params.yaml) and the key inside it (home_and_key); `context` follows the file's name."""
    validator = jsonschema.Draft202012Validator(_schema())
    errors = list(validator.iter_errors(params))
    numbers = _numbers_written_as_text(errors)
    if numbers:
        for path, value in numbers.items():
            _set_path(params, path, value)
        errors = list(validator.iter_errors(params))
    errors.sort(key=lambda e: list(map(str, e.path)))
    if errors:
        shown = [(_home_and_key(files, ".".join(str(p) for p in e.path)), e) for e in errors[:10]]
        named = {file for (file, _), _ in shown}
        head = named.pop() if len(named) == 1 else _params_file(files)
        lines = [_error_line(e, key if file == head else f"{file}: {key or '(top level)'}")
                 for (file, key), e in shown]
        raise ConfigError(f"{head}{context}: invalid parameters\n" + "\n".join(lines))


def _split_key(node: dict, parts: list[str]) -> tuple[str, list[str]] | None:
    """The longest run of leading parts that names a key of `node` ('4.2' is one key, not two)."""
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in node:
            return key, parts[n:]
    return None


def set_dotted(cfg: dict, dotted: str, value: Any, where: str) -> None:
    """cfg['a']['b'] = value for 'a.b'; the key must already exist (a typo is an error, not a new key). Keys that
    hold a dot themselves (a table named '4.2') are matched whole: 'tables.bahuleyan-thesis.4.2.notes'."""
    node, parts, done = cfg, dotted.split("."), []
    while True:
        found = _split_key(node, parts) if isinstance(node, dict) else None
        if found is None:
            missing = ".".join(done + parts[:1])
            raise ConfigError(f"{where}: unknown key {dotted!r} (no {missing!r} in params.yaml)")
        key, parts = found
        done.append(key)
        if not parts:
            node[key] = value
            return
        node = node[key]


# Keys whose value is a mapping that an override replaces whole (a declaration's or a scale's overrides, a game's
# ranges, a table's columns), rather than a path to descend into.
SETTABLE_MAPPINGS_SUFFIXES = ("overrides", "ranges", "transcript", "flag", "columns", "rows")


def _is_whole_mapping(params: dict, dotted: str) -> bool:
    """True when `dotted` names a mapping meant to be set whole: one of the kinds above, or an empty one (a slot
    such as dmn.train_overrides.tasks, whose keys do not exist until set)."""
    return dotted.rsplit(".", 1)[-1] in SETTABLE_MAPPINGS_SUFFIXES or _lookup(params, dotted) == {}


def _flatten_against(params: dict, overrides: dict, overrides_from: str, prefix: str = "") -> dict:
    """Flatten nested overrides, descending a mapping only where params has a mapping that is not set whole."""
    out = {}
    for key, value in overrides.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and not _is_whole_mapping(params, name) \
                and isinstance(_lookup(params, name), dict):
            out.update(_flatten_against(params, value, overrides_from, f"{name}."))
        else:
            out[name] = _typed(value, f"{overrides_from} {name}")
    return out


def _typed(value: Any, where: str) -> Any:
    """Snakemake hands the leaves of a nested --config value over as strings ('0.01'): read a string as YAML
    when it reads as a number, a boolean, null or a list, and keep any other string as it is (a string beyond
    the size check_yaml_size allows is refused, naming `where`)."""
    if isinstance(value, list):
        return [_typed(v, where) for v in value]
    if isinstance(value, dict):
        return {k: _typed(v, where) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    try:
        check_yaml_size(value, where)
        parsed = yaml.load(value, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        return value
    return parsed if parsed is None or isinstance(parsed, (bool, int, float, list)) else value


def _lookup(params: dict, dotted: str):
    node, parts = params, dotted.split(".")
    while parts:
        found = _split_key(node, parts) if isinstance(node, dict) else None
        if found is None:
            return None
        key, parts = found
        node = node[key]
    return node


def resolve_scale(params: dict, where: str) -> str:
    """`scale: auto` follows the planned device (provenance.planned_device): the documents' settings for a GPU, the
    cpu scale for a CPU."""
    scale = params["scale"]
    if scale == "auto":
        from nlpbench.runtime.provenance import planned_device
        scale = "paper" if planned_device(params["device"]) == "cuda" else "cpu"
    if scale not in params["scales"]:
        raise ConfigError(f"{where}: scale: unknown scale {scale!r} (known: auto, {', '.join(params['scales'])})")
    return scale


RESULTS = Path("results")     # the committed scale's tables, in git


def results_dir(params: dict) -> Path:
    """Where the chosen scale's tables, outputs, index and job costs go: results/ for the committed scale
    (`committed_scale`, in git), results/<scale>/ for any other, so that a trial (the smoke scale, a paper-scale
    run on a cluster) never rewrites the committed tables. The folder of a trial ignores itself in git
    (make_results_dir)."""
    scale = params["scale"]
    if scale == params["committed_scale"]:
        return RESULTS
    check_name(scale, "scale")
    return RESULTS / scale


def make_results_dir(results: Path) -> Path:
    """`results` made where absent; a trial scale's folder (one under results/) gets a .gitignore of its own
    that keeps all of it out of git."""
    results.mkdir(parents=True, exist_ok=True)
    if results.resolve().parent == RESULTS.resolve():
        ignore = results / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# a trial scale's results (params.yaml committed_scale): not in git\n*\n")
    return results


SECTIONS = ("tables", "outputs")     # the declarations, one home each under pipeline/<section>/<source>/<name>.yaml
BY_SCALE = "by_scale"                # a home's own keys at other scales


def homes_dir(params_path: str | Path) -> Path:
    """pipeline/ beside params.yaml: where the declarations live."""
    return Path(params_path).parent / "pipeline"


def _read_homes(params: dict, path: Path) -> dict[tuple[str, str, str], tuple[Path, dict]]:
    """Put every home under pipeline/ into params (tables.<source>.<name>, outputs.<source>.<name>), sources and
    names in natural order; returns (section, source, name) -> (its file, its by_scale mapping)."""
    found = {}
    root = homes_dir(path)
    for section in SECTIONS:
        folder = root / section
        files = sorted(folder.glob("*/*.yaml"), key=lambda f: (f.parent.name, _natural(f.stem))) \
            if folder.is_dir() else []
        for file in files:
            source, name = file.parent.name, file.stem
            check_name(source, f"{file}: the folder")
            check_name(name, f"{file}: the file name")
            decl = read_yaml(file.read_text(encoding="utf-8"), str(file))
            if not isinstance(decl, dict):
                raise ConfigError(f"{file}: expected a mapping of the declaration's keys (family, rows, columns, ...)")
            by_scale = decl.pop(BY_SCALE, None) or {}
            if not isinstance(by_scale, dict) or not all(isinstance(v, dict) for v in by_scale.values()):
                raise ConfigError(f"{file}: {BY_SCALE}: expected scale -> mapping of this declaration's keys")
            items = params.setdefault(section, {}).setdefault(source, {})
            if name in items:
                raise ConfigError(f"{file}: {section}.{source}.{name} is also declared in {path}; keep one home")
            items[name] = decl
            found[(section, source, name)] = (file, by_scale)
    for section in SECTIONS:                # a declaration written inside params.yaml may hold its by_scale too
        for source, items in (params.get(section) or {}).items():
            for name, decl in (items or {}).items():
                if (section, source, name) not in found and isinstance(decl, dict) and BY_SCALE in decl:
                    found[(section, source, name)] = (path, decl.pop(BY_SCALE) or {})
    return found


def _natural(name: str) -> list:
    """'2' < '2-layerwise' < '10' < 'pilot-task15': numbers by value, then text."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", name) if p]


FILES = "files"     # the key load() adds to params: where params.yaml and each home were read (home_and_key)


def _files(path: Path, homes: dict) -> dict:
    """params[FILES]: {"params": params.yaml's path, "homes": {"tables.<source>.<name>": its home's path, ...}}."""
    return {"params": str(path),
            "homes": {".".join(k): str(file) for k, (file, _) in homes.items() if Path(file) != path}}


def _params_file(files: dict) -> str:
    return files.get("params") or "params.yaml"


def _home_and_key(files: dict, key: str) -> tuple[str, str]:
    homes = files.get("homes") or {}
    parts = key.split(".")
    for n in range(len(parts), 2, -1):         # the longest declaration that the key lies in ('4.2' before '4')
        declaration_key = ".".join(parts[:n])
        if declaration_key in homes:
            return homes[declaration_key], ".".join(parts[n:])
    return _params_file(files), key


def home_and_key(params: dict, key: str) -> tuple[str, str]:
    """The file that sets the dotted `key` of loaded params, and the key inside that file: a declaration's key
    (tables.<source>.<name>.<key...>, outputs.<source>.<name>.<key...>) lies in its home,
    pipeline/<section>/<source>/<name>.yaml, as <key...> ('' for the declaration itself); any other key, and a
    declaration written in params.yaml, lies in params.yaml as it is."""
    return _home_and_key(params.get(FILES) or {}, key)


def where(params: dict, key: str) -> str:
    """`file: key` for an error about the dotted `key` of loaded params (home_and_key); the file alone for a
    declaration's home as a whole."""
    return _where(home_and_key(params, key))


def _where(file_and_key: tuple[str, str]) -> str:
    file, key = file_and_key
    return f"{file}: {key}" if key else file


def load(path: str | Path = "params.yaml", overrides: dict | None = None, overrides_from: str = "override") -> dict:
    """Read params.yaml and the declarations' homes, apply the chosen scale (params.yaml's `scales:`, then each
    home's `by_scale:`), then the user's `overrides` (Snakemake's --config, `--set`, overrides.yaml: dotted keys or
    nested mappings); validate. The families' own checks are nlpbench.registry.load's.

    A value the user sets wins over the scale's (and is validated as any other). An override beyond the size
    check_value_size allows is refused first, named `<overrides_from> <key>` (the Snakefile: `--config KEY`)."""
    for key, value in (overrides or {}).items():
        check_value_size(value, f"{overrides_from} {key}")
    path = Path(path)
    params = read_yaml(path.read_text(), str(path))
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    homes = _read_homes(params, path)
    files = _files(path, homes)
    _validate(params, files)
    params = copy.deepcopy(params)
    user = _flatten_against(params, overrides or {}, overrides_from)
    if "scale" in user:
        params["scale"] = user.pop("scale")
    if "device" in user:
        params["device"] = user.pop("device")
    scale = resolve_scale(params, str(path))
    params["scale"] = scale
    if params["committed_scale"] not in params["scales"]:
        raise ConfigError(f"{path}: committed_scale: unknown scale {params['committed_scale']!r} "
                          f"(known: {', '.join(params['scales'])})")
    for key, value in params["scales"][scale].items():
        set_dotted(params, key, value, f"{path}: scales.{scale}")
    for (section, source, name), (file, by_scale) in homes.items():
        unknown = set(by_scale) - set(params["scales"])
        if unknown:
            raise ConfigError(f"{file}: {BY_SCALE}: unknown scale {sorted(unknown)[0]!r} "
                              f"(known: {', '.join(params['scales'])})")
        decl = params[section][source][name]
        for key, value in (by_scale.get(scale) or {}).items():
            if "." not in key and key not in decl:     # a key of the home's own that only this scale sets (say
                decl[key] = value                       # not_comparable): the schema, checked below, names a typo
            else:
                set_dotted(params, f"{section}.{source}.{name}.{key}", value, f"{file}: {BY_SCALE}.{scale}")
    for key, value in user.items():
        set_dotted(params, key, value, f"{path} (override)")
    _validate(params, files, f" (scale {scale}, with overrides)" if user else f" (scale {scale})")
    params[FILES] = files
    return params


# -- declarations: one shape for every table and output ---------------------------------------------------

@dataclass(frozen=True)
class Declared:
    """One table or output of params.yaml: tables.<source>.<name> or outputs.<source>.<name>."""

    section: str        # "tables" | "outputs"
    source: str
    name: str
    decl: dict
    files: dict = field(default_factory=dict, compare=False, repr=False)    # params[FILES]: where it was read

    @property
    def family(self) -> str:
        return self.decl["family"]

    @property
    def where(self) -> str:
        return f"{self.section}.{self.source}.{self.name}"

    def at(self, key: str = "") -> str:
        """`home: key` for an error about the declaration's `key` (dotted, '' for the whole): see home_and_key."""
        return _where(_home_and_key(self.files, f"{self.where}.{key}" if key else self.where))


def declared(params: dict, section: str, family: str | None = None) -> list[Declared]:
    """Every declaration of `section` ("tables" or "outputs"), in file order, optionally of one family."""
    files = params.get(FILES) or {}
    return [Declared(section, source, name, decl, files)
            for source, items in (params.get(section) or {}).items()
            for name, decl in items.items() if family is None or decl["family"] == family]


def declaration(params: dict, section: str, source: str, name: str) -> Declared:
    """One declaration, or a ConfigError that lists what exists."""
    items = (params.get(section) or {}).get(source)
    files = params.get(FILES) or {}
    if items is None or name not in items:
        known = ", ".join(f"{d.source} {d.name}" for d in declared(params, section))
        home = homes_dir(_params_file(files)) / section / source / f"{name}.yaml"
        raise ConfigError(f"{section}: no {source!r} {name!r}: {home} does not exist (known: {known})")
    return Declared(section, source, name, items[name], files)


# -- ids ----------------------------------------------------------------------------------------------------

def digest(obj: Any) -> str:
    """sha256 prefix of a JSON-able description: what makes a run id change when a setting changes."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:10]


def drop_neutral(settings: dict, neutral: dict) -> dict:
    """A copy of `settings` without the keys that hold their neutral value ({(section, key): value}).

    A setting added after runs existed is left out of their ids while it holds the value that reproduces the
    old behaviour, so the ids (and checkpoints) of earlier runs stay valid."""
    out = copy.deepcopy(settings)
    for (section, key), value in neutral.items():
        sec = out.get(section)
        if isinstance(sec, dict) and key in sec and sec[key] == value:
            del sec[key]
    return out
