"""params.yaml `acvi:` (seeds 000 ch. 7 and 002): the declared tables and outputs, the data sets and where they lie
(the runs are made in nlpbench.acvi.groups). No torch here: the plan imports this module.

Which runs can train at a scale (nlpbench.acvi.groups.trainable): QG (the mirror holds Du et al.'s pairs) always;
CNN/DM when the user supplies the stories (`acvi.data.cnndm_dir`), video when the user supplies MSVD
(`acvi.data.msvd_dir`); CNN/DM and video on their stand-ins (`acvi.stand_ins`, the smoke scale: a few mirror test
articles, generated feature tensors). Paper Table 4 needs DUC 2004 (`acvi.data.duc2004_dir`). Every other cell
that needs data not supplied is "needs data".
"""

from __future__ import annotations

from pathlib import Path

from nlpbench import config
from nlpbench.config import ConfigError

FAMILY = "acvi"
TASKS = ("cnndm", "qg", "video")
RELEASED = ("lead3", "pgn", "s2s")

# External data sets: data step id -> (status dir, the key naming a user-supplied directory, how to obtain it)
EXTERNAL = {
    "acvi-cnndm-full": ("cnndm-full", "cnndm_dir", (
        "the CNN/DailyMail training split (287,226 stories; See et al. non-anonymised): cnn_stories.tgz and "
        "dailymail_stories.tgz from https://cs.nyu.edu/~kcho/DMQA/ with the url lists all_train.txt / all_val.txt / "
        "all_test.txt of https://github.com/abisee/cnn-dailymail (the mirror has the val/test lists and 250 test "
        "articles only); unpack and set acvi.data.cnndm_dir")),
    "acvi-msvd": ("msvd", "msvd_dir", (
        "MSVD (Chen & Dolan 2011) captions (https://www.cs.utexas.edu/users/ml/clamp/videoDescription/) and "
        "GoogLeNet pool5 frame features, 24 x 1024 per clip (Yao et al. 2015, "
        "https://github.com/yaoli/arctic-capgen-vid); the mirror has the split lists only. Set acvi.data.msvd_dir "
        "to a directory holding captions/<one>.csv (the MSR Video Description Corpus CSV with its header: VideoID, "
        "Start, End, ..., Language, Description) and features/<clip>.npy (float32 24 x 1024 per clip, `<clip>` = "
        "`<VideoID>_<Start>_<End>` as in the split lists, or its vidN name); docs/acvi.md")),
    "acvi-duc2004": ("duc2004", "duc2004_dir", (
        "DUC 2004 task 1 (500 documents, 4 human summaries each) is licensed by NIST: request it at "
        "https://duc.nist.gov/data.html (Past DUC data, agreement forms), then set acvi.data.duc2004_dir to the "
        "directory holding docs/<cluster>/<DOCNO> (with <DOCNO> and <TEXT>) and eval/models/1/ (the task-1 model "
        "summaries, named like D30001.P.10.T.A.APW19981016.0240); docs/acvi.md")),
}
TASK_DATA = {"cnndm": "acvi-cnndm-full", "video": "acvi-msvd"}


def declared(params: dict, section: str) -> dict[str, dict]:
    return {d.name: d.decl for d in config.declared(params, section, FAMILY)}


def data_dir(params: dict, step: str, data_root: str | Path = "data") -> Path:
    a = params["acvi"]
    if step == "acvi-cnndm-mirror":
        return Path(data_root) / "acvi" / f"cnndm-mirror-{config.digest({'tokenizer': a['data']['tokenizer']})}"
    if step == "acvi-qg":
        return Path(data_root) / "acvi" / "qg"
    if step == "acvi-released":
        key = {"tokenizer": a["data"]["tokenizer"], "released": a["released"], "stem": a["metrics"]["rouge_stem"]}
        return Path(data_root) / "acvi" / f"released-{config.digest(key)}"
    if step in EXTERNAL:
        d = a["data"][EXTERNAL[step][1]]
        return Path(data_root) / "acvi" / f"{EXTERNAL[step][0]}-{config.digest(d)}"
    raise ConfigError(f"acvi has no data step {step!r}")
