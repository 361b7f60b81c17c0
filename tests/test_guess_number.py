"""Tests of the "Guess the number" game (thesis §6.6, Tables 16-18)."""

from __future__ import annotations

import math

import pytest

from nlpbench.data import babi
from nlpbench.memnet import guess_number as gn

TABLE18_GUESSES = [76, 100, 1, 59, 11, 56, 54, 57]


def _table18_game() -> gn.Game:
    game = gn.Game(57, 0, 100)
    for g in TABLE18_GUESSES:
        game.guess(g)
    return game


def _expected_rounds(n: int) -> float:
    """2(1+1/n)H_n - 3: mean guesses of a uniform in-bound student for a uniform target among n values."""
    h = sum(1 / k for k in range(1, n + 1))
    return 2 * (1 + 1 / n) * h - 3


def _replay_bounds(facts: tuple[tuple[str, ...], ...]) -> tuple[int, int]:
    """Exclusive bounds implied by the facts, replayed independently of gn.Game."""
    kind, lo, hi = facts[0]
    assert kind == "range"
    min_num, max_num = int(lo) - 1, int(hi) + 1
    for kind, g, hint in facts[1:]:
        assert kind == "guess" and hint in ("smaller", "larger")
        g = int(g)
        if min_num < g < max_num:
            if hint == "smaller":
                max_num = g
            else:
                min_num = g
    return min_num, max_num


def test_table18_replays_exactly():
    rounds = _table18_game().rounds
    assert [r.round for r in rounds] == list(range(1, 9))
    assert [r.in_bound for r in rounds] == [True, False, True, True, True, True, False, True]
    assert [r.accuracy for r in rounds] == [1.0, 0.5, 0.66, 0.75, 0.8, 0.83, 0.71, 0.75]
    assert [(r.min_num, r.max_num) for r in rounds] == [
        (-1, 101), (-1, 76), (-1, 76), (1, 76), (1, 59), (11, 59), (56, 59), (56, 59)
    ]
    assert [r.hint for r in rounds] == [
        "smaller", "smaller", "larger", "smaller", "larger", "larger", "larger", None
    ]
    m = gn.game_metrics([rounds])
    assert m["accuracy"] == pytest.approx(75.0)
    assert m["success"] == 100.0
    assert m["rounds"] == 8.0
    assert (m["n_games"], m["n_success"]) == (1, 1)


def test_game_state_and_finish():
    game = _table18_game()
    assert game.found and game.finished
    with pytest.raises(ValueError):
        game.guess(57)
    # the facts hold the range and the 7 hinted rounds, not the winning one
    assert game.facts[0] == ("range", "0", "100")
    assert game.facts[1:] == [
        ("guess", "76", "smaller"), ("guess", "100", "smaller"), ("guess", "1", "larger"),
        ("guess", "59", "smaller"), ("guess", "11", "larger"), ("guess", "56", "larger"),
        ("guess", "54", "larger"),
    ]
    assert _replay_bounds(tuple(game.facts)) == (56, 59)


def test_out_of_bound_guesses_never_change_bounds():
    game = gn.Game(5, 0, 10)
    game.guess(8)  # in bound: max_num -> 8
    assert (game.min_num, game.max_num) == (-1, 8)
    for g in (9, 8, 11, -1, -5, 100):  # all out of the open interval (-1, 8)
        r = game.guess(g)
        assert not r.in_bound
        assert (game.min_num, game.max_num) == (-1, 8)
    r = game.guess(2)
    assert r.in_bound and r.hint == "larger" and (game.min_num, game.max_num) == (2, 8)
    assert r.accuracy == 0.25  # 2 in-bound of 8


def test_lost_game_stops_at_max_tries_and_is_not_in_rounds():
    lost = gn.Game(3, 0, 10, max_tries=5)
    for _ in range(5):
        lost.guess(7)
    assert lost.finished and not lost.found and len(lost.rounds) == 5
    with pytest.raises(ValueError):
        lost.guess(3)
    won = gn.Game(3, 0, 10)
    won.guess(5)
    won.guess(3)
    m = gn.game_metrics([lost.rounds, won.rounds])
    assert m["success"] == 50.0
    assert m["rounds"] == 2.0  # only the successful game
    assert m["accuracy"] == pytest.approx(100 * (1 / 5 + 1.0) / 2)  # lost: 1 in-bound of 5
    assert math.isnan(gn.game_metrics([lost.rounds])["rounds"])


def test_accuracy_mean_uses_untruncated_values():
    game = gn.Game(5, 0, 10)
    for g in (8, 9, 5):  # 2 of 3 in bound: shown 0.66, counted 2/3
        game.guess(g)
    assert game.rounds[-1].accuracy == 0.66
    assert gn.game_metrics([game.rounds])["accuracy"] == pytest.approx(200 / 3)


@pytest.mark.parametrize("lo,hi,n", [(0, 10, 600), (0, 100, 2000)])
def test_training_samples_are_valid(lo: int, hi: int, n: int):
    samples = gn.training_samples(lo, hi, n, seed=3)
    assert len(samples) == n
    voc = gn.vocab(lo, hi)
    answers = set()
    for s in samples:
        assert s.question == ("next", "guess")
        assert s.fact_ids == tuple(range(1, len(s.facts) + 1)) and s.supporting == ()
        assert s.facts[0] == ("range", str(lo), str(hi))
        min_num, max_num = _replay_bounds(s.facts)
        assert min_num < int(s.answer) < max_num
        for fact in s.facts:
            voc.encode(fact)
        voc.encode(s.question)
        voc.encode([s.answer])
        answers.add(int(s.answer))
    assert answers == set(range(lo, hi + 1))  # answers cover the range
    arrays = babi.vectorize(samples, voc, memory_size=50)
    assert arrays["stories"].shape[0] == n and arrays["stories"].shape[2] == 3


def test_training_samples_deterministic_and_prefix():
    a = gn.training_samples(0, 100, 300, seed=7)
    assert a == gn.training_samples(0, 100, 300, seed=7)
    assert a != gn.training_samples(0, 100, 300, seed=8)
    assert gn.training_samples(0, 100, 100, seed=7) == a[:100]
    assert gn.training_samples(0, 10, 0, seed=7) == []


def _game_index(sample) -> int:
    return int(sample.source.split(" game=")[1].split()[0])


def test_games_as_the_training_unit_give_every_state_of_whole_games_from_the_same_stream():
    states = gn.training_samples(0, 100, 400, seed=7)
    games = gn.training_samples(0, 100, 40, seed=7, unit="games")
    assert sorted({_game_index(s) for s in games}) == list(range(40))
    assert games == states[:len(games)]                   # the same simulated games, none cut
    nxt = gn.training_samples(0, 100, 41, seed=7, unit="games")
    assert nxt[:len(games)] == games and _game_index(nxt[-1]) == 40
    last = [s for s in games if _game_index(s) == 39]     # a whole game: it ends on the target (or max tries)
    final = gn.Game(0, 0, 100)
    final.min_num, final.max_num = _replay_bounds(last[-1].facts)
    assert final.min_num < int(last[-1].answer) < final.max_num
    assert len(games) > 40 * 5                            # about 7.5 guesses a game for 0-100
    with pytest.raises(ValueError, match="unit"):
        gn.training_samples(0, 10, 5, seed=0, unit="stories")


def test_the_games_reading_holds_out_whole_games_and_keeps_the_default_ids():
    from pathlib import Path
    from nlpbench import config
    from nlpbench.memnet.game import training_split
    from nlpbench.memnet.groups import game_groups
    params = config.load(Path(__file__).parent.parent / "params.yaml", {"scale": "cpu"})
    states = training_split(0, 10, 50, params["memnet"]["game"])
    assert [len(part) for part in states] == [45, 5]
    train, val = training_split(0, 10, 50, dict(params["memnet"]["game"], example_unit="games"))
    train_games, val_games = {_game_index(s) for s in train}, {_game_index(s) for s in val}
    assert len(train_games) == 45 and len(val_games) == 5 and not train_games & val_games
    default = set(game_groups(params))
    del params["memnet"]["game"]["example_unit"]
    assert set(game_groups(params)) == default            # `states` is the default: ids as before the key existed
    params["memnet"]["game"]["example_unit"] = "games"
    assert not set(game_groups(params)) & default


def test_vocab_is_fixed_by_range():
    voc = gn.vocab(0, 10)
    assert voc.itos[0] == babi.NIL
    assert all(t in voc for t in gn.number_tokens(0, 10))
    assert gn.number_tokens(0, 10) == [str(i) for i in range(11)]
    assert {"range", "guess", "next", "smaller", "larger"} <= set(voc.itos)
    assert len(voc) == 1 + 5 + 11
    assert len(gn.vocab(0, 100)) == 1 + 5 + 101


def test_state_sample_placeholder_answer():
    game = gn.Game(57, 0, 100)
    game.guess(76)
    s = gn.state_sample(game, None, "x")
    assert s.answer == "0" and s.source == "x"
    assert s.facts == (("range", "0", "100"), ("guess", "76", "smaller"))
    assert gn.state_sample(game, 40, "x").answer == "40"


def test_test_targets_fixed():
    t = gn.test_targets(0, 100)
    assert len(t) == 100 and all(0 <= x <= 100 for x in t)
    assert t == gn.test_targets(0, 100, seed=gn.TEST_SEED)
    assert t != gn.test_targets(0, 100, seed=gn.TEST_SEED + 1)
    assert all(0 <= x <= 10 for x in gn.test_targets(0, 10))


@pytest.mark.parametrize("n_values,tol", [(11, 0.1), (101, 0.25)])
def test_uniform_student_mean_rounds_matches_random_bst(n_values: int, tol: float):
    hi = n_values - 1
    targets = gn.test_targets(0, hi, n_games=4000, seed=11)
    transcripts = gn.play_games(gn.uniform_policy(12), targets, 0, hi)
    m = gn.game_metrics(transcripts)
    assert m["success"] == 100.0 and m["accuracy"] == 100.0
    assert m["rounds"] == pytest.approx(_expected_rounds(n_values), abs=tol)
    assert round(_expected_rounds(11), 2) == 3.59 and round(_expected_rounds(101), 1) == 7.5


def test_play_games_oracle_and_out_of_bounds_policies():
    targets = gn.test_targets(0, 100, n_games=20)
    calls = []

    def oracle(games):
        calls.append(len(games))
        return [g.target for g in games]

    rounds = gn.play_games(oracle, targets, 0, 100)
    assert calls == [20] and all(len(r) == 1 for r in rounds)
    m = gn.game_metrics(rounds)
    assert (m["accuracy"], m["success"], m["rounds"]) == (100.0, 100.0, 1.0)

    calls.clear()

    def below(games):
        calls.append(len(games))
        return [-1] * len(games)

    rounds = gn.play_games(below, targets, 0, 100, max_tries=100)
    assert calls == [20] * 100 and all(len(r) == 100 for r in rounds)
    m = gn.game_metrics(rounds)
    assert (m["accuracy"], m["success"], m["n_success"]) == (0.0, 0.0, 0)
    assert math.isnan(m["rounds"])


def test_play_games_lockstep_drops_finished_games():
    seen = []

    def policy(games):
        seen.append(sorted(g.target for g in games))
        return [g.target if g.target == 3 or len(g.rounds) == 2 else g.lo for g in games]

    rounds = gn.play_games(policy, [3, 7, 9], 0, 10)
    assert seen == [[3, 7, 9], [7, 9], [7, 9]]
    assert [len(r) for r in rounds] == [1, 3, 3]
    with pytest.raises(ValueError):
        gn.play_games(lambda games: [0], [3, 7], 0, 10)


def test_format_transcript_table18():
    text = gn.format_transcript(_table18_game().rounds, "t-MEM-NN", 0, 100, 1000)
    lines = text.splitlines()
    for expected in [
        "Model: t-MEM-NN", "min: 0", "max: 100", "Train examples: 1000",
        "**** TESTING MODEL STARTS ****", "Select a number between 0 and 100",
        "| Round | Selection | Within bounds? | Accuracy | min_num | max_num | Hint |",
        "| 1 | 76 | Correct | 1.0 | -1 | 101 | Target is a smaller number |",
        "| 2 | 100 | Wrong | 0.5 | -1 | 76 | Target is a smaller number |",
        "| 3 | 1 | Correct | 0.66 | -1 | 76 | Target is a larger number |",
        "| 7 | 54 | Wrong | 0.71 | 56 | 59 | Target is a larger number |",
        "| 8 | 57 | Correct | 0.75 | — | — | — |",
        "Congratulations, the target is 57",
        "You found the correct answer after 8 rounds",
        "Accuracy: 0.75",
    ]:
        assert expected in lines, expected
    assert lines.index("Model: t-MEM-NN") < lines.index("**** TESTING MODEL STARTS ****")
    assert lines.index("Congratulations, the target is 57") < lines.index("Accuracy: 0.75")


def test_format_transcript_lost_game():
    game = gn.Game(3, 0, 10, max_tries=4)
    for _ in range(4):
        game.guess(7)
    text = gn.format_transcript(game.rounds, "MemN2N", 0, 10, 100)
    assert "The target was not found after 4 rounds" in text.splitlines()
    assert "Congratulations" not in text
    assert text.splitlines()[-1] == "Accuracy: 0.25"
