"""The squad models by name: the baseline of Figure 3.7 and the full models of Table 4.4, each with the settings
dataclass it is built from (squad.configs: CONFIGS, model_config)."""

from __future__ import annotations

from torch import Tensor, nn

from nlpbench.squad.bidaf import BiDAF
from nlpbench.squad.configs import CONFIGS, DCNConfig, ModelConfig
from nlpbench.squad.dcn import DCN
from nlpbench.squad.model import BaselineModel
from nlpbench.squad.qanet import QANet

ARCHITECTURES: dict[str, tuple[type, type[nn.Module]]] = {
    arch: (CONFIGS[arch], model) for arch, model in
    (("baseline", BaselineModel), ("bidaf", BiDAF), ("dcn", DCN), ("qanet", QANet))}


def build_model(embeddings: Tensor, cfg, vocab: list[str] | None = None) -> nn.Module:
    """The model of `cfg` over frozen `embeddings`; `vocab` (the words of the embedding rows) is needed by a model
    with character embeddings (char_dim > 0)."""
    if getattr(cfg, "char_dim", 0) and vocab is None:
        raise ValueError(f"the {cfg.arch} model has character embeddings (char_dim {cfg.char_dim}): give its vocabulary")
    for config_cls, model_cls in ARCHITECTURES.values():
        if type(cfg) is config_cls:
            return model_cls(embeddings, cfg) if config_cls in (ModelConfig, DCNConfig) else \
                model_cls(embeddings, cfg, vocab)
    raise TypeError(f"not a squad model config: {cfg!r}")
