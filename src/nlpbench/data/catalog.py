"""Every file the paper scale downloads: where it comes from, how big it is, how it is verified, where a mirror holds
it, which tables need it and its licence as the source states it. The data steps take their URLs and checksums from
here, docs/data.md's table is rendered from here (`python -m nlpbench.data.catalog`), and a test compares both with
the offline mirror's README.

Checksums, strongest first: `sha256` as the source (or its maintained copy) publishes it; `git_sha1`, the git blob
SHA-1 of a file a git repository serves (`git hash-object FILE`, read from the repository's tree); `lfs_pointer`, the
URL of the git-LFS pointer the Hugging Face Hub serves for a file (its `oid sha256:` line is the file's sha256),
fetched before the download. `how` says where each recorded checksum was read.
"""

from __future__ import annotations

from dataclasses import dataclass

HF_CNNDM = "https://huggingface.co/datasets/abisee/cnn_dailymail"
HF_CNNDM_REVISION = "main"      # the parquet files "Add 3.0.0 data files" (Hub commit 3adf624) added


@dataclass(frozen=True)
class RemoteFile:
    """One downloadable file of a data set."""

    key: str                    # short name, e.g. "squad-train"
    dataset: str                # the data set it belongs to (one docs/data.md row per data set)
    url: str
    bytes: int | None           # as the source documents it; None: not published (see size_note)
    sha256: str = ""
    git_sha1: str = ""
    lfs_pointer: str = ""       # URL of the Hub's git-LFS pointer of this file
    how: str = ""               # where the checksum (and size) were read
    mirror: str = ""            # path inside a mirror directory ($NLPBENCH_MIRROR) that may hold this file
    size_note: str = ""         # "" when `bytes` is the documented size; else how the size was estimated
    approx_bytes: int | None = None

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    def checksum(self) -> str:
        """The recorded checksum as "<kind>:<hex>", or the LFS pointer to read it from."""
        if self.sha256:
            return f"sha256:{self.sha256}"
        if self.git_sha1:
            return f"git-sha1:{self.git_sha1}"
        return f"lfs-pointer:{self.lfs_pointer}" if self.lfs_pointer else "none"


@dataclass(frozen=True)
class Dataset:
    name: str
    source: str                 # the page that describes it
    licence: str                # as the source states it
    tables: str                 # the tables that need it
    step: str                   # the data step that fetches it (`nlpbench data <step>`)


def _cnndm(split: str, shard: str, sha256: str, size: int | None, approx: int | None = None) -> RemoteFile:
    path = f"3.0.0/{split}-{shard}.parquet"
    return RemoteFile(
        f"cnndm-{split}-{shard}" if split == "train" else f"cnndm-{split}", "cnndm",
        f"{HF_CNNDM}/resolve/{HF_CNNDM_REVISION}/{path}", size, sha256=sha256,
        lfs_pointer=f"{HF_CNNDM}/raw/{HF_CNNDM_REVISION}/{path}",
        how=("sha256: the Hub's git-LFS details of the file (commit 3adf624, 'Add 3.0.0 data files')" if sha256 else
             "sha256: read from the Hub's git-LFS pointer of the file when it is downloaded"),
        mirror=f"cnn_dm/hf-abisee-cnn_dailymail/{path}",
        size_note="as the Hub lists it (rounded)" if sha256 else
        "not listed where we could read it: about the size of the third training shard", approx_bytes=approx)


FILES: tuple[RemoteFile, ...] = (
    RemoteFile("squad-train", "squad", "https://rajpurkar.github.io/SQuAD-explorer/dataset/train-v1.1.json",
               None, git_sha1="77f1d9a7daee11f7bc293832020f7709f63410ad",
               how="git blob SHA-1 in rajpurkar/SQuAD-explorer's tree (dataset/train-v1.1.json); size: the Hugging "
                   "Face squad card's download size less the dev file's",
               mirror="squad/train-v1.1.json", approx_bytes=30_288_272,
               size_note="the Hugging Face squad card's download size less the dev file's, not re-read here"),
    RemoteFile("squad-dev", "squad", "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json",
               None, git_sha1="e9a3f913ad1468ebe105b891334ca7b0bc0e2510",
               how="git blob SHA-1 in rajpurkar/SQuAD-explorer's tree (dataset/dev-v1.1.json)",
               mirror="squad/dev-v1.1.json", approx_bytes=4_854_279,
               size_note="the Hugging Face squad card's figure, not re-read here"),
    RemoteFile("glove-840b", "glove", "https://nlp.stanford.edu/data/glove.840B.300d.zip", None,
               sha256="c06db255e65095393609f19a4cfca20bf3a71e20cc53e892aafa490347e3849f",
               how="Stanford publishes no checksum: the sha256 the Hugging Face Hub's git-LFS details show for a copy "
                   "of this zip (kcz358/glove; stanfordnlp/glove holds the same file name, 2.18 GB); the download is "
                   "checked against it", mirror="glove/glove.840B.300d.zip",
               size_note="2.18 GB as the Hub lists the zip", approx_bytes=2_180_000_000),
    RemoteFile("snli", "snli", "https://nlp.stanford.edu/projects/snli/snli_1.0.zip", 94_550_081,
               sha256="afb3d70a5af5d8de0d9d81e2637e0fb8c22d1235c2749d83125ca43dab0dbd3e",
               how="sha256 as ParlAI and Julia DataDeps record it; size: the Hugging Face snli card's download size "
                   "(TensorFlow Datasets lists 90.17 MiB)",
               mirror="snli/snli_1.0.zip"),
    RemoteFile("qg-train", "qg", "https://raw.githubusercontent.com/HareeshBahuleyan/tf-var-attention/master/"
               "data/df_qgen_train.csv", None, git_sha1="bda5ddd916da0a4310f4c43aca02156409a92457",
               how="git blob SHA-1 in HareeshBahuleyan/tf-var-attention's tree @ 6edb8956 (data/df_qgen_train.csv)",
               mirror="vae_sentences/HareeshBahuleyan-tf-var-attention/data/df_qgen_train.csv",
               size_note="not published: 70,484 pairs at the validation CSV's 243 bytes a pair",
               approx_bytes=17_100_000),
    RemoteFile("dialog-train", "dialog", "https://raw.githubusercontent.com/HareeshBahuleyan/probabilistic_nlg/"
               "master/dialog/data/CornellMovieDialog/df_movie_train.csv", None,
               git_sha1="1c7447944639d7dfb41b569f51b806c1e58d07d0",
               how="git blob SHA-1 in HareeshBahuleyan/probabilistic_nlg's tree @ 4a7b70f9 "
                   "(dialog/data/CornellMovieDialog/df_movie_train.csv)",
               mirror="vae_sentences/HareeshBahuleyan-probabilistic_nlg/dialog/data/CornellMovieDialog/"
                      "df_movie_train.csv",
               size_note="not published: about 185,000 pairs at the validation CSV's 114 bytes a pair",
               approx_bytes=21_100_000),
    RemoteFile("cornell", "cornell", "https://www.cs.cornell.edu/~cristian/data/cornell_movie_dialogs_corpus.zip",
               None, sha256="3bde8a571f615201bc2d2453e22878090719638592f774720eddec739de8c900",
               how="sha256 as Julia DataDeps records it; size: the Hugging Face cornell_movie_dialog card's download "
                   "size", mirror="cornell/cornell_movie_dialogs_corpus.zip", approx_bytes=9_916_637,
               size_note="the Hugging Face cornell_movie_dialog card's download size, not re-read here"),
    _cnndm("train", "00000-of-00003", "", None, 259_000_000),
    _cnndm("train", "00001-of-00003", "", None, 259_000_000),
    _cnndm("train", "00002-of-00003", "ef3b5a190df25ac99592b802f070e244251553b78a5157a0c88fa19d8ef1a13b", None,
           259_000_000),
    _cnndm("validation", "00000-of-00001", "65a5ccce932b08f050114ce6e3c39355d563fa24f194052bb2f27d1c6c499c91", None,
           34_700_000),
    _cnndm("test", "00000-of-00001", "04e322d2634a96dba76bf9a6294fbbe48e0b36abeae43f13d86ba2c3bebffe4e", None,
           30_000_000),
)

DATASETS: tuple[Dataset, ...] = (
    Dataset("squad", "https://rajpurkar.github.io/SQuAD-explorer/", "CC BY-SA 4.0",
            "Shen thesis 3.1, 4.2-4.4, 5.2-5.5, A.1", "squad"),
    Dataset("glove", "https://nlp.stanford.edu/projects/glove/",
            "Public Domain Dedication and License v1.0 (PDDL)", "Shen thesis (every SQuAD table)", "squad-vectors"),
    Dataset("snli", "https://nlp.stanford.edu/projects/snli/", "CC BY-SA 4.0", "Bahuleyan thesis 4.2, 5.2", "snli"),
    Dataset("qg", "https://github.com/HareeshBahuleyan/tf-var-attention",
            "MIT (the repository); the sentences and questions come from SQuAD, CC BY-SA 4.0", "Bahuleyan thesis 6.1",
            "qg"),
    Dataset("dialog", "https://github.com/HareeshBahuleyan/probabilistic_nlg",
            "MIT (the repository); pairs drawn from the Cornell Movie-Dialogs Corpus", "Bahuleyan thesis 6.2",
            "dialog"),
    Dataset("cornell", "https://www.cs.cornell.edu/~cristian/Cornell_Movie-Dialogs_Corpus.html",
            "none stated on the source page", "Bahuleyan thesis 6.2 (only when the authors' pairs are missing)",
            "dialog"),
    Dataset("cnndm", f"{HF_CNNDM}", "Apache-2.0 (the Hub's dataset card); articles by CNN and the Daily Mail",
            "Tolias thesis 20, 25; ACVI paper 1, 2, 4 (with DUC 2004)", "acvi-cnndm-full"),
)

_TITLES = {"squad": "SQuAD v1.1", "glove": "GloVe 840B-300d", "snli": "SNLI 1.0",
           "qg": "QG pairs (Du et al. split, the authors' CSV)", "dialog": "dialog pairs (the authors' CSV)",
           "cornell": "Cornell Movie-Dialogs", "cnndm": "CNN/DailyMail 3.0.0 (non-anonymised, See et al. split)"}


def by_key() -> dict[str, RemoteFile]:
    return {f.key: f for f in FILES}


def get(key: str) -> RemoteFile:
    return by_key()[key]


def files_of(dataset: str) -> list[RemoteFile]:
    return [f for f in FILES if f.dataset == dataset]


def _size(f: RemoteFile) -> tuple[int | None, bool]:
    """(bytes, exact)."""
    return (f.bytes, True) if f.bytes else (f.approx_bytes, False)


def _mb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _time(n: int, rate: float) -> str:
    s = n / rate
    return f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s" if s >= 1 else "<1 s"


def table_markdown() -> str:
    """The data table of docs/data.md: one row per data set, times at 10 and 100 MB/s from the documented size."""
    lines = ["| data set | files (source URL) | size | at 10 MB/s | at 100 MB/s | tables | licence (as the source "
             "states it) | data step |",
             "|---|---|---|---|---|---|---|---|"]
    for d in DATASETS:
        files = files_of(d.name)
        total = sum(_size(f)[0] or 0 for f in files)
        exact = all(_size(f)[1] for f in files)
        mark = "" if exact else "≈"
        urls = "<br>".join(f"[{f.name}]({f.url})" for f in files)
        t10, t100 = (t if t.startswith("<") else mark + t for t in (_time(total, 10e6), _time(total, 100e6)))
        lines.append(f"| {_TITLES[d.name]} | {urls} | {mark}{_mb(total)} | {t10} | {t100} | {d.tables} | "
                     f"{d.licence} | `{d.step}` |")
    total = sum(_size(f)[0] or 0 for f in FILES)
    lines.append(f"| **all** | {len(FILES)} files | ≈{_mb(total)} | ≈{_time(total, 10e6)} | ≈{_time(total, 100e6)} "
                 "| | | |")
    return "\n".join(lines) + "\n"


def checksum_markdown() -> str:
    """Per file: the recorded checksum and where it was read (docs/data.md)."""
    lines = ["| file | size (bytes) | checksum | how it was obtained | mirror path |", "|---|---|---|---|---|"]
    for f in FILES:
        size = f"{f.bytes:,}" if f.bytes else f"≈{f.approx_bytes:,} ({f.size_note})"
        lines.append(f"| `{f.name}` ({f.key}) | {size} | `{f.checksum()}` | {f.how} | `{f.mirror}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table_markdown())
    print(checksum_markdown())
