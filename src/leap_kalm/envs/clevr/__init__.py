"""CLEVR-Robot on MuJoCo: five balls, 40 push actions, language goals at KALM's four levels."""

from leap_kalm.envs.clevr.env import ClevrRobotEnv
from leap_kalm.envs.clevr.goals import (
    LEVELS,
    compute_reward,
    goal_dim,
    is_success,
    make_easy_goal,
    make_hard_goal,
    make_real_goal,
    relation_holds,
    sample_goal,
)
from leap_kalm.envs.clevr.instructions import all_wordings, sample_instructions
from leap_kalm.envs.clevr.physics import COLORS, N_ACTIONS, PUSH_DIRECTIONS, ClevrPhysics
from leap_kalm.envs.clevr.policy import ScriptedClevrPolicy

__all__ = [
    "COLORS",
    "LEVELS",
    "N_ACTIONS",
    "PUSH_DIRECTIONS",
    "ClevrPhysics",
    "ClevrRobotEnv",
    "ScriptedClevrPolicy",
    "all_wordings",
    "compute_reward",
    "goal_dim",
    "is_success",
    "make_easy_goal",
    "make_hard_goal",
    "make_real_goal",
    "relation_holds",
    "sample_goal",
    "sample_instructions",
]
