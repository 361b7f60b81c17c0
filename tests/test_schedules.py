"""nlpbench.textgen.schedules: KL annealing (Bahuleyan thesis §4.6.1, Eqs. 4.17-4.18) and word dropout (§4.6.2)."""

from __future__ import annotations

import math

import pytest
import torch

from nlpbench.textgen.schedules import (
    KLSchedule,
    ScheduleError,
    apply_word_dropout,
    kl_schedule,
    kl_weight,
    word_dropout_schedule,
)

torch.set_num_threads(1)

# Check values of Eq. 4.17 worked by hand, printed to 6 decimals.
TANH_CHECK = {0: 0.000123, 1000: 0.000911, 2000: 0.006693, 2500: 0.017986, 3000: 0.047426}


@pytest.mark.parametrize("i, expected", sorted(TANH_CHECK.items()))
def test_tanh_3000_check_values(i: int, expected: float) -> None:
    assert kl_weight("tanh-3000", i) == pytest.approx(expected, abs=5e-7)


def test_tanh_3000_is_held_at_its_value_at_3000() -> None:
    s = kl_schedule("tanh-3000")
    held = (math.tanh(-1.5) + 1) / 2  # (tanh((3000 - 4500)/1000) + 1)/2 = 0.0474258...
    assert s(3000) == pytest.approx(held, rel=1e-15)
    assert round(held, 6) == 0.047426  # "λ reaches 0.047" (thesis §4.6.4); the authors' code keeps 6 decimals
    for i in (3001, 4500, 10_000, 24_380, 10**7):
        assert s(i) == s(3000)


def test_unstopped_tanh_reference_values() -> None:
    assert kl_weight("tanh", 4500) == pytest.approx(0.5, abs=1e-12)
    assert kl_weight("tanh", 6000) == pytest.approx(0.952574, abs=5e-7)
    assert kl_weight("tanh", 10**6) == pytest.approx(1.0)


def test_linear_10000_formula_and_hold() -> None:
    s = kl_schedule("linear-10000")
    assert s(0) == 0.0
    assert s(1) == 1 / 200_000
    assert s(5000) == pytest.approx(0.025)
    assert s(10_000) == pytest.approx(0.05)  # "λ reaches 0.05 after 10000 iterations" (thesis §4.6.4)
    assert s(10_001) == s(10_000) == s(50_000)
    assert kl_weight("linear", 400_000) == 1.0  # never held: capped at 1


@pytest.mark.parametrize("name, value", [("const-1.0", 1.0), ("const-0.001", 0.001), ("none-1.0", 1.0),
                                         ("const-0", 0.0), ("const-1e-3", 0.001)])
def test_constant_schedules(name: str, value: float) -> None:
    s = kl_schedule(name)
    assert [s(i) for i in (0, 1, 3000, 10**6)] == [value] * 4


@pytest.mark.parametrize("name", ["tanh-3000", "linear-10000", "tanh", "linear"])
def test_annealing_is_monotone_and_within_unit_interval(name: str) -> None:
    s = kl_schedule(name)
    values = [s(i) for i in range(0, 30_000, 7)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a <= b for a, b in zip(values, values[1:]))
    assert values[0] < 0.001  # starts (almost) at zero: the model starts as an autoencoder (§4.6.1)


def test_table_4_1_variants_parse() -> None:
    """The schedules of the Table 4.1 runs as params.yaml declares them (textgen.runs over textgen.settings)."""
    from pathlib import Path

    from nlpbench import config
    from nlpbench.textgen.groups import run_settings

    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "paper"})
    got = {}
    for name, run in params["textgen"]["runs"].items():
        if run["corpus"] == "snli":
            t = run_settings(params, name)["train"]
            got[run["label"]] = (kl_schedule(t["kl_schedule"]), word_dropout_schedule(t["word_dropout"]), t["optimizer"])
    assert got["ADAM-tanh-3000"][0] == KLSchedule("tanh", stop=3000) and got["ADAM-tanh-3000"][2] == "adam"
    assert got["SGD-tanh-3000"][:2] == got["ADAM-tanh-3000"][:2] and got["SGD-tanh-3000"][2] == "sgd"
    assert got["ADAM-linear-10000"][0] == KLSchedule("linear", stop=10000)
    assert got["ADAM-NoAnneal-1.0"][0](5000) == 1.0 and got["ADAM-NoAnneal-0.001"][0](5000) == 0.001
    assert got["Deterministic AE"][0](5000) == 0.0
    for label in ("ADAM-NoAnneal-1.0", "ADAM-NoAnneal-0.001", "Deterministic AE"):   # no word dropout (§4.6.4)
        assert got[label][1](20000, 100) == 0.0
    assert got["ADAM-tanh-3000"][1].rate_for_epoch(10) == 0.45


@pytest.mark.parametrize("name", ["cosine-3000", "tanh3000", "tanh-", "const-", "linear-10k", ""])
def test_unknown_kl_schedule_names_key_and_value(name: str) -> None:
    with pytest.raises(ScheduleError) as e:
        kl_schedule(name, key="models.vae.kl_schedule")
    assert "models.vae.kl_schedule" in str(e.value) and repr(name) in str(e.value)


def test_negative_iteration_rejected() -> None:
    with pytest.raises(ValueError, match="iteration"):
        kl_weight("tanh-3000", -1)


def test_thesis_word_dropout_schedule_per_epoch() -> None:
    # p = 0 in epoch 1, +0.05 after every epoch, at most 0.5 (§4.6.4): epoch 10 uses 0.45, 0.5 from epoch 11.
    s = word_dropout_schedule("thesis")
    assert [s.rate_for_epoch(e) for e in range(1, 13)] == [
        0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.5]
    assert s == word_dropout_schedule("epoch-0.05-0.5")


def test_word_dropout_as_function_of_iteration() -> None:
    s = word_dropout_schedule("thesis")
    per_epoch = 2438  # 78k sentences / batch 32
    assert s(0, per_epoch) == s(1, per_epoch) == s(per_epoch, per_epoch) == 0.0
    assert s(per_epoch + 1, per_epoch) == 0.05
    assert s(10 * per_epoch, per_epoch) == 0.45
    values = [s(i, per_epoch) for i in range(0, 40 * per_epoch, 101)]
    assert all(a <= b for a, b in zip(values, values[1:])) and max(values) == 0.5


def test_constant_and_no_word_dropout() -> None:
    assert word_dropout_schedule("none")(12345, 100) == 0.0
    assert word_dropout_schedule("const-0.25")(1, 100) == word_dropout_schedule("const-0.25")(10**6, 100) == 0.25


@pytest.mark.parametrize("name", ["linear", "const-1.5", "epoch-0.05", "dropout"])
def test_unknown_word_dropout_names_key(name: str) -> None:
    with pytest.raises(ScheduleError) as e:
        word_dropout_schedule(name, key="word_dropout")
    assert "word_dropout" in str(e.value) and repr(name) in str(e.value)


def test_apply_word_dropout_extremes_and_protected_tokens() -> None:
    bos, pad, unk = 2, 0, 1
    inputs = torch.tensor([[bos, 5, 6, 7, 3, pad], [bos, 8, 9, 3, pad, pad]])
    assert apply_word_dropout(inputs, 0.0, unk, (bos, pad)) is inputs
    all_dropped = apply_word_dropout(inputs, 1.0, unk, (bos, pad))
    expected = torch.tensor([[bos, unk, unk, unk, unk, pad], [bos, unk, unk, unk, pad, pad]])
    assert torch.equal(all_dropped, expected)


def test_apply_word_dropout_rate_and_determinism() -> None:
    inputs = torch.full((200, 50), 9)
    a = apply_word_dropout(inputs, 0.3, 1, (2, 0), generator=torch.Generator().manual_seed(0))
    b = apply_word_dropout(inputs, 0.3, 1, (2, 0), generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    rate = (a == 1).float().mean().item()
    assert abs(rate - 0.3) < 0.02  # 10,000 Bernoulli draws: sd 0.0046
    with pytest.raises(ValueError):
        apply_word_dropout(inputs, 1.2, 1, (2, 0))
