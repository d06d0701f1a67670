"""`offline_rl` nodes: d3rlpy policies on real data, and on real + imagined data (KALM)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from leap_kalm.envs.registry import get_world
from leap_kalm.training.offline_rl import (
    NotTrained,
    OfflineRLParams,
    repeat_episodes,
    select_episodes,
)

logger = logging.getLogger(__name__)


def _action_size(world: str) -> int | None:
    actions = get_world(world, "kalm").ACTIONS
    return int(actions["dim"]) if actions["kind"] == "discrete" else None


def _policy_label(level: str | None) -> str:
    """How logs and ``NotTrained`` reasons name a real + imagined policy."""
    return f"the real + imagined {level} policy" if level else "the real + imagined policy"


def _level_words(level: str | None) -> str:
    """``"easy "`` for a per-level policy's messages, ``""`` for the joint one."""
    return f"{level} " if level else ""


def _not_trained(reason: str) -> NotTrained:
    """Log why a policy is not trained and return the ``NotTrained`` the catalog saves."""
    logger.warning(reason)
    return NotTrained(reason)


def _check_repeats(repeats: dict[str, int], imagined: dict[str, Any], world: str) -> None:
    """``imagined_repeats`` may name any imagination level of the world; one that this run
    has no data for (a KALM file of another level, or a level not imagined) is left out
    with a log line, so the default ``{easy: 10}`` does not stop a run on a rephrase file.

    Raises:
        ValueError: For a name that is not one of the world's imagination levels.
    """
    from leap_kalm.pipelines.imagine.nodes import imagination_world

    levels = tuple(imagination_world(world).IMAGINATION_LEVELS)
    unknown = sorted(set(repeats) - set(levels))
    if unknown:
        raise ValueError(
            f"{world}: offline_rl imagined_repeats names {unknown}, which are not imagination "
            f"levels; {world}'s levels are {list(levels)}"
        )
    absent = sorted(set(repeats) - set(imagined))
    if absent:
        logger.info(
            "%s: offline_rl imagined_repeats names %s, which this run has no imagined data for "
            "(it has %s); left out",
            world,
            absent,
            sorted(imagined),
        )


def train_policy(
    kalm_offline: dict[str, Any],
    offline_rl_params: dict[str, Any],
    world: str,
    kalm_imagined: dict[str, Any] | None = None,
    history: list[dict[str, float]] | None = None,
    level: str | None = None,
    **imagined: dict[str, Any] | None,
) -> Any:
    """Fit the configured d3rlpy algorithm on the real data, mixed with imagined data:
    KALM's own generated rollouts when ``kalm_imagined_data`` is given, else the imagined
    levels given as keyword arguments. With neither argument: real data only.

    ``level`` names the one imagination level of a per-level policy (KALM's and
    ImagineBench's protocol: real data + that level's imagined data, evaluated on that
    level); ``None`` for the real-only policy and for the joint one on every level.

    Returns:
        The fitted d3rlpy algorithm (saved as ``.d3`` by the catalog); d3rlpy's per-epoch
        metrics are appended to ``history`` when it is given. When imagined data is expected
        (the imagined levels are inputs) and none exists, a ``NotTrained`` saying so: the
        real-only policy beside it still trains. The same when ``imagined_episodes:
        goal_consistent`` leaves no imagined rollout.
    """
    from leap_kalm.llm.encoder import InstructionEncoder
    from leap_kalm.training.offline_rl import concat_datasets, to_mdp_dataset, train_offline_rl

    config = OfflineRLParams.from_dict(offline_rl_params)
    action_size = _action_size(world)
    encoder = InstructionEncoder()
    real = to_mdp_dataset(kalm_offline, encoder.encode, action_size, config.wordings)
    mixed = None
    if kalm_imagined is not None:
        from leap_kalm.pipelines.imagine.nodes import labelled_kalm_rollouts

        labelled = labelled_kalm_rollouts(kalm_imagined, world)  # raises when the level is unknown
        if level is not None and kalm_imagined["level"] != level:
            return _not_trained(
                f"{world}: kalm_imagined_data holds {kalm_imagined['level']} rollouts, so "
                f"{_policy_label(level)} has no imagined data and is not trained"
            )
        imagined = {kalm_imagined["level"]: labelled}
    elif imagined and all(data is None for data in imagined.values()):
        return _not_trained(
            f"{world}: no imagined data, so {_policy_label(level)} is not trained; run "
            f"`kedro run --pipeline=imagine --namespaces={world}` first or pass "
            "--params kalm_imagined_data=PATH"
        )
    imagined = {k: v for k, v in imagined.items() if v is not None}
    if imagined:  # policy_real has no imagined levels and shares these parameters
        _check_repeats(config.imagined_repeats, imagined, world)
    if config.imagined_episodes == "goal_consistent" and imagined:  # policy_real has none
        imagined = {k: select_episodes(v, v["goal_consistent"]) for k, v in imagined.items()}
        imagined = {k: v for k, v in imagined.items() if len(v["masks"])}
        if not imagined:
            return _not_trained(
                f"{world}: no imagined {_level_words(level)}rollout reaches its goal, so "
                "imagined_episodes: "
                f"goal_consistent leaves nothing to train on and {_policy_label(level)} "
                "is not trained; imagine more goals (imagine.n_per_level) or pass "
                f"--params {world}.offline_rl.imagined_episodes=all"
            )
    if imagined:
        imagined = {k: v for k, v in imagined.items() if np.asarray(v["masks"]).any()}
        if not imagined:
            return _not_trained(
                f"{world}: the imagined {_level_words(level)}rollouts have no step "
                f"(the grounded LLM ended every one at once), so {_policy_label(level)} is "
                "not trained; ground the LLM longer or imagine more goals"
            )
    imagined = {
        k: repeat_episodes(v, config.imagined_repeats[k]) if k in config.imagined_repeats else v
        for k, v in imagined.items()
    }
    if imagined:
        mixed = concat_datasets(
            [
                to_mdp_dataset(data, encoder.encode, action_size, config.wordings)
                for data in imagined.values()
            ]
        )
        if not mixed.episodes:
            return _not_trained(
                f"{world}: no imagined {_level_words(level)}rollout has a transition "
                "to learn from (d3rlpy drops an episode of one step that ends without reaching "
                f"its goal: it has no next state), so {_policy_label(level)} is not trained; "
                "imagine more goals (imagine.n_per_level) or ground the LLM longer"
            )
    logger.info(
        "%s: %s on %d real%s episodes, %d steps",
        world, config.algo, len(real.episodes),
        f" + {len(mixed.episodes)} imagined ({mixed.transition_count} transitions, "
        f"{config.imagined_ratio:.0%} of each batch)" if mixed else "",
        config.n_steps,
    )  # fmt: skip
    return train_offline_rl(real, mixed, config, discrete=action_size is not None, history=history)


def train_policy_logged(
    kalm_offline: dict[str, Any],
    offline_rl_params: dict[str, Any],
    world: str,
    kalm_imagined: dict[str, Any] | None = None,
    level: str | None = None,
    **imagined: dict[str, Any] | None,
) -> tuple[Any, list[dict[str, float]]]:
    """:func:`train_policy`, also returning d3rlpy's per-epoch metrics (the learning curve)."""
    history: list[dict[str, float]] = []
    policy = train_policy(
        kalm_offline, offline_rl_params, world, kalm_imagined, history=history, level=level,
        **imagined,
    )  # fmt: skip
    return policy, history


def plot_offline_rl_curves(world: str, **histories: list[dict[str, float]]) -> Any:
    """The policies' d3rlpy losses per epoch, one panel per metric (``policy_real``,
    ``policy_kalm``)."""
    from leap_kalm.plots import d3rlpy_curves

    return d3rlpy_curves(histories, f"{world}: offline RL losses")
