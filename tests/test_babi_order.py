"""Task-16 fact-order patterns and augmentation (Shen thesis §6.3.3-6.3.4)
on the real en-10k task-16 training file."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from nlpbench.dmn import fact_order as bo
from nlpbench.data.babi import BabiFormatError, Sample, load_task, parse_file
from nlpbench.data.fetch import FetchError, PreparedDataChanged


@pytest.fixture(scope="module")
def task16(babi_root) -> list[Sample]:
    train, _ = load_task(babi_root, "en-10k", 16)
    return train


@pytest.fixture(scope="module")
def patterns(task16):
    return bo.make_patterns(task16, bo.PatternConfig())


@pytest.fixture(scope="module")
def origin(task16) -> dict[str, Sample]:
    return {s.source: s for s in task16}


def _origin_of(sample: Sample, origin: dict[str, Sample]) -> Sample:
    assert sample.source.endswith(f" (pattern {bo.natural_pattern(sample)})"), sample.source
    return origin[bo.origin_source(sample.source)]


def test_natural_patterns_are_a_diagnostic_only(task16):
    hist = bo.pattern_histogram(task16)
    assert len(task16) == 10_000 and sum(hist.values()) == 10_000
    # The file is far from balanced (§6.3.3 never says how its patterns were found): patterns must be
    # constructed, not sorted out.
    assert max(hist.values()) > 2 * 1666 and min(hist.values()) < 1666
    for s in task16[:200]:
        assert bo.reorder(s, bo.natural_pattern(s)).facts == s.facts


def test_block_and_split_sizes_are_as_stated(patterns, task16):
    assert sorted(patterns) == [1, 2, 3, 4, 5, 6]
    for k, parts in patterns.items():
        assert {s: len(v) for s, v in parts.items()} == {"train": 1200, "val": 133, "test": 333}
    # block k holds questions (k-1)*1666 .. k*1666 - 1 of the file, each used once; the last 4 are unused
    index = {s.source: i for i, s in enumerate(task16)}
    for k, parts in patterns.items():
        used = sorted(index[bo.origin_source(s.source)] for v in parts.values() for s in v)
        assert used == list(range((k - 1) * 1666, k * 1666))
    cfg300 = bo.PatternConfig(test_size=300)
    assert (cfg300.n_test(), cfg300.n_val()) == (300, 137)


def test_every_derived_sample_keeps_its_answer_and_its_facts(patterns, origin):
    for parts in patterns.values():
        for samples in parts.values():
            for s in samples:
                o = _origin_of(s, origin)
                assert s.answer == o.answer and s.question == o.question
                assert sorted(s.facts) == sorted(o.facts)
                assert s.fact_ids == tuple(range(1, len(s.facts) + 1))
                slots = set(bo.supporting_positions(o))
                assert all(s.facts[i] == o.facts[i] for i in range(len(o.facts)) if i not in slots)


def test_supporting_facts_appear_in_the_patterns_order(patterns, origin):
    for k, parts in patterns.items():
        for samples in parts.values():
            for s in samples:
                o = _origin_of(s, origin)
                pos = bo.supporting_positions(s)
                # F1, F2, F3 keep their text and annotation order, and stand in the story as Table 6.1 says
                assert [s.facts[p] for p in pos] == [o.facts[p] for p in bo.supporting_positions(o)]
                assert tuple(sorted(range(3), key=pos.__getitem__)) == bo.PATTERNS[k]
                assert sorted(pos) == sorted(bo.supporting_positions(o))
                assert bo.natural_pattern(s) == k


def test_no_test_story_leaks_into_training_or_validation(patterns):
    test_keys = [bo.content_key(s) for parts in patterns.values() for s in parts["test"]]
    seen = {bo.content_key(s) for parts in patterns.values() for split in ("train", "val") for s in parts[split]}
    assert len(set(test_keys)) == len(test_keys) == 6 * 333     # test sets are disjoint, too
    assert not seen & set(test_keys)


def test_augmented_set_has_the_size_the_spec_says(patterns, origin):
    aug = bo.make_augmented(patterns, bo.AugmentConfig())
    assert len(aug["train"]) == 6 * 1200 * 6 == 43_200 and len(aug["val"]) == 6 * 133 * 6
    groups = [aug["train"][i:i + 6] for i in range(0, len(aug["train"]), 6)]
    for group in groups[::97]:
        assert [bo.natural_pattern(s) for s in group] == [1, 2, 3, 4, 5, 6]
        assert len({_origin_of(s, origin).source for s in group}) == 1
        assert {s.answer for s in group} == {group[0].answer}
    test_keys = {bo.content_key(s) for parts in patterns.values() for s in parts["test"]}
    assert not test_keys & {bo.content_key(s) for s in aug["train"] + aug["val"]}
    option_b = bo.make_augmented(patterns, bo.AugmentConfig(source="pattern1", augment_val=False))
    assert (len(option_b["train"]), len(option_b["val"])) == (7_200, 133)


def test_order_cue_of_patterns_2_5_6_and_the_distractor_shuffle_that_removes_it(task16, patterns, origin):
    """In the file every entity's species fact precedes its colour fact; patterns with F3 before F2 make the
    answer entity the one exception (a cue), and distractor_order='shuffle' takes the cue away."""
    natural = bo.order_cue(task16)
    assert natural["distractors"] == natural["distractors_species_first"] == 30_000
    assert natural["answer_entity"] == natural["answer_entity_species_first"] == 10_000
    for k, parts in patterns.items():
        cue = bo.order_cue(parts["train"])
        f2_before_f3 = bo.PATTERNS[k].index(1) < bo.PATTERNS[k].index(2)
        assert cue["answer_entity_species_first"] == (1200 if f2_before_f3 else 0)
        assert cue["distractors_species_first"] == cue["distractors"]
    shuffled = bo.make_patterns(task16, bo.PatternConfig(distractor_order="shuffle"))
    for k, parts in shuffled.items():
        cue = bo.order_cue(parts["train"])
        assert 0.4 < cue["distractors_species_first"] / cue["distractors"] < 0.6
        for s, kept in zip(parts["test"], patterns[k]["test"]):   # same questions, answers, support order
            assert s.source == kept.source and s.answer == kept.answer and bo.natural_pattern(s) == k
            assert sorted(s.facts) == sorted(kept.facts)
            assert [s.facts[p] for p in bo.supporting_positions(s)] == [kept.facts[p] for p in
                                                                        bo.supporting_positions(kept)]
    with pytest.raises(ValueError, match="distractor_order"):
        bo.make_patterns(task16, bo.PatternConfig(distractor_order="random"))


def test_derivation_is_deterministic_given_the_seed(task16, patterns):
    again = bo.make_patterns(task16, bo.PatternConfig())
    assert again == patterns
    other = bo.make_patterns(task16, bo.PatternConfig(seed=1))
    assert other[1]["test"] != patterns[1]["test"]
    shuffled = bo.make_patterns(task16, bo.PatternConfig(block_order="shuffled"))
    assert {len(v) for parts in shuffled.values() for v in parts.values()} == {1200, 133, 333}


def test_write_read_round_trip_is_exact(tmp_path, patterns):
    splits = bo.flatten_patterns(patterns)
    params = dataclasses.asdict(bo.PatternConfig())
    manifest = bo.write_dataset(tmp_path / "patterns", splits, params)
    assert manifest.name == "manifest.json"
    back = bo.read_dataset(tmp_path / "patterns")
    assert back == splits and bo.unflatten_patterns(back) == patterns
    assert bo.read_manifest(tmp_path / "patterns")["params"] == params
    aug = bo.make_augmented(patterns)
    bo.write_dataset(tmp_path / "aug", aug, {"source": "all_patterns"})
    assert bo.read_dataset(tmp_path / "aug") == aug
    assert not list((tmp_path / "patterns").glob(".*.tmp"))          # atomic writes leave no temp files
    first = (tmp_path / "patterns" / "pattern1_test.txt").read_text().splitlines()
    assert first[0].startswith("1 ") and "\t" in first[9]             # bAbI format: 9 facts, then the question


def test_a_data_set_derived_again_unchanged_keeps_its_files_and_their_modification_times(tmp_path, patterns):
    """Derived again from the same bAbI file, a DMN data set is left as it was, so the pattern and augmented jobs
    that read it do not look out of date; a changed split is written anew."""
    import os
    out = tmp_path / "p"
    splits = {"pattern1_test": patterns[1]["test"][:3], "pattern2_test": patterns[2]["test"][:3]}
    bo.write_dataset(out, splits, {})
    old = 1_000_000_000 * 10**9                      # a modification time long past, set by hand
    for path in out.iterdir():
        os.utime(path, ns=(old, old))
    bo.write_dataset(out, splits, {})
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == {
        "pattern1_test.txt": old, "pattern2_test.txt": old, "manifest.json": old}
    bo.write_dataset(out, {**splits, "pattern2_test": patterns[2]["test"][3:6]}, {})
    changed = {p.name for p in out.iterdir() if p.stat().st_mtime_ns != old}
    assert changed == {"pattern2_test.txt", "manifest.json"}
    assert bo.read_dataset(out)["pattern2_test"] == patterns[2]["test"][3:6]


def test_tampered_or_malformed_files_are_named(tmp_path, patterns):
    out = tmp_path / "p"
    bo.write_dataset(out, {"pattern1_test": patterns[1]["test"][:3]}, {})
    path = out / "pattern1_test.txt"
    path.write_text(path.read_text().replace("\t", " ", 1))
    with pytest.raises(PreparedDataChanged, match=rf"pattern1_test.txt was changed after the data step prepared it "
                       rf".*; delete {out} and run the data step again \(nlpbench data p\)"):
        bo.read_dataset(out)
    with pytest.raises(BabiFormatError, match=r"pattern1_test.txt:10: question line"):
        parse_file(path)
    with pytest.raises(FetchError, match=r"manifest.json not found.*nlpbench data nothing"):
        bo.read_dataset(tmp_path / "nothing")


def test_bad_samples_and_settings_are_rejected(task16):
    two = dataclasses.replace(task16[0], supporting=task16[0].supporting[:2])
    with pytest.raises(ValueError, match=r"qa16_basic-induction_train.txt:10: .*3 distinct"):
        bo.reorder(two, 1)
    with pytest.raises(ValueError, match="pattern 7|expected 1..6"):
        bo.reorder(task16[0], 7)
    with pytest.raises(ValueError, match="block_order"):
        bo.make_patterns(task16, bo.PatternConfig(block_order="random"))
    with pytest.raises(ValueError, match="need 6 x block_size"):
        bo.make_patterns(task16[:5000], bo.PatternConfig())
    with pytest.raises(ValueError, match="would not survive"):
        bo.format_samples([dataclasses.replace(task16[0], question=("What", "color"))])
    assert Counter(len(s.supporting) for s in task16) == {3: 10_000}
