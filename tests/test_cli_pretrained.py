"""The command line's pretrained-encoder contract (issue 27), on a tiny random BERT written in
``tmp_path`` and a tiny benchmark folder in the SentEval layout (nothing downloaded):
``evaluate --preset DIR --benchmark-dir B --json``, ``train --dataset FILE.txt --preset DIR
--loss L --epochs E --seed S --output RUN --no-export``, ``evaluate RUN --benchmark-dir B
--json``; a bad ``--preset`` is one line naming the flag."""

import json
import os
import sys

import pytest

pytest.importorskip("keras_hub")
pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from keras_hardneg import cli  # noqa: E402
from keras_hardneg.evaluation.sts import STS_SUBSETS, STS_TASKS  # noqa: E402

SENTENCES = ["the cat sat on the mat .", "a man is playing a guitar .", "the dog sat",
             "a cat and a dog", "the man sat on the mat", "a dog is playing",
             "the cats sat", "a man and a cat"]


def _pairs(k):
    return [(SENTENCES[(i + k) % 8], SENTENCES[(3 * i + k + 1) % 8]) for i in range(6)]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    for k, (year, subsets) in enumerate(STS_SUBSETS.items()):
        folder = root / "STS" / f"{year}-en-test"
        folder.mkdir(parents=True)
        for j, subset in enumerate(subsets):
            pairs = _pairs(k + j)
            (folder / f"STS.input.{subset}.txt").write_text(
                "".join(f"{a}\t{b}\n" for a, b in pairs))
            (folder / f"STS.gs.{subset}.txt").write_text(
                "".join(f"{(i * 7 + j) % 6}\n" for i in range(len(pairs))))
    (root / "STS" / "STSBenchmark").mkdir(parents=True)
    (root / "STS" / "STSBenchmark" / "sts-test.csv").write_text("".join(
        f"main-captions\tMSRvid\t2012test\t{i}\t{i % 6}.0\t{a}\t{b}\n"
        for i, (a, b) in enumerate(_pairs(3))))
    (root / "SICK").mkdir()
    (root / "SICK" / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n" + "".join(
            f"{i}\t{a}\t{b}\t{1 + i % 4}.0\tNEUTRAL\n" for i, (a, b) in enumerate(_pairs(5))))
    return str(root)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import keras_hardneg.encoders  # noqa: F401

    module = sys.modules["keras_hardneg.encoders.pretrained_text"]
    return module.write_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


def _last_json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_zero_shot_train_and_evaluate_run(tiny, bench, tmp_path, capsys):
    assert cli.main(["evaluate", "--preset", tiny, "--benchmark-dir", bench, "--json"]) == 0
    zero = _last_json(capsys)["sts"]
    assert set(STS_TASKS) | {"avg"} <= set(zero)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES * 2) + "\n")
    run = tmp_path / "run"
    assert cli.main(["train", "--dataset", str(corpus), "--preset", tiny, "--loss", "hard",
                     "--epochs", "1", "--seed", "0", "--output", str(run), "--no-export",
                     "--batch-size", "4", "--verbose", "0"]) == 0
    recipe = json.loads((run / "recipe.json").read_text())
    assert recipe["encoder"]["name"] == "pretrained_bert"
    assert recipe["data"]["tokenizer"] == recipe["encoder"]["preset"] == os.path.abspath(tiny)
    assert recipe["loss"]["temperature"] == 0.05  # SimCSE's, kept under --loss
    assert recipe["optimizer"]["learning_rate"] == 3e-5
    assert not (run / "encoder").exists()
    capsys.readouterr()
    assert cli.main(["evaluate", str(run), "--benchmark-dir", bench, "--json"]) == 0
    tuned = _last_json(capsys)["sts"]
    assert set(STS_TASKS) | {"avg"} <= set(tuned)
    # (the step's effect on the weights is checked in tests/encoders/test_pretrained_text.py;
    # 4 steps at 3e-5 leave these few rank correlations as they were)


def test_bad_preset_is_one_line_naming_the_flag(tmp_path, bench, capsys):
    assert cli.main(["evaluate", "--preset", str(tmp_path / "nope"), "--benchmark-dir",
                     bench]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--preset" in err and "no such folder" in err
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b\n" * 10)
    assert cli.main(["train", "--dataset", str(corpus), "--preset", str(tmp_path / "nope"),
                     "--output", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--preset" in err


def test_a_run_and_its_preset_are_scored_on_whole_sentences(tiny, bench, tmp_path, capsys):
    """A pretrained encoder reads any length: ``evaluate RUN`` scores whole sentences (not
    cut at the training length, 5 ids here), like ``evaluate RUN/preset`` and the zero-shot
    ``--preset``; ``--max-tokens`` cuts them explicitly."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES * 2) + "\n")
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"data": {"max_length": 5}}))
    run = tmp_path / "run"
    assert cli.main(["train", "--dataset", str(corpus), "--preset", tiny, "--recipe",
                     str(short), "--epochs", "1", "--seed", "0", "--output", str(run),
                     "--no-export", "--batch-size", "4", "--verbose", "0"]) == 0
    capsys.readouterr()

    def sts(*args):
        assert cli.main(["evaluate", *args, "--benchmark-dir", bench, "--json"]) == 0
        got = _last_json(capsys)["sts"]
        return {task: got[task] for task in (*STS_TASKS, "avg")}

    whole = sts(str(run))
    assert sts(str(run / "preset")) == pytest.approx(whole, abs=1e-9)
    cut = sts(str(run), "--max-tokens", "5")
    assert any(abs(cut[t] - whole[t]) > 1e-6 for t in STS_TASKS)
    assert sts(str(run / "preset"), "--max-tokens", "5") == pytest.approx(cut, abs=1e-9)
    assert cli.main(["evaluate", str(run), "--benchmark-dir", bench, "--max-tokens",
                     "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "max_tokens" in err
