"""The "Guess the number" game of the Tolias thesis, §6.6 (Tables 16-18), as memory-network data.

A teacher picks an integer target in [lo, hi] (inclusive; the paper's scenarios are 0-10 and 0-100); the
student guesses until it finds the target or `max_tries` (100 in the paper) guesses are spent. Rules, recovered
exactly from the transcript of Table 18 (§6.6):

* exclusive bounds `(min_num, max_num)` start at `(lo - 1, hi + 1)`;
* a guess g is "correct" (within bounds) iff `min_num < g < max_num`; the winning guess counts as correct;
* the hint is always relative to the target: "smaller" if target < g, "larger" if target > g;
* only in-bound guesses tighten the bounds (`max_num = g` after "smaller", `min_num = g` after "larger");
  out-of-bound guesses change nothing;
* running accuracy = in-bound guesses / guesses, shown truncated to 2 decimals (2/3 -> 0.66, 5/7 -> 0.71).

Encoding as memory-network input (the thesis does not give one; our reading A-7, docs/memnet.md):
facts = `range <lo> <hi>` followed by one `guess <g> smaller|larger` sentence per past (non-winning) round;
query = `next guess`; answer = the number token `str(g)` of the next guess. Each game state is one example.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from nlpbench.data import babi

MAX_TRIES = 100  # thesis §6.6: "The maximum number of tries is set to 100 for both scenarios"
N_TEST_GAMES = 100  # thesis §6.6: "100 distinct test games, in all cases"
TEST_SEED = 606  # fixed, arbitrary seed of the test targets (not in the thesis, which says only "a fixed seed")

HINTS = ("smaller", "larger")
HINT_TEXT = {"smaller": "Target is a smaller number", "larger": "Target is a larger number"}
RANGE_WORD, GUESS_WORD = "range", "guess"
QUERY: tuple[str, ...] = ("next", "guess")


@dataclass(frozen=True)
class Round:
    """One row of the Table 18 transcript.

    `min_num`/`max_num` are the exclusive bounds shown BEFORE the guess; `accuracy` is the running accuracy
    after it, truncated to 2 decimals with integer arithmetic (2/3 -> 0.66); `hint` is "smaller"/"larger"
    (relative to the target), None when found.
    """

    round: int
    selection: int
    in_bound: bool
    n_in_bound: int
    accuracy: float
    min_num: int
    max_num: int
    hint: str | None

    @property
    def found(self) -> bool:
        return self.hint is None


class Game:
    """One game against a teacher holding `target` in [lo, hi] (thesis §6.6; rules in the module docstring)."""

    def __init__(self, target: int, lo: int, hi: int, max_tries: int = MAX_TRIES) -> None:
        if lo > hi:
            raise ValueError(f"empty range: lo={lo} > hi={hi}")
        if not lo <= target <= hi:
            raise ValueError(f"target {target} is outside [{lo}, {hi}]")
        if max_tries < 1:
            raise ValueError(f"max_tries={max_tries} must be at least 1")
        self.target, self.lo, self.hi, self.max_tries = int(target), int(lo), int(hi), int(max_tries)
        self.min_num, self.max_num = self.lo - 1, self.hi + 1
        self.rounds: list[Round] = []

    @property
    def found(self) -> bool:
        return bool(self.rounds) and self.rounds[-1].found

    @property
    def finished(self) -> bool:
        return self.found or len(self.rounds) >= self.max_tries

    def guess(self, g: int) -> Round:
        """Play one guess and return its transcript row; ValueError if the game is over."""
        if self.finished:
            raise ValueError("the game is finished")
        g = int(g)
        in_bound = self.min_num < g < self.max_num
        n_in = (self.rounds[-1].n_in_bound if self.rounds else 0) + in_bound
        n = len(self.rounds) + 1
        hint = None if g == self.target else ("smaller" if self.target < g else "larger")
        row = Round(n, g, in_bound, n_in, (100 * n_in // n) / 100, self.min_num, self.max_num, hint)
        if in_bound and hint == "smaller":
            self.max_num = g
        elif in_bound and hint == "larger":
            self.min_num = g
        self.rounds.append(row)
        return row

    @property
    def facts(self) -> list[tuple[str, ...]]:
        """`("range", lo, hi)` then `("guess", g, hint)` for every round with a hint (the winning one has none)."""
        facts = [(RANGE_WORD, str(self.lo), str(self.hi))]
        facts += [(GUESS_WORD, str(r.selection), r.hint) for r in self.rounds if r.hint is not None]
        return facts


def number_tokens(lo: int, hi: int) -> list[str]:
    """The answer tokens `str(lo) .. str(hi)`, in numeric order."""
    return [str(i) for i in range(lo, hi + 1)]


def vocab(lo: int, hi: int) -> babi.Vocab:
    """`<nil>`, the words (guess, larger, next, range, smaller) and every number token lo..hi in numeric order.

    Fixed by the range alone, so it never depends on which numbers the training games happened to use.
    Guesses outside [lo, hi] (possible only for a policy that is not a model over number tokens) are not in it.
    """
    words = sorted({RANGE_WORD, GUESS_WORD, *QUERY, *HINTS})
    return babi.Vocab((babi.NIL, *words, *number_tokens(lo, hi)))


def state_sample(game: Game, answer: int | None, source: str) -> babi.Sample:
    """The current state of `game` as a bAbI-style sample (facts ids 1..n, no supporting facts).

    `answer` is the next guess; when None, `str(game.lo)` is put in as a placeholder, so such samples are only
    for prediction (their answer must not be scored or trained on).
    """
    facts = tuple(game.facts)
    answer_tok = str(game.lo if answer is None else int(answer))
    return babi.Sample(facts, tuple(range(1, len(facts) + 1)), QUERY, answer_tok, (), source)


def _uniform_move(rng: np.random.Generator, game: Game) -> int:
    """A uniform integer strictly inside the current bounds (the simulated student of §6.6)."""
    return int(rng.integers(game.min_num + 1, game.max_num))


def simulated_games(lo: int, hi: int, seed: int, max_tries: int = MAX_TRIES):
    """Endless simulated games, each as its list of (state -> next guess) examples in order of play.

    Targets are uniform in [lo, hi] and moves uniform inside the open bounds, all from `default_rng(seed)`.
    """
    rng = np.random.default_rng(seed)
    n_game = 0
    while True:
        game, states = Game(int(rng.integers(lo, hi + 1)), lo, hi, max_tries), []
        while not game.finished:
            g = _uniform_move(rng, game)
            src = f"guess_number[{lo}-{hi}] seed={seed} game={n_game} round={len(game.rounds) + 1}"
            states.append(state_sample(game, g, src))
            game.guess(g)
        yield states
        n_game += 1


def training_samples(
    lo: int, hi: int, n_examples: int, seed: int, max_tries: int = MAX_TRIES, unit: str = "states"
) -> list[babi.Sample]:
    """`n_examples` training examples from simulated games (our readings of §6.6's "training examples").

    unit "states": exactly n_examples (state -> next guess) examples, taken from whole games in order (the last
    game may be cut); "games": every state of n_examples whole games. Either way a smaller set with the same
    seed is a prefix of a larger one.
    """
    if n_examples < 0:
        raise ValueError(f"n_examples={n_examples} must be non-negative")
    if unit not in ("states", "games"):
        raise ValueError(f"unit={unit!r}: a training example is one of 'states' or 'games'")
    games = simulated_games(lo, hi, seed, max_tries)
    if unit == "games":
        return [state for _ in range(n_examples) for state in next(games)]
    samples: list[babi.Sample] = []
    while len(samples) < n_examples:
        samples.extend(next(games))
    return samples[:n_examples]


def test_targets(lo: int, hi: int, n_games: int = N_TEST_GAMES, seed: int = TEST_SEED) -> list[int]:
    """Targets of the test games, uniform in [lo, hi] from `default_rng(seed)` (TEST_SEED by default)."""
    return [int(t) for t in np.random.default_rng(seed).integers(lo, hi + 1, size=n_games)]


test_targets.__test__ = False  # type: ignore[attr-defined]  # not a pytest test

Policy = Callable[[list[Game]], Sequence[int]]


def uniform_policy(seed: int) -> Policy:
    """A student that always guesses uniformly inside the current bounds (the training-data student)."""
    rng = np.random.default_rng(seed)
    return lambda games: [_uniform_move(rng, g) for g in games]


def play_games(
    policy: Policy, targets: Sequence[int], lo: int, hi: int, max_tries: int = MAX_TRIES
) -> list[list[Round]]:
    """Play one game per target in lockstep; the transcripts, in target order.

    `policy(games)` is called once per round with all unfinished games (so a model can answer them in one
    batch) and returns one guess each; finished games drop out.
    """
    games = [Game(t, lo, hi, max_tries) for t in targets]
    active = list(games)
    while active:
        moves = list(policy(active))
        if len(moves) != len(active):
            raise ValueError(f"policy returned {len(moves)} guesses for {len(active)} games")
        for game, g in zip(active, moves):
            game.guess(g)
        active = [g for g in active if not g.finished]
    return [g.rounds for g in games]


def game_metrics(transcripts: Sequence[Sequence[Round]]) -> dict[str, float]:
    """Accuracy, Success and Rounds of thesis §6.6 (Tables 16-17).

    accuracy: mean over games of (in-bound guesses / guesses), in %, using the untruncated per-game value;
    success: % of games whose target was found within max_tries;
    rounds: mean number of guesses over successful games only (NaN if none).
    """
    if not transcripts or any(not t for t in transcripts):
        raise ValueError("need at least one game, each with at least one round")
    accs = [t[-1].n_in_bound / len(t) for t in transcripts]
    wins = [len(t) for t in transcripts if t[-1].found]
    return {
        "accuracy": 100.0 * float(np.mean(accs)),
        "success": 100.0 * len(wins) / len(transcripts),
        "rounds": float(np.mean(wins)) if wins else math.nan,
        "n_games": len(transcripts),
        "n_success": len(wins),
    }


def format_transcript(rounds: Sequence[Round], model_name: str, lo: int, hi: int, n_train: int) -> str:
    """Markdown rendering of one game in the format of thesis Table 18.

    The winning row shows "—" for min_num, max_num and Hint, as the paper prints none for it.
    """
    if not rounds:
        raise ValueError("a transcript needs at least one round")
    lines = [
        f"Model: {model_name}", "", f"min: {lo}", "", f"max: {hi}", "", f"Train examples: {n_train}", "",
        "**** TESTING MODEL STARTS ****", "", f"Select a number between {lo} and {hi}", "",
        "| Round | Selection | Within bounds? | Accuracy | min_num | max_num | Hint |",
        "|---:|---:|---|---:|---:|---:|---|",
    ]
    for r in rounds:
        ok = "Correct" if r.in_bound else "Wrong"
        if r.found:
            lines.append(f"| {r.round} | {r.selection} | {ok} | {r.accuracy} | — | — | — |")
        else:
            lines.append(
                f"| {r.round} | {r.selection} | {ok} | {r.accuracy} | {r.min_num} | {r.max_num} "
                f"| {HINT_TEXT[r.hint]} |"
            )
    last = rounds[-1]
    lines.append("")
    if last.found:
        lines += [
            f"Congratulations, the target is {last.selection}", "",
            f"You found the correct answer after {len(rounds)} rounds", "",
        ]
    else:
        lines += [f"The target was not found after {len(rounds)} rounds", ""]
    lines.append(f"Accuracy: {last.accuracy}")
    return "\n".join(lines) + "\n"
