"""`ground_llm` nodes: KALM's grounding records from the offline data, then the grounded LLM."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from leap_kalm.schemas import ConfigMixin, ModelRef

logger = logging.getLogger(__name__)


@dataclass
class GroundLLMParams(ConfigMixin):
    """One world's grounding settings (``<world>.ground_llm`` in ``parameters_ground_llm.yml``).

    Attributes:
        tasks: How records are drawn (``llm.grounding_tasks.GroundingTaskParams``).
        state_loss_weight: Weight of the state loss (KALM: 0.5).
        action_loss_weight: Weight of the action loss (KALM: 0.5).
        train: Trainer settings (``training.grounding.GroundingParams`` without ``spec``),
            plus ``num_processes`` for ``accelerate launch``.
        seed: Training seed.
    """

    tasks: dict[str, Any] = field(default_factory=dict)
    state_loss_weight: float = 0.5
    action_loss_weight: float = 0.5
    train: dict[str, Any] = field(default_factory=dict)
    seed: int = 0


def grounding_spec(
    kalm_offline: dict[str, Any], world: str, params: GroundLLMParams
) -> dict[str, Any]:
    """The grounding layers' shape: state size from the data, actions from the data's own
    metadata (KALM's ``action_type``/``action_dim``) or else from the world's registry entry."""
    from leap_kalm.envs.registry import get_world

    actions = np.asarray(kalm_offline["actions"])
    known = get_world(world, "kalm").ACTIONS
    kind = str(kalm_offline.get("action_type") or known["kind"])
    dim = (
        actions.shape[-1]
        if kind == "continuous"
        else int(kalm_offline.get("action_dim") or known["dim"])
    )
    return {
        "obs_dim": int(np.asarray(kalm_offline["observations"]).shape[-1]),
        "action_kind": kind,
        "action_dim": int(dim),
        "state_loss_weight": params.state_loss_weight,
        "action_loss_weight": params.action_loss_weight,
        "state_scale": change_scale(kalm_offline),
        "outcome_scale": change_scale(kalm_offline, over="episode"),
    }


def change_scale(kalm_offline: dict[str, Any], over: str = "step") -> list[float]:
    """Per number of a state, the spread (standard deviation) of its change over the valid
    transitions of the data (``over="step"``: the unit the residual state head predicts
    next states in) or from each episode's first state to its last (``"episode"``: the
    unit of consequence prediction); floored at 1% of the largest spread, so numbers that
    never move do not blow the loss up."""
    obs = np.asarray(kalm_offline["observations"], dtype=np.float64)
    nxt = np.asarray(kalm_offline["next_observations"], dtype=np.float64)
    masks = np.asarray(kalm_offline["masks"]).reshape(obs.shape[:2]).astype(bool)
    if over == "step":
        change = (nxt - obs)[masks]
    elif over == "episode":
        valid = masks.any(axis=1)
        last = masks.shape[1] - 1 - np.argmax(masks[:, ::-1], axis=1)  # last valid step
        change = (nxt[np.arange(len(obs)), last] - obs[:, 0])[valid]
    else:
        raise ValueError(f"change_scale over must be 'step' or 'episode', got {over!r}")
    spread = change.std(axis=0) if len(change) else np.ones(obs.shape[-1])
    floor = max(float(spread.max()) * 0.01, 1e-6)
    return [float(max(s, floor)) for s in spread]


def build_grounding_records(
    kalm_offline: dict[str, Any], ground_params: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """KALM's four grounding tasks over the offline episodes, a share of episodes held out.

    Returns:
        ``(training records, held-out records)``, the held-out ones drawn from episodes
        the training records never show.
    """
    from leap_kalm.llm.grounding_tasks import (
        GroundingTaskParams,
        episodes_of,
        grounding_records,
        split_episodes,
    )

    config = GroundLLMParams.from_dict(ground_params)
    tasks = GroundingTaskParams.from_dict(config.tasks)
    train, held_out = split_episodes(episodes_of(kalm_offline), tasks.held_out_fraction, tasks.seed)
    records, held = grounding_records(train, tasks), grounding_records(held_out, tasks)
    logger.info(
        "grounding records: %d from %d episodes, %d held out from %d episodes",
        len(records), len(train), len(held), len(held_out),
    )  # fmt: skip
    return records, held


def train_grounded_llm(
    grounding_records: list[dict[str, Any]],
    kalm_offline: dict[str, Any],
    ground_params: dict[str, Any],
    model_params: dict[str, Any],
    world: str,
) -> ModelRef:
    """Ground the ``model`` LLM in the world's states and actions (transformers ``Trainer``).

    Returns:
        The grounded model directory (moved into the catalog), with its spec and the
        training metrics in ``meta``.
    """
    from leap_kalm.llm.student import model_load_kwargs
    from leap_kalm.training.runner import train_student

    config = GroundLLMParams.from_dict(ground_params)
    spec = grounding_spec(kalm_offline, world, config)
    return train_student(
        "grounding",
        grounding_records,
        model_params,
        {**config.train, "spec": spec},
        config.seed,
        {"trainable": True, **model_load_kwargs(model_params)},
        meta={"world": world, "spec": spec, "tasks": asdict(_tasks(config))},
    )


def _tasks(config: GroundLLMParams) -> Any:
    from leap_kalm.llm.grounding_tasks import GroundingTaskParams

    return GroundingTaskParams.from_dict(config.tasks)


def evaluate_grounding(
    grounded_llm: ModelRef,
    kalm_offline: dict[str, Any],
    grounding_held_out: list[dict[str, Any]],
    ground_params: dict[str, Any],
    model_params: dict[str, Any],
) -> dict[str, Any]:
    """Dynamics-prediction error on every transition of the held-out episodes: the grounded
    LLM beside an MLP regressor (scikit-learn) fitted on the training episodes'
    transitions, and beside predicting no change.

    Returns:
        Mean squared errors per state number (``grounded_mse``, ``mlp_mse``,
        ``no_change_mse``) and the transition counts.
    """
    from sklearn.neural_network import MLPRegressor

    from leap_kalm.llm.grounded import load_grounded, predict_targets
    from leap_kalm.llm.grounding_tasks import dynamics_record, episodes_of
    from leap_kalm.llm.student import model_load_kwargs

    config = GroundLLMParams.from_dict(ground_params)
    held = {r["episode"] for r in grounding_held_out}
    episodes = episodes_of(kalm_offline)
    test = [
        dynamics_record(e, t) for e in episodes if e.index in held for t in range(len(e.actions))
    ]
    train = [
        dynamics_record(e, t)
        for e in episodes
        if e.index not in held
        for t in range(len(e.actions))
    ]
    if not test:
        raise ValueError("evaluate_grounding: no held-out episodes (tasks.held_out_fraction is 0?)")
    model, tokenizer = load_grounded(grounded_llm.path, **model_load_kwargs(model_params))
    truth = np.array([r["states"][1] for r in test], dtype=np.float32)
    predicted = predict_targets(model, tokenizer, test)
    spec = asdict(model.spec)
    mlp = MLPRegressor(
        hidden_layer_sizes=(256, 256), max_iter=200, early_stopping=True, random_state=config.seed
    )
    mlp.fit(
        _transition_inputs(train, spec), np.array([r["states"][1] for r in train], dtype=np.float32)
    )
    mlp_predicted = mlp.predict(_transition_inputs(test, spec))
    starts = np.array([r["states"][0] for r in test], dtype=np.float32)
    report = {
        "held_out_transitions": len(test),
        "train_transitions": len(train),
        "grounded_mse": float(np.mean((predicted - truth) ** 2)),
        "mlp_mse": float(np.mean((mlp_predicted - truth) ** 2)),
        "no_change_mse": float(np.mean((starts - truth) ** 2)),
    }
    logger.info("dynamics prediction on held-out transitions: %s", report)
    return report


def _transition_inputs(records: list[dict[str, Any]], spec: dict[str, Any]) -> np.ndarray:
    """State followed by the action (one-hot when discrete), per dynamics record."""
    states = np.array([r["states"][0] for r in records], dtype=np.float32)
    actions = np.array([r["actions"][0] for r in records])
    if spec["action_kind"] == "discrete":
        actions = np.eye(spec["action_dim"], dtype=np.float32)[actions.astype(int)]
    return np.concatenate([states, actions.reshape(len(records), -1).astype(np.float32)], axis=1)
