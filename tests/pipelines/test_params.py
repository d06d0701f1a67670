"""The stages' parameter dataclasses, and the project's YAML blocks that map onto them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from leap_kalm.pipelines.params import KalmIngestParams, LeapParams, TextIngestParams

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_leap_defaults_follow_the_paper():
    config = LeapParams.from_dict({})
    assert (config.env, config.train_method) == ("alfworld", "sft")
    assert (config.rollout_max_steps, config.eval_max_steps) == (20, 30)
    assert config.eval_splits == ["valid_seen", "valid_unseen"]
    assert config.eval_sampling["temperature"] == 0.0
    assert LeapParams.from_dict(None) == config


def test_given_values_replace_the_defaults_and_defaults_are_not_shared():
    config = LeapParams.from_dict(
        {"train_method": "dpo", "history_window": None, "sampling": {"temperature": 1.0}}
    )
    assert config.train_method == "dpo" and config.history_window is None
    assert config.sampling == {"temperature": 1.0}
    first, second = LeapParams(), LeapParams()
    first.sampling["temperature"] = 2.0
    assert second.sampling["temperature"] == 0.7


def test_parameters_are_not_mutated():
    params = {"train_method": "dpo", "sampling": {"temperature": 1.0}}
    LeapParams.from_dict(params)
    assert params == {"train_method": "dpo", "sampling": {"temperature": 1.0}}


@pytest.mark.parametrize(
    ("params_class", "params", "message"),
    [
        (
            LeapParams,
            {"trian_method": "sft", "seed": 1},
            r"LeapParams: unknown keys \['trian_method'\]",
        ),
        (
            LeapParams,
            {"train_method": "ppo"},
            r"leap.train_method must be one of \('sft', 'dpo'\), got 'ppo'",
        ),
        (
            LeapParams,
            {"trained_steps": "kept"},
            r"leap.trained_steps must be one of \('trajectory', 'corrected', 'first'\), got 'kept'",
        ),
        (
            LeapParams,
            {"trained_corrections": 0},
            r"leap.trained_corrections must be at least 1 or null, got 0",
        ),
        (
            LeapParams,
            {"trained_steps": "corrected", "capped_correction_verbs": ["go"]},
            r"leap.capped_correction_verbs needs leap.trained_steps: corrected and "
            r"leap.trained_corrections set, got trained_steps 'corrected', trained_corrections None",
        ),
        (
            LeapParams,
            {
                "trained_steps": "trajectory",
                "trained_corrections": 3,
                "uncapped_invalid_corrections": True,
            },
            r"leap.uncapped_invalid_corrections needs leap.trained_steps: corrected and "
            r"leap.trained_corrections set, got trained_steps 'trajectory', trained_corrections 3",
        ),
        (
            LeapParams,
            {
                "trained_steps": "corrected",
                "trained_corrections": 3,
                "uncapped_invalid_corrections": "yes",
            },
            r"leap.uncapped_invalid_corrections must be true or false, got 'yes'",
        ),
        (
            LeapParams,
            {"invalid_corrections_as_recovery": 1},
            r"leap.invalid_corrections_as_recovery must be true or false, got 1",
        ),
        (
            LeapParams,
            {"invalid_corrections_as_recovery": True, "correction_packing": "branches"},
            r"leap.invalid_corrections_as_recovery needs leap.correction_packing: segments "
            r"\(a recovery step adds a turn a branch cannot hold\), got 'branches'",
        ),
        (
            LeapParams,
            {
                "trained_steps": "corrected",
                "trained_corrections": 3,
                "capped_correction_verbs": "go",
            },
            r"LeapParams.capped_correction_verbs must be a list, got the string 'go' "
            r"\(one item is written \[go\]\)",
        ),
        (
            TextIngestParams,
            {"source": "download"},
            "source must be 'generated' or 'real', got 'download'",
        ),
        (TextIngestParams, {"n_game": 3}, r"TextIngestParams: unknown keys \['n_game'\]"),
        (KalmIngestParams, {"episodes": 3}, r"KalmIngestParams: unknown keys \['episodes'\]"),
    ],
)
def test_bad_parameters_are_named(params_class, params, message):
    with pytest.raises(ValueError, match=message):
        params_class.from_dict(params)


def test_unknown_keys_error_lists_the_expected_ones():
    with pytest.raises(ValueError, match="expected some of .*'eval_splits'.*'train_method'"):
        LeapParams.from_dict({"iterations": 3})


def _blocks(env: str, name: str) -> dict[str, dict]:
    """``<world>.<block>`` mappings of every parameters file of a configuration environment."""
    found = {}
    for path in sorted((CONF / env).glob("parameters*.yml")):
        for world, blocks in (yaml.safe_load(path.read_text()) or {}).items():
            if isinstance(blocks, dict) and isinstance(blocks.get(name), dict):
                found[f"{path.name}:{world}"] = blocks[name]
    return found


@pytest.mark.parametrize("env", ["base", "test", "learn"])
def test_the_configured_blocks_map_onto_their_dataclasses(env):
    from leap_kalm.envs.registry import world_names
    from leap_kalm.teachers import TeacherParams
    from leap_kalm.training.dpo import DPOParams
    from leap_kalm.training.sft import SFTParams

    leap = _blocks(env, "leap")
    assert leap, f"no leap block in conf/{env}"
    for block in leap.values():
        LeapParams.from_dict(block)
    for block in _blocks(env, "teacher").values():
        TeacherParams.from_dict(block)
    from leap_kalm.pipelines.leap_iteration import iteration_settings

    for iteration in (0, 1):  # later_iterations overrides from iteration 1 on
        for block in _blocks(env, "train_sft").values():
            SFTParams.from_dict(iteration_settings(block, iteration))
        for block in _blocks(env, "train_dpo").values():
            DPOParams.from_dict(iteration_settings(block, iteration))
    text_worlds = set(world_names("text"))
    for where, block in _blocks(env, "ingest").items():
        world = where.split(":")[1]
        (TextIngestParams if world in text_worlds else KalmIngestParams).from_dict(block)
