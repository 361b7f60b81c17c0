"""The squad timing benchmark (on demand, not a test): training throughput of each model it names (`models`: the
baseline of Figure 3.7 with trilinear + O_1, and Table 4.4's BiDAF, DCN and QANet with their own similarity) at the
settings of each scale it names, the time of one epoch at that scale, and the device-hours of every configuration
of that model x seed x its epochs (over SQuAD v1.1 train at the paper scale).

Examples are drawn from the prepared data of the scale the command runs at; passages and questions are cut at the
timed scale's caps. Word vectors are random rows of the timed scale's dimension (300 at the paper scale: timing
does not depend on their values, and the 840B vectors are not available offline).

    nlpbench --set scale=cpu output shen-thesis squad-timing [--threads 1]
"""

from __future__ import annotations

import time
from pathlib import Path

from nlpbench import config
from nlpbench.family import OutputPage, Paths
from nlpbench.runtime import io, rundirs
from nlpbench.runtime.provenance import code_commit, device_label, now_utc, resolve_device

PAPER_TRAIN_QUESTIONS = 87_599     # SQuAD v1.1 train
PAPER_TEST_QUESTIONS = 10_570      # SQuAD v1.1 dev
VECTOR_DIM = {"glove-840B-300d": 300, "glove-6B-50d": 50}


def timed_config(model: str):
    """The configuration the benchmark times for a model: the baseline's trilinear + O_1, a full model with the
    similarity its settings class defaults to (its paper's own)."""
    from nlpbench.squad.groups import Config
    from nlpbench.squad.models import ARCHITECTURES

    own = ARCHITECTURES[model][0]().similarity
    return Config(own, "O_1", None, None) if model == "baseline" else Config(own, None, None, None, model)


def time_scale(params: dict, scale_params: dict, steps: int, device: str, items: list[dict],
               model_name: str = "baseline", vocab: list[str] | None = None, batch_factor: int = 1) -> dict:
    """examples/s of `steps` training steps (after one warm-up step) of one model at `scale_params`' model and
    train settings, its batch `batch_factor` times the scale's."""
    import numpy as np
    import torch

    from nlpbench.squad.model import span_loss
    from nlpbench.squad.models import build_model
    from nlpbench.squad.train import TrainConfig, collate, make_optimizer

    sq = scale_params["squad"]
    cfg = timed_config(model_name)
    tc = TrainConfig.from_dict({**cfg.train_settings(scale_params), "model": cfg.model_settings(scale_params),
                                "seed": 0, "device": device})
    tc.batch_size *= batch_factor
    dim = VECTOR_DIM[sq["data"]["vectors"]]
    vocab_size = len(vocab) if vocab else 1 + max(max(max(x["passage"]), max(x["question"])) for x in items)
    torch.manual_seed(0)
    emb = torch.as_tensor(np.random.default_rng(0).standard_normal((vocab_size, dim)), dtype=torch.float32)
    model = build_model(emb, tc.model, vocab).to(device)
    opt = make_optimizer(tc, [p for p in model.parameters() if p.requires_grad])
    cut = [{**x, "passage": x["passage"][: tc.max_passage_len], "question": x["question"][: tc.max_question_len]}
           for x in items if x["end"] < tc.max_passage_len]
    gen = torch.Generator().manual_seed(0)

    def step() -> int:
        idx = torch.randint(len(cut), (tc.batch_size,), generator=gen).tolist()
        b = collate([cut[i] for i in idx], device)
        loss = span_loss(model(b["passage"], b["question"]), b["start"], b["end"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return len(idx)

    step()
    if device == "cuda":
        torch.cuda.synchronize()
    t0, n = time.perf_counter(), 0
    for _ in range(steps):
        n += step()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    return {"examples_per_s": n / seconds, "s_per_step": seconds / steps, "steps": steps,
            "batch": tc.batch_size, "hidden": getattr(tc.model, "hidden", getattr(tc.model, "d_model", None)),
            "embed_adjust": tc.model.embed_adjust,
            "vector_dim": dim, "max_passage_len": tc.max_passage_len, "optimizer": tc.optimizer,
            "epochs": tc.epochs}


def configurations_at(scale_params: dict, model: str) -> int:
    """How many configurations of `model` the tables train at that scale (the cpu scale trains fewer)."""
    from nlpbench.squad import groups as sg

    return sum(c.model == model for c in sg.all_configs(scale_params).values())


def runs_together_ceiling(alone_s_per_step: float, together_s_per_step: float, k: int) -> float:
    """The most that k runs trained in one pass could gain per run: k steps alone against one step of the k
    batches by one model (a pass of k stacked models does at least that step's work)."""
    return k * alone_s_per_step / together_s_per_step


def benchmark(params: dict, decl: dict, source: str, name: str, paths: Paths) -> OutputPage:
    from nlpbench.squad import experiments as x
    from nlpbench.squad import groups as sg
    from nlpbench.squad.data import load_prepared
    from nlpbench.squad.train import encode

    device = resolve_device(params["device"])
    vocab = x.load_vectors(params, paths.data)[0]
    index = {w: i for i, w in enumerate(vocab)}
    train = load_prepared(x.data_dir(params, paths.data), "train")
    items = encode(train, index, 10**9, 10**9, drop_unreachable=False)
    models = decl.get("models") or ["baseline"]
    lines = [f"# {source} {name}: training throughput of the squad models", "",
             f"- device: {device_label(device)}; code commit {code_commit()}; generated {now_utc()}",
             f"- examples from the prepared data of scale `{params['scale']}` ({len(items)} training questions; an epoch counts those its passage cut keeps); "
             "the baseline with trilinear + O_1, a full model with its own similarity; random word vectors of the "
             "timed scale's dimension", "",
             "| model | scale | hidden | adjust | vectors | passage cap | batch | optimizer | examples/s | s/step | "
             "training questions | one epoch | all runs (configs x seeds x epochs) | seeds' batches in one step | "
             "runs-together ceiling |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    print(lines[2], flush=True)
    results = {}
    for model, scale in [(m, s) for m in models for s in decl.get("scales") or ["cpu", "paper"]]:
        sp = config.load(Path("params.yaml"), {"scale": scale, "device": params["device"]}) \
            if scale != params["scale"] else params
        r = time_scale(params, sp, decl.get("steps", 20), device, items, model, vocab)
        sq = sp["squad"]
        k = len(sq["seeds"])
        together = time_scale(params, sp, decl.get("steps", 20), device, items, model, vocab, batch_factor=k)
        ceiling = runs_together_ceiling(r["s_per_step"], together["s_per_step"], k)
        n_train = PAPER_TRAIN_QUESTIONS if sq["data"]["source"] == "official" else \
            len(encode(x._subset(train, sq["data"]["max_train_questions"]), index, sq["train"]["max_passage_len"],
                       sq["train"]["max_question_len"], drop_unreachable=True))   # as a run's epoch: after the cut
        n_configs = configurations_at(sp, model)
        epoch_s = n_train / r["examples_per_s"]
        total_h = epoch_s * r["epochs"] * n_configs * len(sq["seeds"]) / 3600
        results[f"{model}/{scale}" if len(models) > 1 else scale] = \
            {**r, "model": model, "n_train": n_train, "epoch_s": epoch_s, "all_runs_hours": total_h,
             "seeds_batch_s_per_step": together["s_per_step"], "runs_together_ceiling": ceiling}
        line = (f"| {model} | {scale} | {r['hidden']} | {r['embed_adjust']} | {r['vector_dim']}-d | "
                f"{r['max_passage_len']} | "
                f"{r['batch']} | {r['optimizer']} | {r['examples_per_s']:.0f} | {r['s_per_step']:.3f} | {n_train} | "
                f"{epoch_s / 60:.1f} min | {total_h:.1f} h ({n_configs} x {len(sq['seeds'])} x {r['epochs']}) | "
                f"{together['s_per_step']:.3f} s ({k} x {r['batch']}) | x{ceiling:.2f} |")
        lines.append(line)
        print(line, flush=True)
    lines += ["", "Training steps only (no evaluation, no data loading). \"all runs\" is the device-hours of every "
              "configuration of that model the nine tables train, at that scale's epochs and seeds, on this device "
              "(QANet's hidden column is its d_model): on a CPU these "
              "are core-hours; run the benchmark on a GPU (`--set device=cuda`) for the paper scale's GPU-hours.",
              "", "The runs-together ceiling bounds what training a configuration's seeds in one pass could save per "
              "run: the seeds' batches in one step of one model (shared weights, so no more work than a pass of "
              "stacked weights would do) against one step per seed, k x (s/step) / (s/step of k batches). Below "
              "about x1.1 the device is already busy with one run, and running the seeds together cannot pay."]
    lines += [f"- {n}" for n in decl.get("notes") or []]
    out = paths.results / source / f"{name}.md"
    io.write_text(out, "\n".join(lines) + "\n")
    io.write_json(rundirs.run_dir(paths.runs, "_bench") / f"{name}.json", results)
    return OutputPage("squad timing benchmark: training throughput and device-hours of each model at each scale",
                      "benchmark", (out.name,), f"measured on {device_label(device)}")
