"""See et al.'s CNN/DM text preprocessing: lower-cased Stanford PTB tokens, missing periods fixed, sentences.

See et al. (abisee/cnn-dailymail make_datafiles.py [ext]; thesis §7.4.1) run CoreNLP's PTBTokenizer with
`-preserveLines` over each story, lower-case the result, add " ." to lines that lack a final punctuation mark
(`fix_missing_period`), and join the article lines into one token sequence.

`ptb_tokenize` runs that tokenizer from the CoreNLP 3.4.1 jar bundled in pycocoevalcap (Java, offline) without
pycocoevalcap's punctuation removal. Without Java it falls back to `regex_ptb_tokenize`, a documented
approximation (PTB splitting of punctuation, clitics and brackets to -lrb-/-rrb-), and says so in `backend`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

END_TOKENS = (".", "!", "?", "...", "'", "`", '"', "\u2019", "\u201d", ")")  # See et al.'s list
SENTENCE_END = {".", "!", "?"}
CLOSERS = {"''", "'", '"', "-rrb-", "\u2019", "\u201d"}


def _corenlp_jar() -> Path | None:
    try:
        from pycocoevalcap.tokenizer import ptbtokenizer
    except ImportError:
        return None
    jar = Path(ptbtokenizer.__file__).parent / "stanford-corenlp-3.4.1.jar"
    return jar if jar.is_file() else None


def java_available() -> bool:
    return shutil.which("java") is not None and _corenlp_jar() is not None


def corenlp_ptb_tokenize(lines: Sequence[str]) -> list[list[str]]:
    """One list of lower-cased PTB tokens per input line (CoreNLP PTBTokenizer, -preserveLines)."""
    jar = _corenlp_jar()
    if jar is None or shutil.which("java") is None:
        raise RuntimeError("CoreNLP PTBTokenizer needs Java and pycocoevalcap's stanford-corenlp-3.4.1.jar")
    clean = [" ".join(line.split()) for line in lines]  # newlines inside a line would shift the alignment
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write("\n".join(clean) + "\n")
        path = f.name
    try:
        out = subprocess.run(["java", "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines",
                              "-lowerCase", "-encoding", "utf-8", path],
                             capture_output=True, check=True, env={**os.environ, "LC_ALL": "C.UTF-8"})
    finally:
        os.unlink(path)
    result = out.stdout.decode("utf-8").split("\n")
    # -preserveLines keeps one output line per input line, but a blank input line yields a blank output line.
    result = result[: len(clean)]
    if len(result) != len(clean):
        raise RuntimeError(f"PTBTokenizer returned {len(result)} lines for {len(clean)}")
    return [r.split() for r in result]


_REGEX_RULES = [
    (re.compile(r"[\u201c\u201d]"), '"'), (re.compile(r"[\u2018\u2019]"), "'"),
    (re.compile(r'^"'), "`` "), (re.compile(r'(?<=[\s(\[{<])"'), " `` "), (re.compile(r'"'), " '' "),
    (re.compile(r"\("), " -lrb- "), (re.compile(r"\)"), " -rrb- "),
    (re.compile(r"\["), " -lsb- "), (re.compile(r"\]"), " -rsb- "),
    (re.compile(r"\{"), " -lcb- "), (re.compile(r"\}"), " -rcb- "),
    (re.compile(r"([,;:@#$%&?!])"), r" \1 "),
    (re.compile(r"\.\.\."), " ... "),
    (re.compile(r"([^.])\.\s*$"), r"\1 . "),                  # a final period
    (re.compile(r"((?:^|\s)[^\s.]+)\.(\s+)"), r"\1 .\2"),    # a period before a space (not in "u.s.")
    (re.compile(r"(?i)([a-z])('s|'m|'d|'ll|'re|'ve|n't)\b"), r"\1 \2"),
    (re.compile(r"(?<=\s)'(?!(?:s|m|d|ll|re|ve)\b)(?=\w)"), "` "), (re.compile(r"(?<=\w)'(?=\s|$)"), " '"),
    (re.compile(r"--"), " -- "),
]


def regex_ptb_tokenize(lines: Sequence[str]) -> list[list[str]]:
    """Approximate PTB tokenization without Java (lower-cased). Differs from CoreNLP on rare cases
    (abbreviations, numbers with periods, some quotes)."""
    out = []
    for line in lines:
        s = " ".join(line.split()).lower()
        for pattern, repl in _REGEX_RULES:
            s = pattern.sub(repl, s)
        out.append(s.split())
    return out


def ptb_tokenize(lines: Sequence[str], backend: str = "auto") -> tuple[list[list[str]], str]:
    """(tokens per line, backend used). backend: "corenlp", "regex" or "auto" (CoreNLP when Java is there)."""
    if backend == "auto":
        backend = "corenlp" if java_available() else "regex"
    if backend == "corenlp":
        return corenlp_ptb_tokenize(lines), backend
    if backend == "regex":
        return regex_ptb_tokenize(lines), backend
    raise ValueError(f"tokenizer backend {backend!r}: expected auto, corenlp or regex")


def fix_missing_period(tokens: list[str]) -> list[str]:
    """See et al.: a line not ending in an end token gets " ." (headlines, captions)."""
    if not tokens or tokens[-1] in END_TOKENS or tokens[-1] in ("''", "-rrb-"):
        return tokens
    return tokens + ["."]


def split_sentences(tokens: Sequence[str]) -> list[list[str]]:
    """Sentences of a token sequence: a sentence ends at ". ! ?" plus any closing quotes/brackets after it."""
    sents, cur = [], []
    i = 0
    while i < len(tokens):
        cur.append(tokens[i])
        if tokens[i] in SENTENCE_END:
            while i + 1 < len(tokens) and tokens[i + 1] in CLOSERS:
                i += 1
                cur.append(tokens[i])
            sents.append(cur)
            cur = []
        i += 1
    if cur:
        sents.append(cur)
    return sents


_WORDPUNCT = re.compile(r"\w+|[^\w\s]+")


def wordpunct_tokenize(text: str) -> list[str]:
    """The MSVD captions' tokenizer (thesis §7.4.2: NLTK's wordpunct, case kept): runs of word characters and runs of
    other non-space characters, the pattern NLTK's WordPunctTokenizer documents."""
    return _WORDPUNCT.findall(text)
