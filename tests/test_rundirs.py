"""Every family has the same faces: settings -> training groups in its groups.py, the family interface in its
family.py, and every run directory from the one function of the core (nlpbench.runtime.rundirs.run_dir)."""

import io
import tokenize
from pathlib import Path

import pytest

from nlpbench import registry
from nlpbench.config import ConfigError
from nlpbench.runtime import rundirs

PACKAGE = Path(rundirs.__file__).resolve().parents[1]      # src/nlpbench
RUNS_NAMES = {"runs", "runs_root"}          # what the code calls the runs directory (Paths.runs, --runs)


def _family_packages() -> list[str]:
    return sorted({spec.split(":")[0].split(".")[1] for name, spec in registry.FAMILIES.items()
                   if name not in registry.MEASUREMENT})


@pytest.mark.parametrize("family", _family_packages())
def test_every_family_has_groups_and_family_modules(family):
    folder = PACKAGE / family
    assert (folder / "groups.py").is_file(), f"{family}: settings -> training groups belong in {family}/groups.py"
    assert (folder / "family.py").is_file()
    source = (folder / "family.py").read_text()
    assert f"nlpbench.{family}.groups" in source or f"from nlpbench.{family} import groups" in source, \
        f"{family}/family.py does not make its groups through {family}/groups.py"


def run_path_joins(source: str) -> list[tuple[int, str]]:
    """(line, what) for every place `source` builds a path under the runs directory itself: `runs_root / x`,
    `paths.runs / x`, `Path(runs_root) / x`, `Path(runs_root, x)`, `runs_root.joinpath(x)`, or a string literal
    that starts with `runs/` (an f-string included). Comments and names that merely contain 'runs' are not."""
    toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    found = []
    for i, t in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if t.type == tokenize.NAME and t.string in RUNS_NAMES and nxt is not None:
            if nxt.string == "/" or (nxt.string == "." and i + 2 < len(toks) and toks[i + 2].string == "joinpath"):
                found.append((t.start[0], f"{t.string} {nxt.string}"))
            # Path(runs_root) / x, Path(paths.runs) / x, Path(runs_root, x)
            if nxt.string in (")", ","):
                j = i                                   # back over `paths.` of `paths.runs`
                while j >= 2 and toks[j - 1].string == "." and toks[j - 2].type == tokenize.NAME:
                    j -= 2
                after = toks[i + 2].string if i + 2 < len(toks) else ""
                if j >= 2 and toks[j - 1].string == "(" and toks[j - 2].string == "Path" \
                        and (nxt.string == "," or after == "/"):
                    found.append((t.start[0], f"Path({t.string}{nxt.string}"))
        if t.type == tokenize.STRING:
            body = t.string.lstrip("rRbBfFuU").lstrip("'\"")
            if body.startswith("runs/"):
                found.append((t.start[0], t.string[:30]))
    return found


def test_the_scan_finds_each_way_of_joining_the_runs_directory():
    for line in ('p = runs_root / gid', 'p = paths.runs / "_bench"', 'p = Path(runs_root) / g / "x"',
                 'p = Path(args.runs) / g', 'p = Path(runs_root, gid)', 'p = runs_root.joinpath(gid)',
                 's = f"runs/{gid}/group.json"', "s = 'runs/textgen'"):
        assert run_path_joins(line + "\n"), line
    for line in ('n = len(tr.runs) / 2', 'x = runs_total / 2', '# runs_root / gid', 'p = rundirs.run_dir(runs_root, g)',
                 's = "the runs/ folder"', 'p = Path(data_root) / "squad"'):
        assert not run_path_joins(line + "\n"), line


def test_only_rundirs_joins_the_runs_directory_with_a_name():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "runtime" / "rundirs.py":
            continue
        for line, what in run_path_joins(path.read_text()):
            offenders.append(f"{path.relative_to(PACKAGE)}:{line}: {what}")
    assert not offenders, "run paths built outside nlpbench.runtime.rundirs (use rundirs.run_dir):\n" + "\n".join(offenders)


def test_run_dir_joins_the_names_of_a_run_id(tmp_path):
    assert rundirs.run_dir(tmp_path, "g-1/qa1-seed1") == tmp_path / "g-1" / "qa1-seed1"
    assert rundirs.run_dir("runs", "textgen/_embeddings") == Path("runs/textgen/_embeddings")
    assert str(rundirs.run_dir(rundirs.RUNS, "squad-x.y")) == "runs/squad-x.y"


@pytest.mark.parametrize("bad", ["", "..", "../escape", "g/../../etc", "/abs", "g//run", "g/", ".hidden", "-rf",
                                 "g/run seed", "g/$(rm)", "a\\b", None, 7])
def test_run_dir_rejects_a_bad_name(tmp_path, bad):
    with pytest.raises(ConfigError, match="run id"):
        rundirs.run_dir(tmp_path, bad)
