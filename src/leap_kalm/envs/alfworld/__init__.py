"""ALFWorld on TextWorld's engine: offline game generation from alfworld's packaged layouts,
real-data loading, a gymnasium-style env, privileged state and handcoded-expert logs.

Heavy imports (alfworld, textworld) happen inside the functions that need them.
"""

from .data import AlfWorldDataNotFoundError, load_games, resolve_alfworld_data
from .env import AlfWorldEnv, normalize_command
from .expert import HandcodedExpert, run_expert_episode
from .generate import SPLITS, TASK_TYPES, generate_games, split_scenes
from .privileged import privileged_state, render_privileged_state
from .text import parse_task

__all__ = [
    "SPLITS",
    "TASK_TYPES",
    "AlfWorldDataNotFoundError",
    "AlfWorldEnv",
    "HandcodedExpert",
    "generate_games",
    "load_games",
    "normalize_command",
    "parse_task",
    "privileged_state",
    "render_privileged_state",
    "resolve_alfworld_data",
    "run_expert_episode",
    "split_scenes",
]
