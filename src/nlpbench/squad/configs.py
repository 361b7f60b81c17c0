"""The settings of a squad run as dataclasses, without torch: the baseline's (ModelConfig, Figure 3.7), the full
models' of Table 4.4 (BiDAFConfig, DCNConfig, QANetConfig: they carry `arch`, the baseline's has none, so its saved
configs and group ids are those it always had) and the training run's (TrainConfig). Planning builds them to
check params.yaml; the models (model.py, bidaf.py, dcn.py, qanet.py; models.py by name) and the run (train.py)
read them. Their defaults are params.yaml's `squad.model` and `squad.train` (a test keeps them equal)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# the names a cell's `similarity` may take (squad.similarity: each one's module)
SIMILARITY_NAMES = ("trilinear", "FNN", "concat-FNN", "bilinear", "dot-product", "cosine", "scaled dot-product",
                    "general-1", "general-2", "general-3", "Hadamard", "T-trilinear")
# output formation -> (the terms of its concatenation, whether it needs the passage summary) (squad.output)
OUTPUT_TERMS = {
    "O_1": ("h u", False),
    "O_2": ("h u hu", False),
    "RIG_1": ("h u", False),
    "RIG_2": ("h u ht", True),
    "RIG_3": ("h u hu", False),
    "RIG_4": ("h u hu hht", True),
    "RIG_5": ("h u hu htu", True),
    "RIG_6": ("h u hu htu", True),
    "proposed": ("h u hu htu |h-u| |ht-u|", True),
    "revised": ("h u hu htu |h-u| |ht-u|", True),
    "A1-O_1": ("h ht", True),
    "A1-O_2": ("h ht hht", True),
}
OUTPUTS = tuple(OUTPUT_TERMS)


@dataclass
class ModelConfig:
    similarity: str = "trilinear"
    output: str = "O_1"
    passage_summary: str = "second"  # chapter 5 uses the second-order method
    revised_dim: int | None = None  # d* of the revised method (Table 5.5); None = 6D
    embed_adjust: int = 100  # FNN output size (§3.2.1)
    adjust_activation: str = "none"  # "none" [D] or "relu"
    hidden: int = 100  # LSTM units per direction; D = 2 * hidden
    dropout: float = 0.2


@dataclass
class BiDAFConfig:
    arch: str = "bidaf"
    similarity: str = "trilinear"  # the paper's own; Table 4.4 swaps in T-trilinear
    embed_adjust: int = 100  # the shared adjustment FNN (the baseline's input)
    adjust_activation: str = "none"
    char_dim: int = 8  # §2.1 character embeddings; 0 = word vectors only
    char_filters: int = 100
    char_width: int = 5
    highway_layers: int = 2  # §2.2
    hidden: int = 100  # d, LSTM units per direction
    modelling_layers: int = 2  # §2.5
    dropout: float = 0.2  # §4.1 (on every LSTM input, as the paper)


@dataclass
class DCNConfig:
    arch: str = "dcn"
    similarity: str = "dot-product"  # L = D^T Q; Table 4.4 swaps in T-trilinear
    embed_adjust: int = 100
    adjust_activation: str = "none"
    hidden: int = 200  # l (§4.1: 200)
    decoder_iterations: int = 4  # §4.1: maximum 4
    maxout_pool: int = 16  # §4.1: pool size 16
    dropout: float = 0.2  # the paper applies dropout without giving the rate [D]
    stop_when_unchanged: bool = True  # §2.3: at evaluation, stop each example once (s_i, e_i) repeats


@dataclass
class QANetConfig:
    arch: str = "qanet"
    similarity: str = "trilinear"  # the paper's own; Table 4.4 swaps in T-trilinear
    embed_adjust: int = 100
    adjust_activation: str = "none"
    char_dim: int = 200  # p2 = 200; 0 = word vectors only
    char_filters: int = 200
    char_width: int = 5  # [D: the released code's]
    highway_layers: int = 2
    d_model: int = 128  # hidden size d
    heads: int = 8
    embed_blocks: int = 1
    embed_convs: int = 4
    embed_kernel: int = 7
    model_blocks: int = 7
    model_convs: int = 2
    model_kernel: int = 5  # [D: the paper's released code; the text gives 7 for the embedding encoder only]
    dropout: float = 0.1
    survival: float = 0.9  # p_L of stochastic depth; 1 = off


CONFIGS: dict[str, type] = {"baseline": ModelConfig, "bidaf": BiDAFConfig, "dcn": DCNConfig, "qanet": QANetConfig}


def model_config(settings: dict):
    """The settings dataclass of settings["arch"] (absent: the baseline)."""
    settings = dict(settings)
    arch = settings.get("arch", "baseline")
    if arch not in CONFIGS:
        raise ValueError(f"unknown squad model {arch!r}; known: {', '.join(CONFIGS)}")
    if arch == "baseline":
        settings.pop("arch", None)
    return CONFIGS[arch](**settings)


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)  # or a full model's config (CONFIGS)
    epochs: int = 20
    batch_size: int = 60
    optimizer: str = "adadelta"  # the thesis's Adadelta | "adam" (a cpu-scale reading: fewer steps to learn)
    lr: float = 0.5
    rho: float = 0.95
    eps: float = 1e-6
    ema_decay: float = 0.999
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # Adam's [beta1, beta2] (QANet: 0.8, 0.999);
    #   a list, as JSON and params.yaml hold it, so that a saved config compares equal to the one it came from
    adam_eps: float = 1e-8       # Adam's epsilon (QANet: 1e-7)
    weight_decay: float = 0.0    # L2 on every trainable weight, lambda w added to its gradient (QANet: 3e-7)
    warmup_steps: int = 0        # QANet's warm-up: lr x min(1, log(t + 1) / log(warmup_steps - 1)) at step t = 0, 1, ...
    grad_clip: float | None = None  # not stated in the thesis [D: none]
    max_passage_len: int = 400
    max_question_len: int = 50
    eval_max_passage_len: int = 1000
    decode: str = "independent"  # Eqs. 3.21-3.22; "span" (i <= j < i + max_answer_len) is logged beside it
    max_answer_len: int = 15
    eval_batch_size: int = 60
    eval_every_epoch: bool = True
    valid_articles: int = 0   # training articles held out to choose the epoch by validation EM; 0: the last epoch
    patience: int | None = None  # with valid_articles: stop once this many epochs pass without a higher validation EM
    min_epochs: int | None = None  # with patience: never stop before this epoch (a run's slow first epochs)
    bucket_batches: int = 20  # batches per length-sorting pool (speed only; order still seeded)
    loss_log_every: int = 50  # optimizer steps between logged batch losses
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        self.adam_betas = [float(b) for b in self.adam_betas]
        for key in ("patience", "min_epochs"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"squad.train.{key} must be a whole number of epochs >= 1 or null, not {value!r}")
        if self.patience is not None:
            if not self.valid_articles:
                raise ValueError("squad.train.patience needs squad.train.valid_articles > 0: "
                                 "early stopping reads validation EM, and the test articles never choose anything")
        elif self.min_epochs is not None:
            raise ValueError("squad.train.min_epochs needs squad.train.patience: it delays early stopping")

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(d)
        model = model_config(d.pop("model", {}))
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown train settings: {sorted(unknown)}")
        return cls(model=model, **d)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
