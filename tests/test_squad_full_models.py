"""The full models of Table 4.4 (BiDAF, DCN, QANet; Shen thesis §4.4): shapes and padding, the similarity comes from the
registry (swapping it changes the function called), each learns the synthetic marker task, and a run of each
trains through train.run and reloads."""

import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from squad_synthetic import marker_task  # noqa: E402

from nlpbench.squad import similarity  # noqa: E402
from nlpbench.squad.configs import BiDAFConfig, DCNConfig, QANetConfig, model_config  # noqa: E402
from nlpbench.squad.model import span_loss  # noqa: E402
from nlpbench.squad.models import build_model  # noqa: E402
from nlpbench.squad.train import TrainConfig, load_trained, run  # noqa: E402

torch.set_num_threads(1)

TINY = {
    "bidaf": lambda sim: BiDAFConfig(similarity=sim, embed_adjust=8, hidden=8, highway_layers=1, dropout=0.0,
                                     char_dim=0),
    "dcn": lambda sim: DCNConfig(similarity=sim, embed_adjust=8, hidden=8, decoder_iterations=2, maxout_pool=4,
                                 dropout=0.0),
    "qanet": lambda sim: QANetConfig(similarity=sim, embed_adjust=8, d_model=16, heads=2, embed_convs=1,
                                     model_blocks=1, model_convs=1, highway_layers=1, dropout=0.0, survival=1.0,
                                     char_dim=0),
}
ORIGINAL = {"bidaf": "trilinear", "dcn": "dot-product", "qanet": "trilinear"}


def _model(arch: str, sim: str, seed: int = 0, vocab: int = 20, dim: int = 6):
    torch.manual_seed(seed)
    emb = torch.randn(vocab, dim)
    emb[0] = 0
    return build_model(emb, TINY[arch](sim))


@pytest.mark.parametrize("arch", list(TINY))
@pytest.mark.parametrize("sim", ["original", "T-trilinear"])
def test_forward_shapes_padding_and_gradients(arch, sim):
    model = _model(arch, ORIGINAL[arch] if sim == "original" else sim)
    passage = torch.tensor([[1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 0, 0, 0, 0]])
    question = torch.tensor([[1, 2, 3], [4, 0, 0]])
    out = model(passage, question)
    assert out["start"].shape == out["end"].shape == (2, 7) and out["S"].shape == (2, 7, 3)
    assert (out["start"][1, 3:] < -1e29).all() and (out["end"][1, 3:] < -1e29).all()
    loss = span_loss(out, torch.tensor([1, 0]), torch.tensor([2, 2]))
    loss.backward()
    assert torch.isfinite(loss) and not model.embed.weight.requires_grad
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
    # padding never changes the real rows: the same passage alone gives the same logits
    model.eval()
    with torch.no_grad():
        both, alone = model(passage, question), model(passage[1:, :3], question[1:, :1])
    assert torch.allclose(both["start"][1, :3], alone["start"][0], atol=1e-5)


@pytest.mark.parametrize("arch", list(TINY))
def test_the_similarity_is_the_registry_function_that_the_config_names(arch, monkeypatch):
    calls = []
    for name in ("Trilinear", "DotProduct", "TTrilinear"):
        cls = getattr(similarity, name)
        original = cls.forward

        def spy(self, h, u, _original=original, _name=name):
            calls.append(_name)
            return _original(self, h, u)
        monkeypatch.setattr(cls, "forward", spy)
    passage, question = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[5, 6]])
    own = _model(arch, ORIGINAL[arch])
    own(passage, question)
    assert calls == [{"trilinear": "Trilinear", "dot-product": "DotProduct"}[ORIGINAL[arch]]]
    assert type(own.phi).__name__ == calls[0]
    calls.clear()
    swapped = _model(arch, "T-trilinear")
    swapped(passage, question)
    assert calls == ["TTrilinear"] and isinstance(swapped.phi, similarity.TTrilinear)


def test_the_config_names_its_architecture():
    assert type(model_config({"arch": "dcn", "hidden": 5})) is DCNConfig
    assert type(model_config({"hidden": 5})).__name__ == "ModelConfig"   # the baseline's keeps no `arch`
    assert "arch" not in TrainConfig.from_dict({"model": {"hidden": 5}}).to_dict()["model"]
    assert TrainConfig.from_dict({"model": {"arch": "qanet", "d_model": 8}}).model.d_model == 8
    with pytest.raises(ValueError, match="unknown squad model"):
        model_config({"arch": "rnet"})


@pytest.mark.parametrize("arch", list(TINY))
def test_each_model_learns_the_marker_task(arch, tmp_path):
    """The answer is the word after "@": far above chance (1/12 per pointer, about 1% EM) within a few seconds."""
    train, test, vectors, vocab = marker_task(600, 100, seed=1)
    cfg = TrainConfig(model=TINY[arch](ORIGINAL[arch]), epochs=4, batch_size=20, optimizer="adam", lr=0.01,
                      eval_every_epoch=False, seed=0)
    metrics = run(cfg, train, test, vectors, vocab, tmp_path / "run", log=lambda line: None)
    losses = [e["train_loss"] for e in json.loads((tmp_path / "run" / "history.json").read_text())["epochs"]]
    assert metrics["em"] > 60, metrics["em"]
    assert losses[-1] < 0.1 * losses[0], losses
    model, saved_vocab = load_trained(tmp_path / "run", vectors)        # model.pt rebuilds the same architecture
    assert saved_vocab == vocab and type(model).__name__ == type(build_model(torch.as_tensor(vectors),
                                                                             cfg.model)).__name__


def test_the_character_cnn_reads_each_word_s_characters():
    from nlpbench.squad.model import CharCNN

    torch.manual_seed(0)
    vocab = ["<pad>", "ab", "ba", "abc", "b"]
    cnn = CharCNN(vocab, char_dim=3, filters=5, width=3, max_chars=4)
    assert cnn.word_chars.tolist() == [[0, 0, 0, 0], [2, 3, 0, 0], [3, 2, 0, 0], [2, 3, 4, 0], [3, 0, 0, 0]]
    assert "word_chars" not in cnn.state_dict()                 # rebuilt from the vocabulary, never stored
    out = cnn(torch.tensor([[1, 2, 0]]))
    assert out.shape == (1, 3, 5) and not torch.allclose(out[0, 0], out[0, 1])   # "ab" and "ba" differ


@pytest.mark.parametrize("arch", ["bidaf", "qanet"])
def test_character_embeddings_join_the_word_input_and_reload(arch, tmp_path):
    train, test, vectors, vocab = marker_task(100, 20, seed=2)
    cfg = TrainConfig(model=dataclasses.replace(TINY[arch](ORIGINAL[arch]), char_dim=4, char_filters=6,
                                                char_width=3),
                      epochs=1, batch_size=20, optimizer="adam", lr=0.01, eval_every_epoch=False, seed=0)
    with pytest.raises(ValueError, match="character embeddings"):
        build_model(torch.as_tensor(vectors), cfg.model)
    model = build_model(torch.as_tensor(vectors), cfg.model, vocab)
    assert model.chars is not None and model.embed_words(torch.tensor([[1, 2]])).shape == (1, 2, 8 + 6)
    run(cfg, train, test, vectors, vocab, tmp_path / "run", log=lambda line: None)
    reloaded, _ = load_trained(tmp_path / "run", vectors)
    assert reloaded.chars.embed.weight.shape == model.chars.embed.weight.shape


def test_qanet_s_adam_settings_l2_and_warm_up(tmp_path, monkeypatch):
    """squad.full_models.qanet.train at the paper scale: Adam (0.8, 0.999), eps 1e-7, L2 3e-7 and the
    learning rate warmed up as log(t + 1) / log(warmup_steps - 1), step by step through training."""
    from nlpbench.squad.train import make_optimizer, warmup_factor

    cfg = TrainConfig(optimizer="adam", lr=1e-3, adam_betas=[0.8, 0.999], adam_eps=1e-7, weight_decay=3e-7,
                      warmup_steps=1000)
    group = make_optimizer(cfg, [torch.nn.Parameter(torch.zeros(2))]).param_groups[0]
    assert group["betas"] == (0.8, 0.999) and group["eps"] == 1e-7 and group["weight_decay"] == 3e-7
    assert warmup_factor(cfg, 0) == 0.0 and warmup_factor(cfg, 998) == 1.0 and warmup_factor(cfg, 5000) == 1.0
    assert warmup_factor(cfg, 99) == pytest.approx(math.log(100) / math.log(999))
    assert warmup_factor(TrainConfig(), 0) == 1.0                                   # no warm-up: the lr as set
    seen = []
    step = torch.optim.Adam.step

    def record(self, *a, **k):
        seen.append(self.param_groups[0]["lr"])
        return step(self, *a, **k)

    monkeypatch.setattr(torch.optim.Adam, "step", record)
    train, test, vectors, vocab = marker_task(100, 20, seed=3)
    run_cfg = TrainConfig(model=TINY["qanet"](ORIGINAL["qanet"]), epochs=1, batch_size=20, optimizer="adam",
                          lr=0.01, warmup_steps=10, eval_every_epoch=False, seed=0)
    run(run_cfg, train, test, vectors, vocab, tmp_path / "run", log=lambda line: None)
    assert len(seen) == 5                                                          # 100 questions, batch 20
    assert seen == pytest.approx([0.01 * min(1.0, math.log(t + 1) / math.log(9)) for t in range(5)])


def test_dcn_evaluation_stops_each_example_once_its_estimate_repeats():
    """§2.3: the first iteration whose (s_i, e_i) equals the one before (s_0 = e_0 = 0) gives the prediction;
    without a repeat, the last iteration does."""
    from nlpbench.squad.dcn import stopped_estimate

    def onehot(positions):  # logits peaking at each example's position, m = 5
        return torch.nn.functional.one_hot(torch.tensor(positions), 5).float()

    # example 0: (2,3) (2,3) (4,4) -> iteration 2; example 1: (0,0) at iteration 1 repeats s_0 = e_0 = 0;
    # example 2: (1,1) (2,2) (3,3) never repeats -> the last
    starts = [onehot([2, 0, 1]), onehot([2, 4, 2]), onehot([4, 4, 3])]
    ends = [onehot([3, 0, 1]), onehot([3, 4, 2]), onehot([4, 4, 3])]
    alpha, beta = stopped_estimate(starts, ends)
    assert alpha.argmax(1).tolist() == [2, 0, 3] and beta.argmax(1).tolist() == [3, 0, 3]
    assert torch.equal(alpha[0], starts[1][0]) and torch.equal(beta[2], ends[2][2])


def test_dcn_stops_early_only_at_evaluation():
    model = _model("dcn", "dot-product")
    passage, question = torch.tensor([[1, 2, 3, 4, 5, 6, 7]]), torch.tensor([[1, 2, 3]])
    out = model(passage, question)  # training: the last iteration's logits
    assert torch.equal(out["start"], out["start_iters"][-1])
    model.eval()
    from nlpbench.squad.dcn import stopped_estimate
    out = model(passage, question)
    alpha, beta = stopped_estimate(out["start_iters"], out["end_iters"])
    assert torch.equal(out["start"], alpha) and torch.equal(out["end"], beta)
    model.cfg.stop_when_unchanged = False
    assert torch.equal(model(passage, question)["start"], out["start_iters"][-1])
