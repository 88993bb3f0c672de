"""benchmarks/zoo_twins.py (issue 51), the driver's cell mechanics without training: a graph
or from-scratch text cell runs its command once, writes its figures as the run wrote them with
the command made portable, installs the weights seed and drops every other seed's run folder,
and a cell whose JSON exists is not run again. The training commands are replaced by a fake
that writes a run folder; the cells themselves are checked in tests/test_zoo_twins.py.
"""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import zoo_twins  # noqa: E402

RESULTS = {"svm_accuracy": 0.75, "svm_accuracy_std": 0.05, "epochs_run": 2,
           "steps_per_epoch": 3, "seconds": 12.34, "data": "a TU set",
           "sts": {"avg": 55.5}, "senteval": {"avg": 66.6}}


@pytest.fixture
def driver(tmp_path, monkeypatch):
    """The driver writing cells under tmp_path, its runs faked; returns (calls, installs)."""
    work = str(tmp_path / "work")
    monkeypatch.setattr(zoo_twins, "WORK", work)
    monkeypatch.setattr(zoo_twins, "OUT", str(tmp_path / "cells"))
    monkeypatch.setattr(zoo_twins, "_code", lambda: "abc1234")
    calls, installs = [], []

    def fake_run(cmd):
        calls.append(cmd)
        run_dir = cmd[cmd.index("--output") + 1]
        os.makedirs(run_dir)
        for name, record in (("results", RESULTS), ("history", {"loss": [2.0, 1.5]}),
                             ("recipe", {"data": {"path": work + "/x"}})):
            with open(os.path.join(run_dir, f"{name}.json"), "w") as f:
                json.dump(record, f)
        return "", 7.0

    monkeypatch.setattr(zoo_twins, "_run", fake_run)
    monkeypatch.setattr(zoo_twins, "install_graph", lambda entry: installs.append(entry))
    monkeypatch.setattr(zoo_twins, "install_scratch", lambda entry: installs.append(entry))
    monkeypatch.setattr(zoo_twins, "tu_folder", lambda entry: "MUTAG")
    return calls, installs


@pytest.mark.parametrize("kind", ["graph", "scratch"])
def test_a_cell_writes_its_figures_installs_seed_0_and_drops_other_seeds(driver, kind):
    calls, installs = driver
    cell = getattr(zoo_twins, f"{kind}_cell")
    command = getattr(zoo_twins, f"{kind}_command")
    entry = "graphcl-nt_xent-mutag" if kind == "graph" else "simcse-ntxent-wiki"
    for seed in (0, 1):
        assert cell(entry, seed) is True
    assert installs == [entry]  # the weights seed only
    run_dirs = [cmd[cmd.index("--output") + 1] for cmd in calls]
    assert os.path.isdir(run_dirs[0]) and not os.path.exists(run_dirs[1])
    assert calls[1] == command(entry, 1)

    folder = "graph" if kind == "graph" else "text"
    with open(zoo_twins._cell_path(folder, entry, 1)) as f:
        record = json.load(f)
    assert record["seed"] == 1 and record["code"] == "abc1234"
    assert record["command_seconds"] == 7.0 and record["train_seconds"] == 12.3
    assert record["final_loss"] == 1.5
    assert zoo_twins.WORK not in json.dumps(record)  # run folders as RUN_ROOT
    assert "RUN_ROOT/" in record["command"] and record["recipe"]["data"]["path"] == "RUN_ROOT/x"
    if kind == "graph":
        assert record["svm_accuracy"] == 0.75 and record["svm_accuracy_std"] == 0.05
    else:
        assert record["sts"] == {"avg": 55.5} and record["senteval"] == {"avg": 66.6}

    assert cell(entry, 1) is False  # its JSON exists: not trained again
    assert len(calls) == 2


def test_install_run_copies_the_weights_and_writes_a_portable_trained_recipe(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(zoo_twins, "WORK", str(tmp_path / "work"))
    run_dir, target = tmp_path / "work" / "run", tmp_path / "models" / "e"
    (run_dir / "preset").mkdir(parents=True)
    (run_dir / "preset" / "model.weights.h5").write_text("new")
    (run_dir / "preset" / "model_card.md").write_text(f"trained in {run_dir}")
    (run_dir / "history.json").write_text('{"loss": [1.0]}')
    (target / "preset").mkdir(parents=True)
    (target / "preset" / "stale.h5").write_text("old")
    (target / "encoder").mkdir()  # a SavedModel the run did not export again: kept
    shared = os.path.join(os.path.dirname(zoo_twins.ROOT), "shared", "data")
    trained = {"name": "run", "data": {"folder": shared + "/tudataset/MUTAG",
                                       "path": shared + "/text/a.txt", "limit": 5}}

    path = zoo_twins._install_run(str(run_dir), str(target), "e", trained)

    assert sorted(os.listdir(target / "preset")) == ["model.weights.h5", "model_card.md"]
    assert (target / "encoder").is_dir()
    assert (target / "history.json").read_text() == '{"loss": [1.0]}'
    assert (target / "preset" / "model_card.md").read_text() == "trained in RUN_ROOT/run"
    with open(path) as f:
        written = json.load(f)
    # relative to models/<entry>/, as load_recipe resolves a recipe file's paths
    assert written == {"name": "e", "data": {"folder": "../../../shared/data/tudataset/MUTAG",
                                             "path": "../../../shared/data/text/a.txt",
                                             "limit": 5}}
    assert trained["name"] == "run"  # the caller's dict is not changed
