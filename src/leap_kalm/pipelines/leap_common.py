"""Glue shared by LEAP's stage nodes: parameters, environment and teacher dispatch, model loading.

A new text environment (WebShop) plugs in here: an episode factory, a privileged-state
function and a scripted teacher; the stage nodes stay unchanged.
"""

from __future__ import annotations

import functools
import logging
import tempfile
from dataclasses import dataclass, field
from typing import Any

from leap_kalm.schemas import ConfigMixin, ModelRef

logger = logging.getLogger(__name__)


@dataclass
class LeapParams(ConfigMixin):
    """One LEAP iteration's settings (``<env>.leap`` in ``parameters_leap.yml``).

    Attributes:
        env: Environment name (``alfworld``).
        train_method: ``sft`` (DAgger-style aggregation) or ``dpo`` (corrected vs original).
        history_window: Earlier steps shown in the student's prompt (``null``: all).
        rollout_max_steps: Step cap of training rollouts (LEAP: 20).
        eval_max_steps: Step cap of evaluation rollouts (LEAP: 30).
        n_rollout_games: Train games rolled out per iteration (``null``: all).
        batch_size: Episodes decoded together.
        sampling: Rollout sampling settings (``SamplingParams``).
        eval_sampling: Evaluation sampling settings (greedy by default).
        eval_splits: Splits evaluated.
        val_fraction: Share of trajectories held out from SFT training.
        seed: Seed for subsampling and sampling.
    """

    env: str = "alfworld"
    train_method: str = "sft"
    history_window: int | None = 2
    rollout_max_steps: int = 20
    eval_max_steps: int = 30
    n_rollout_games: int | None = None
    batch_size: int = 8
    sampling: dict[str, Any] = field(
        default_factory=lambda: {"temperature": 0.7, "top_p": 0.95, "max_new_tokens": 80}
    )
    eval_sampling: dict[str, Any] = field(
        default_factory=lambda: {"temperature": 0.0, "max_new_tokens": 80}
    )
    eval_splits: list[str] = field(default_factory=lambda: ["valid_seen", "valid_unseen"])
    val_fraction: float = 0.15
    seed: int = 0

    def __post_init__(self) -> None:
        if self.train_method not in ("sft", "dpo"):
            raise ValueError(f"leap.train_method must be 'sft' or 'dpo', got {self.train_method!r}")


@dataclass
class TeacherParams(ConfigMixin):
    """Which teacher corrects and annotates (``<env>.teacher``).

    Attributes:
        kind: ``scripted`` (privileged, per environment) or ``llm`` (any OpenAI-compatible model).
        realizability: 0–100, how much privileged information a reason may reveal.
        client: ``ClientParams`` for ``llm`` (base_url, model, ...).
        max_attempts: Replies tried per trajectory by the LLM teacher.
    """

    kind: str = "scripted"
    realizability: float = 0.0
    client: dict[str, Any] = field(default_factory=dict)
    max_attempts: int = 3

    def __post_init__(self) -> None:
        if self.kind not in ("scripted", "llm"):
            raise ValueError(f"teacher.kind must be 'scripted' or 'llm', got {self.kind!r}")


# -- environments -----------------------------------------------------------------
def episode_specs(env: str, games: list[dict[str, Any]], split: str, max_steps: int) -> list[Any]:
    """Episodes to play for one split of a games index."""
    from leap_kalm.llm.agent import EpisodeSpec

    if env == "alfworld":
        from leap_kalm.envs.alfworld import AlfWorldEnv

        return [
            EpisodeSpec(
                game_id=g["game_id"],
                make_env=functools.partial(AlfWorldEnv, g["path"], max_steps=max_steps),
                split=split,
                task_type=g["task_type"],
            )
            for g in games
            if g["split"] == split
        ]
    raise ValueError(f"no LEAP environment called {env!r} (known: alfworld)")


def privileged_state_for(env: str, game: dict[str, Any]) -> dict[str, Any]:
    if env == "alfworld":
        from leap_kalm.envs.alfworld import privileged_state

        return privileged_state(game["path"])
    raise ValueError(f"no privileged state for environment {env!r}")


def render_privileged(env: str, state: dict[str, Any]) -> str:
    if env == "alfworld":
        from leap_kalm.envs.alfworld import render_privileged_state

        return render_privileged_state(state)
    raise ValueError(f"no privileged-state rendering for environment {env!r}")


class TeacherAdapter:
    """One call shape for scripted and LLM teachers: ``correct(trajectory, privileged, game)``."""

    def __init__(self, env: str, config: TeacherParams) -> None:
        self.env = env
        self.config = config
        self.client = None
        if config.kind == "scripted":
            if env != "alfworld":
                raise ValueError(f"no scripted teacher for {env!r}; use teacher.kind: llm")
            from leap_kalm.teachers.alfworld import ScriptedAlfWorldTeacher

            self.teacher = ScriptedAlfWorldTeacher(config.realizability)
        else:
            from leap_kalm.llm.client import ChatClient, ClientParams
            from leap_kalm.teachers.llm import LLMTeacher

            self.client = ChatClient(ClientParams.from_dict(config.client))
            self.teacher = LLMTeacher(self.client, env, config.realizability, config.max_attempts)

    def correct(
        self, trajectory: dict[str, Any], privileged: dict[str, Any], game: dict[str, Any]
    ) -> dict[str, Any]:
        if self.config.kind == "scripted":
            return self.teacher.correct(trajectory, privileged, game["path"])
        return self.teacher.correct(trajectory, privileged, render_privileged(self.env, privileged))

    def annotate(self, trajectory: dict[str, Any], privileged: dict[str, Any]) -> list[str]:
        return self.teacher.annotate(trajectory, privileged)

    def usage(self) -> dict[str, Any]:
        return self.client.usage.as_dict() if self.client is not None else {}


# -- models -----------------------------------------------------------------------
def student_ref(
    previous: ModelRef | None, model_params: dict[str, Any], iteration: int
) -> ModelRef | dict[str, Any]:
    """The model an iteration starts from: the previous student, or the base model at iteration 0."""
    if iteration > 0 and previous is None:
        raise FileNotFoundError(
            f"LEAP iteration {iteration} needs the student of iteration {iteration - 1}, which does not exist; "
            f"run iteration {iteration - 1} first (kedro run --pipeline=leap_iter --params leap_iteration={iteration - 1})"
        )
    if previous is not None and previous.kind == "skipped":
        raise ValueError(f"the previous student at {previous.path} was skipped, not trained")
    return previous if previous is not None and iteration > 0 else model_params


def model_load_kwargs(
    model_params: dict[str, Any], keys: tuple[str, ...] = ("device", "dtype")
) -> dict[str, Any]:
    """The ``model`` parameters that also apply to trained students (device, dtype)."""
    return {k: model_params[k] for k in keys if model_params.get(k) not in (None, "")}


def model_id_of(ref: ModelRef | dict[str, Any]) -> str:
    return ref.path if isinstance(ref, ModelRef) else str(ref.get("name"))


def staging_dir(prefix: str) -> str:
    """A scratch directory for a trainer's output, moved into the catalog when the node returns."""
    return tempfile.mkdtemp(prefix=f"leap_kalm-{prefix}-")


def run_training(
    method: str,
    ref: ModelRef | dict[str, Any],
    records: list[dict[str, Any]],
    params: Any,
    num_processes: int,
    load_kwargs: dict[str, Any],
) -> ModelRef:
    """Train in this process, or under ``accelerate launch`` when ``num_processes > 1``."""
    from dataclasses import asdict

    output_dir = staging_dir(method)
    if num_processes > 1:
        from leap_kalm.training.launch import launch_training

        return launch_training(
            method, ref, records, asdict(params), output_dir, num_processes, load_kwargs
        )
    from leap_kalm.llm.models import load_model

    model, tokenizer = load_model(ref, **load_kwargs)
    if method == "sft":
        from leap_kalm.training.sft import train_sft

        return train_sft(model, tokenizer, records, params, output_dir)
    from leap_kalm.training.dpo import train_dpo

    return train_dpo(model, tokenizer, records, params, output_dir)


def train_student(
    method: str,
    records: list[dict[str, Any]],
    previous_student: ModelRef | None,
    settings: dict[str, Any],
    config: LeapParams,
    model_params: dict[str, Any],
    iteration: int,
    load_kwargs: dict[str, Any],
) -> ModelRef:
    """Train this iteration's student with ``method`` from the model the iteration starts from.

    ``settings`` are the trainer's parameters plus ``num_processes``; the result is staged
    (moved into the catalog) and records where it started and on how many records.
    """
    from leap_kalm.training.dpo import DPOParams
    from leap_kalm.training.sft import SFTParams

    settings = dict(settings)
    num_processes = int(settings.pop("num_processes", 1))
    params_class = SFTParams if method == "sft" else DPOParams
    params = params_class.from_dict({"seed": config.seed + iteration, **settings})
    ref = student_ref(previous_student, model_params, iteration)
    load_kwargs = {**model_load_kwargs(model_params, ("dtype",)), **load_kwargs}
    result = run_training(method, ref, records, params, num_processes, load_kwargs)
    meta = {
        **result.meta,
        "iteration": iteration,
        "started_from": model_id_of(ref),
        "n_records": len(records),
        "staged": True,
    }
    return ModelRef(path=result.path, kind=result.kind, meta=meta)
