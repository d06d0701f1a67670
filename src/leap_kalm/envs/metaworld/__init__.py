"""Meta-World v3 adapter (gymnasium API) with KALM's task lists and scripted policies."""

from leap_kalm.envs.metaworld.env import ACTION_DIM, OBS_DIM, MetaWorldTaskEnv
from leap_kalm.envs.metaworld.policy import ScriptedMetaWorldPolicy
from leap_kalm.envs.metaworld.tasks import (
    KALM_EASY_TASKS,
    KALM_HARD_TASKS,
    KALM_TRAIN_TASKS,
    NO_V3_COUNTERPART,
    TASKS_BY_LEVEL,
    instructions_for,
    v3_name,
)

__all__ = [
    "ACTION_DIM",
    "KALM_EASY_TASKS",
    "KALM_HARD_TASKS",
    "KALM_TRAIN_TASKS",
    "NO_V3_COUNTERPART",
    "OBS_DIM",
    "TASKS_BY_LEVEL",
    "MetaWorldTaskEnv",
    "ScriptedMetaWorldPolicy",
    "instructions_for",
    "v3_name",
]
