"""``python -m leap_kalm.compare`` pairs two runs' per-game outcomes."""

from __future__ import annotations

import json

import pytest


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _outcomes(iteration, won, scores, env="webshop"):
    return [
        {"env": env, "iteration": iteration, "split": "test" if i % 2 else "eval",
         "game_id": f"g{i}", "success": w, "score": s}
        for i, (w, s) in enumerate(zip(won, scores, strict=True))
    ]  # fmt: skip


def test_compare_pairs_two_runs_game_by_game(tmp_path, capsys):
    from leap_kalm.compare import main

    base = _write(tmp_path / "a.jsonl", _outcomes(0, [1, 0, 0, 1], [1.0, 0.5, 0.2, 1.0]))
    # the new run: two iterations; the latest (1) is taken unless asked for
    new = _write(
        tmp_path / "b.jsonl",
        _outcomes(0, [0, 0, 0, 0], [0, 0, 0, 0]) + _outcomes(1, [1, 1, 0, 0], [1.0, 1.0, 0.4, 0.5]),
    )
    out = tmp_path / "paired.csv"
    assert main([str(base), str(new), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "webshop iteration 1, 4 games" in printed
    import pandas as pd

    table = pd.read_csv(out).set_index("split")
    assert list(table.index) == ["eval", "test", "all"]
    everything = table.loc["all"]
    assert everything["n"] == 4 and everything["won_both"] == 1
    assert everything["won_only_new"] == 1 and everything["won_only_baseline"] == 1
    assert everything["success_delta"] == pytest.approx(0.0)
    # score changes 0, +0.5, +0.2, -0.5
    assert everything["score_delta"] == pytest.approx(0.05)
    assert table.loc["test", "n"] == 2 and table.loc["test", "score_delta"] == pytest.approx(0.0)
    # an iteration asked for explicitly
    assert main([str(base), str(new), "--iteration", "0", "--out", str(out)]) == 0
    assert pd.read_csv(out).set_index("split").loc["all", "won_only_baseline"] == 2


def test_compare_names_what_is_wrong(tmp_path, capsys):
    from leap_kalm.compare import main

    good = _write(tmp_path / "a.jsonl", _outcomes(0, [1], [1.0]))
    assert main([str(good), str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: no such outcomes file" in capsys.readouterr().err

    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(_outcomes(0, [1], [1.0])[0]) + "\n{not json\n")
    assert main([str(good), str(broken)]) == 2
    assert "broken.jsonl, line 2: malformed JSON" in capsys.readouterr().err

    no_score = _outcomes(0, [1], [1.0])
    del no_score[0]["score"]
    assert main([str(good), str(_write(tmp_path / "c.jsonl", no_score))]) == 2
    assert "c.jsonl, record 1 ('g0'): no 'score'" in capsys.readouterr().err

    assert main([str(good), str(good), "--iteration", "3"]) == 2
    assert "no webshop iteration 3 (it has [0])" in capsys.readouterr().err

    two_worlds = _write(
        tmp_path / "d.jsonl", _outcomes(0, [1], [1.0]) + _outcomes(0, [1], [1.0], "alfworld")
    )
    assert main([str(good), str(two_worlds)]) == 2
    assert "choose one with --env" in capsys.readouterr().err

    other_games = [{**r, "game_id": "elsewhere"} for r in _outcomes(0, [1], [1.0])]
    assert main([str(good), str(_write(tmp_path / "e.jsonl", other_games))]) == 2
    assert "share no held-out game" in capsys.readouterr().err
