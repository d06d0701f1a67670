"""The LLM student acting in text environments, many episodes batched together.

Environments are duck-typed gymnasium text environments: ``reset()`` returns
``(observation, info)`` and ``step(action)`` returns
``(observation, reward, terminated, truncated, info)``; ``info`` carries
``admissible_commands`` and, where the environment knows them, ``task`` and ``won``.
Nothing here imports an environment package.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from leap_kalm.llm.generation import EpisodeGenerator
from leap_kalm.llm.parsing import ParsedAnswer, count_repairs, parse_answer
from leap_kalm.llm.prompts import student_messages
from leap_kalm.schemas import EpisodeSpec, Trajectory, make_trajectory

logger = logging.getLogger(__name__)


@dataclass
class StudentSettings:
    """How the student prompts itself."""

    env_name: str = "alfworld"
    history_window: int | None = None
    max_steps: int = 20
    batch_size: int = 8
    prompt_format: str = "leap"
    action_selection: str = "generate"


ACTION_SELECTIONS = ("generate", "score", "repair")


def task_from_observation(observation: str) -> str:
    """The last non-empty line of a first observation: the fallback task of a world whose
    ``info`` has no ``task`` (registered worlds put their own parsed task there)."""
    lines = [line.strip() for line in observation.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


class StudentPolicy:
    """Prompts the model with each episode's own history and parses its answers."""

    def __init__(
        self, generator: EpisodeGenerator, settings: StudentSettings, model_id: str
    ) -> None:
        self.generator = generator
        self.settings = settings
        self.model_id = model_id
        self.answers: list[Any] = []

    def act(self, episodes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """One decision per live episode: ``{reason, action, raw_action, repair}``."""
        prompts = [
            self.generator.chat_prompt(
                student_messages(
                    self.settings.prompt_format,
                    self.settings.env_name,
                    ep["task"],
                    ep["steps"],
                    ep["observation"],
                    ep["candidates"],
                    self.settings.history_window,
                )
            )
            for ep in episodes
        ]
        keys = [ep["key"] for ep in episodes]
        texts = self.generator.generate(prompts, keys)
        parsed = [parse_answer(t, ep["candidates"]) for t, ep in zip(texts, episodes, strict=True)]
        if self.settings.action_selection != "generate":
            parsed = self._score(prompts, keys, parsed, episodes)
        self.answers.extend(parsed)
        return [
            {"reason": p.reason, "action": p.action, "raw_action": p.raw_action, "repair": p.repair}
            for p in parsed
        ]

    def _score(
        self,
        prompts: list[str],
        keys: list[Any],
        parsed: list[ParsedAnswer],
        episodes: Sequence[dict[str, Any]],
    ) -> list[ParsedAnswer]:
        """Keep each generated reason; take the candidate the student finds most likely after
        it: for every answer (``score``) or only for one whose action matches no candidate
        (``repair``)."""
        every = self.settings.action_selection == "score"
        live = [
            i
            for i, ep in enumerate(episodes)
            if ep["candidates"] and (every or parsed[i].repair in ("unmatched", "empty"))
        ]
        if not live:
            return parsed
        scores = self.generator.score(
            [prompts[i] + f"REASON:\n{parsed[i].reason}\nACTION:\n" for i in live],
            [keys[i] for i in live],
            [episodes[i]["candidates"] for i in live],
        )
        out = list(parsed)
        for i, row in zip(live, scores, strict=True):
            best = max(range(len(row)), key=row.__getitem__)
            out[i] = replace(
                parsed[i], action=episodes[i]["candidates"][best], repair="scored", score=row[best]
            )
        return out

    def repair_counts(self) -> dict[str, int]:
        """How the answers' actions were matched to candidates, plus ``finished_actions``:
        answers whose action the generator decoded after appending ``ACTION:`` to a reason
        cut by the token cap (``SamplingParams.finish_action_tokens``)."""
        counts = count_repairs(self.answers)
        counts["finished_actions"] = self.generator.stats.finished_actions
        return counts


def roll_out(
    specs: Sequence[EpisodeSpec],
    policy: StudentPolicy,
    env_name: str,
    extra: dict[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Play every episode with the student, ``batch_size`` at a time; yield each trajectory as it ends.

    Yielding as soon as an episode ends lets a resumable JSONL dataset write it at once.
    """
    settings = policy.settings
    pending = list(specs)
    live: list[dict[str, Any]] = []
    while pending or live:
        while pending and len(live) < settings.batch_size:
            spec = pending.pop(0)
            env = spec.make_env()
            observation, info = env.reset()
            live.append(
                {
                    "key": spec.game_id,
                    "spec": spec,
                    "env": env,
                    "task": info.get("task") or task_from_observation(observation),
                    "observation": observation,
                    "candidates": list(info.get("admissible_commands", [])),
                    "steps": [],
                    "won": False,
                }
            )
        decisions = policy.act(live)
        still_live = []
        for ep, decision in zip(live, decisions, strict=True):
            ep["steps"].append(
                {
                    "observation": ep["observation"],
                    "candidate_actions": ep["candidates"],
                    **decision,
                }
            )
            observation, reward, terminated, truncated, info = ep["env"].step(decision["action"])
            ep["won"] = bool(info.get("won", terminated and reward > 0))
            if "score" in info:  # a graded world's final reward (WebShop's), and its parts
                ep["score"] = float(info["score"])
            if info.get("reward_parts"):
                ep["reward_parts"] = dict(info["reward_parts"])
            ep["observation"], ep["candidates"] = (
                observation,
                list(info.get("admissible_commands", [])),
            )
            if terminated or truncated or len(ep["steps"]) >= settings.max_steps:
                policy.generator.forget(ep["key"])
                ep["env"].close()
                yield _trajectory(ep, env_name, policy, extra)
            else:
                still_live.append(ep)
        live = still_live


def _trajectory(
    ep: dict[str, Any], env_name: str, policy: StudentPolicy, extra: dict[str, Any] | None
) -> Trajectory:
    spec: EpisodeSpec = ep["spec"]
    return make_trajectory(
        env=env_name,
        game_id=spec.game_id,
        split=spec.split,
        task=ep["task"],
        task_type=spec.task_type,
        model_id=policy.model_id,
        steps=ep["steps"],
        success=ep["won"],
        score=ep.get("score"),
        sampling=asdict(policy.generator.sampling),
        **({"reward_parts": ep["reward_parts"]} if "reward_parts" in ep else {}),
        **(extra or {}),
    )
