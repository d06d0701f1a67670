"""Small real inputs for the LEAP stage tests: a few generated ALFWorld games, their
scripted-expert logs and privileged states, failed random "student" rollouts, and
tiny-model settings that train or roll out in seconds."""

from __future__ import annotations

import copy
import random
import tempfile
from typing import Any

import pytest

N_TRAIN = 3
EXPERT_MAX_STEPS = 50
ROLLOUT_STEPS = 4

# tiny-model LEAP settings: a few steps per episode, short answers
LEAP = {
    "env": "alfworld",
    "rollout_max_steps": 3,
    "eval_max_steps": 3,
    "batch_size": 4,
    "sampling": {"temperature": 1.0, "max_new_tokens": 12},
    "eval_sampling": {"temperature": 0.0, "max_new_tokens": 12},
    "eval_splits": ["valid_seen", "valid_unseen"],
    "eval_fresh_process": False,  # test_evaluate.py runs the spawned path once
}
# one optimizer step of a rank-2 LoRA: seconds on the tiny model
TRAIN = {"max_steps": 1, "per_device_train_batch_size": 2, "lora": {"r": 2, "alpha": 4}}
TEACHER = {"kind": "scripted", "realizability": 0}


def snapshot(*values: Any) -> tuple:
    """Deep copies to compare a node's inputs with after it ran (inputs are never mutated)."""
    return copy.deepcopy(values)


@pytest.fixture(scope="session")
def alfworld_games(tmp_path_factory) -> list[dict[str, Any]]:
    """The games index ``ingest`` would write: 3 train games, 1 per evaluation split."""
    from leap_kalm.envs.alfworld.world import list_games

    root = str(tmp_path_factory.mktemp("alfworld_games"))
    sizes = {"train": N_TRAIN, "valid_seen": 1, "valid_unseen": 1}
    return [g for split, n in sizes.items() for g in list_games(split, n, seed=0, games_dir=root)]


@pytest.fixture(scope="session")
def train_games(alfworld_games) -> list[dict[str, Any]]:
    return [g for g in alfworld_games if g["split"] == "train"]


@pytest.fixture(scope="session")
def expert_logs(train_games) -> list[dict[str, Any]]:
    """The handcoded expert on every train game (all of them win)."""
    from leap_kalm.envs.alfworld.world import run_expert

    logs = [run_expert(g, EXPERT_MAX_STEPS, seed=i) for i, g in enumerate(train_games)]
    assert all(t["success"] and t["steps"] for t in logs)
    return logs


@pytest.fixture(scope="session")
def privileged_states(train_games) -> list[dict[str, Any]]:
    from leap_kalm.envs.alfworld.world import privileged_state

    return [privileged_state(g) for g in train_games]


def random_student(game: dict[str, Any], n_steps: int = ROLLOUT_STEPS, seed: int = 0) -> dict:
    """A rollout of a student that picks random admissible actions (a LEAP trajectory)."""
    from leap_kalm.envs.alfworld import AlfWorldEnv
    from leap_kalm.schemas import make_trajectory

    env = AlfWorldEnv(game["path"], max_steps=n_steps)
    observation, info = env.reset()
    rng = random.Random(seed)
    steps, won = [], False
    for _ in range(n_steps):
        candidates = info["admissible_commands"]
        action = rng.choice(candidates)
        steps.append(
            {
                "observation": observation,
                "candidate_actions": candidates,
                "reason": "guess",
                "action": action,
            }
        )
        observation, _, terminated, truncated, info = env.step(action)
        won = bool(info["won"])
        if terminated or truncated:
            break
    env.close()
    return make_trajectory(
        env="alfworld",
        game_id=game["game_id"],
        split=game["split"],
        task=env.task,
        task_type=game["task_type"],
        model_id="random-student",
        steps=steps,
        success=won,
        iteration=1,
    )


@pytest.fixture(scope="session")
def failed_rollouts(train_games) -> list[dict[str, Any]]:
    """One failed random-student rollout per train game."""
    rollouts = [random_student(g, seed=i) for i, g in enumerate(train_games)]
    assert not any(t["success"] for t in rollouts)
    return rollouts


@pytest.fixture(scope="session")
def corrections(failed_rollouts, privileged_states, alfworld_games) -> list[dict[str, Any]]:
    """The scripted teacher's corrections of ``failed_rollouts``."""
    from leap_kalm.pipelines.correct.nodes import correct_failed_rollouts

    return correct_failed_rollouts(
        failed_rollouts, privileged_states, alfworld_games, TEACHER, LEAP
    )


@pytest.fixture(scope="session")
def annotated_logs(expert_logs, privileged_states) -> list[dict[str, Any]]:
    from leap_kalm.pipelines.annotate.nodes import annotate_expert_logs

    return annotate_expert_logs(expert_logs, privileged_states, TEACHER, LEAP)


@pytest.fixture(scope="session")
def sft_records_0(annotated_logs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Iteration 0's ``(records, pool)`` from the annotated expert logs."""
    from leap_kalm.pipelines.train_sft.nodes import build_sft_records

    return build_sft_records(annotated_logs, [], [], [], LEAP, 0)


@pytest.fixture
def staging(monkeypatch, tmp_path):
    """Trainers stage their output under this test's tmp_path (not the system temp dir)."""
    root = tmp_path / "staging"
    root.mkdir()
    monkeypatch.setattr(
        "leap_kalm.training.runner.staging_dir",
        lambda prefix: tempfile.mkdtemp(prefix=f"{prefix}-", dir=root),
    )
    return root


@pytest.fixture(scope="session")
def sft_student(tiny_model_dir, sft_records_0, tmp_path_factory):
    """Iteration 0's student: one LoRA SFT step of the tiny model on the expert records."""
    from leap_kalm.pipelines.train_sft.nodes import train_sft_student

    root = tmp_path_factory.mktemp("sft_student")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "leap_kalm.training.runner.staging_dir",
            lambda prefix: tempfile.mkdtemp(prefix=f"{prefix}-", dir=root),
        )
        return train_sft_student(sft_records_0[0], None, TRAIN, LEAP, {"name": tiny_model_dir}, 0)
