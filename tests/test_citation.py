"""LICENSE and CITATION.cff: the code's licence, and a CFF 1.2.0 file that cites the software and the five documents."""

import os
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
# the source documents beside the offline data mirror (conftest.py's mirror_dir: $NLPBENCH_MIRROR, else ../shared/data)
SEEDS = Path(os.environ.get("NLPBENCH_MIRROR") or REPO.parent / "shared" / "data").parent / "seeds"


def test_license_is_mit():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


def test_citation_cff_has_the_required_keys_and_the_five_documents():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"authors", "cff-version", "message", "title"} <= set(cff)
    assert cff["type"] == "software" and cff["license"] == "MIT" and isinstance(cff["version"], str)
    refs = cff["references"]
    assert len(refs) == 5
    for ref in refs:
        assert {"type", "title", "authors"} <= set(ref), ref
        assert ref["authors"] and all("family-names" in a or "name" in a for a in ref["authors"]), ref
        assert not isinstance(ref.get("year", 0), bool) and isinstance(ref.get("year", 0), int), ref
    kinds = sorted(ref["type"] for ref in refs)
    assert kinds == ["article", "slides", "thesis", "thesis", "thesis"]
    if SEEDS.is_dir():                       # each title as the document's own title page gives it
        pages = " ".join(" ".join(p.read_text(errors="replace")[:3000].split()).lower() for p in SEEDS.glob("*.txt"))
        missing = [ref["title"] for ref in refs if ref["title"].lower() not in pages]
        assert not missing, f"CITATION.cff: titles not on a seed's title page: {missing}"


def test_package_metadata_matches_the_citation():
    """pyproject.toml's licence, authors and version are CITATION.cff's (a package index shows the former)."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert project["license"] == {"text": cff["license"]}
    assert [a["name"] for a in project["authors"]] == [a["name"] for a in cff["authors"]]
    assert project["version"] == str(cff["version"])
    assert (REPO / project["readme"]).is_file()
