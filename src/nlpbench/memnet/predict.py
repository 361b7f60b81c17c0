"""A trained memory-network run, loaded from its own checkpoint, answering arbitrary questions.

Used by the qualitative outputs (attention per hop, Tables 3-5) and by the guess-the-number player
(Tables 16-18): both ask one run about samples that are not a whole data split.
"""

from __future__ import annotations

from pathlib import Path

import torch

from nlpbench.data import babi
from nlpbench.memnet.data import TaskTensors, stack_sentences, stack_split
from nlpbench.memnet.engine import GroupedMemNet
from nlpbench.memnet.groups import HASH_NEUTRAL
from nlpbench.memnet.model import MemNetConfig
from nlpbench.runtime import checkpoints

# A checkpoint written before a model key existed ran that key's earlier behaviour: its neutral value (the one a
# group's hash leaves out), not today's default.
EARLIER_MODEL = {key: value for (section, key), value in HASH_NEUTRAL.items() if section == "model"}


def saved_model_config(saved: dict) -> MemNetConfig:
    """The MemNetConfig a run's checkpoint (`model_config`) was trained with, the keys it predates at their
    earlier behaviour."""
    return MemNetConfig(**{**EARLIER_MODEL, **saved})


class RunPredictor:
    """One run (its `model.pt` as written by memnet.experiments.train_group) as a K = 1 model."""

    def __init__(self, run_dir: str | Path, device: str = "cpu"):
        self.run_dir = Path(run_dir)
        path = self.run_dir / "model.pt"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no checkpoint (train the run's group first)")
        ck = checkpoints.load(path, map_location=device)
        self.cfg = saved_model_config(ck["model_config"])
        self.vocab = babi.Vocab.from_dict(ck["vocab"])
        self.device = torch.device(device)
        self.model = GroupedMemNet(self.cfg, [ck["vocab_size"]], [torch.Generator().manual_seed(0)]).to(self.device)
        state = {k: v.unsqueeze(0) for k, v in ck["state"].items() if k != "prior_log_nu"}
        self.model.load_state_dict(state)
        self.model.eval()

    @torch.no_grad()
    def predict(self, samples: list[babi.Sample], S: int = 1, mode: str | None = None, seed: int = 0,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean predictive probabilities (N, n_words) over S weight draws and the mean attention
        (N, hops, M). mode: 'mean' (MemN2N, or the posterior means), 'posterior' or 'escort'; default
        'posterior' for Bayesian runs and 'mean' otherwise."""
        mode = mode or ("posterior" if self.cfg.bayesian else "mean")
        arrays = babi.vectorize(samples, self.vocab, self.cfg.memory_size)
        data = TaskTensors("predict", self.vocab, {"x": arrays})
        split = stack_split([data], "x", self.device)
        batch = {k: v for k, v in split.items() if k != "size"}
        n = S if mode != "mean" else 1
        # the n weight draws side by side in one pass: draw s is pseudo-run s of the one run (GroupedMemNet's `runs`)
        tables = {k: v.expand(n, *v.shape[1:]) for k, v in stack_sentences([data], self.device).items()}
        sentences = {"bags": self.model.sentence_bags(tables["tokens"], tables["len"], tables["width"],
                                                      tables["count"])}
        g = torch.Generator(device=self.device).manual_seed(seed)
        draws = [self.model.draw([g], mode) for _ in range(n)]
        weights = {name: torch.cat([w[name] for w in draws]) for name in draws[0]}
        runs = torch.zeros(n, dtype=torch.long, device=self.device)
        logits, att = self.model({k: v.expand(n, *v.shape[1:]) for k, v in batch.items()}, weights, sentences,
                                 return_attention=True, runs=runs)
        probs = torch.softmax(logits, -1)
        return probs.mean(0), att.mean(0)
