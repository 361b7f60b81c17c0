"""The squad models by name: the baseline of Figure 3.7 and the full models of Table 4.4. A model's settings are
a dataclass; the full models' carry `arch`, the baseline's (ModelConfig) has none, so its saved configs and
group ids are those it always had."""

from __future__ import annotations

from torch import Tensor, nn

from nlpbench.squad.bidaf import BiDAF, BiDAFConfig
from nlpbench.squad.dcn import DCN, DCNConfig
from nlpbench.squad.model import BaselineModel, ModelConfig
from nlpbench.squad.qanet import QANet, QANetConfig

ARCHITECTURES: dict[str, tuple[type, type[nn.Module]]] = {
    "baseline": (ModelConfig, BaselineModel),
    "bidaf": (BiDAFConfig, BiDAF),
    "dcn": (DCNConfig, DCN),
    "qanet": (QANetConfig, QANet),
}


def model_config(settings: dict):
    """The settings dataclass of settings["arch"] (absent: the baseline)."""
    settings = dict(settings)
    arch = settings.get("arch", "baseline")
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown squad model {arch!r}; known: {', '.join(ARCHITECTURES)}")
    if arch == "baseline":
        settings.pop("arch", None)
    return ARCHITECTURES[arch][0](**settings)


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
