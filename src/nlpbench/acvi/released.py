"""Rows computable without training: lead-3 and the released system outputs of the CNN/DM mirror subset.

The mirror's 250 test articles carry the outputs of See et al.'s pointer-generator (`pgn`), a seq2seq baseline
(`s2s`) and three later systems. Scoring them with our metric code gives lead-3 and PG rows on 250 of the 11,490
test articles (not the full test set: say so in the table notes). METEOR is optional because it needs Java (and
the full mode loads a paraphrase table, ~20 s).
"""

from __future__ import annotations

import os
from pathlib import Path

from nlpbench.metrics.rouge import meteor, rouge_f1
from nlpbench.runtime.io import write_json

from .data import Article, lead_k, load_cnndm
from .rates import novel_word_rate


def _joined(sents: list[list[str]]) -> list[str]:
    return [" ".join(s) for s in sents]


def system_summaries(articles: list[Article], system: str) -> list[list[list[str]]]:
    if system == "lead3":
        return [lead_k(a, 3) for a in articles]
    return [a.systems[system] for a in articles]


def score_systems(articles: list[Article], systems: tuple[str, ...] = ("lead3", "pgn", "s2s"), *,
                  stem: bool = False, with_meteor: bool = False) -> dict:
    """{system: {rouge1, rouge2, rougeL, [meteor_exact, meteor_full], novel_word_rate, n}} (x100)."""
    refs = [_joined(a.reference) for a in articles]
    sources = [a.article_tokens for a in articles]
    out = {}
    for name in systems:
        summaries = system_summaries(articles, name)
        row = rouge_f1([_joined(s) for s in summaries], refs, stem=stem)
        flat = [[t for s in summ for t in s] for summ in summaries]
        row["novel_word_rate"] = novel_word_rate(flat, sources)
        if with_meteor:
            hyps = [" ".join(t) for t in flat]
            ref_sets = [[" ".join(r)] for r in refs]
            row["meteor_exact"] = 100.0 * meteor(hyps, ref_sets, mode="exact")
            row["meteor_full"] = 100.0 * meteor(hyps, ref_sets, mode="full")
        out[name] = row
    return out


def score_mirror(out_path: str | os.PathLike, mirror: str | os.PathLike | None = None, *, stem: bool = False,
                 with_meteor: bool = True, tokenizer: str = "auto") -> dict:
    """Load, verify, tokenise and score; write the result JSON atomically."""
    articles, backend = load_cnndm(mirror, tokenizer)
    result = {"scores": score_systems(articles, ("lead3", "pgn", "s2s"), stem=stem, with_meteor=with_meteor),
              "n_articles": len(articles), "tokenizer": backend, "rouge_stemming": stem,
              "note": "250-article mirror subset of the CNN/DM test set (artidoro/frank), not the full 11,490"}
    write_json(Path(out_path), result)
    return result
