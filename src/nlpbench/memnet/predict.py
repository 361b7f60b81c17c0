"""A trained memory-network run, loaded from its own checkpoint, answering arbitrary questions.

Used by the qualitative outputs (attention per hop, Tables 3-5) and by the guess-the-number player
(Tables 16-18): both ask one run about samples that are not a whole data split.
"""

from __future__ import annotations

from pathlib import Path

import torch

from nlpbench.data import babi
from nlpbench.memnet.data import TaskTensors, stack_sentences, stack_split
from nlpbench.memnet.model import MemNet, MemNetConfig


class RunPredictor:
    """One run (its `model.pt` as written by memnet.experiments.train_group) as a K = 1 model."""

    def __init__(self, run_dir: str | Path, device: str = "cpu"):
        self.run_dir = Path(run_dir)
        path = self.run_dir / "model.pt"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no checkpoint (train the run's group first)")
        ck = torch.load(path, map_location=device, weights_only=False)
        self.cfg = MemNetConfig(**ck["model_config"])
        self.vocab = babi.Vocab.from_dict(ck["vocab"])
        self.device = torch.device(device)
        self.model = MemNet(self.cfg, [ck["vocab_size"]], [torch.Generator().manual_seed(0)]).to(self.device)
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
        tables = stack_sentences([data], self.device)
        sentences = {"bags": self.model.sentence_bags(tables["tokens"], tables["len"], tables["width"])}
        g = torch.Generator(device=self.device).manual_seed(seed)
        probs, att = 0.0, 0.0
        for _ in range(S if mode != "mean" else 1):
            weights = self.model.draw([g], mode)
            logits, a = self.model(batch, weights, sentences, return_attention=True)
            probs = probs + torch.softmax(logits, -1)
            att = att + a
        n = S if mode != "mean" else 1
        return (probs / n)[0], (att / n)[0]
