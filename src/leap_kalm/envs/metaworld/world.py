"""Meta-World's surface for the worlds registry (a KALM world)."""

from __future__ import annotations

from typing import Any

ACTIONS = {"kind": "continuous", "dim": 4}  # end-effector dx, dy, dz and gripper, in [-1, 1]


def generate_offline_data(settings: Any) -> dict[str, Any]:
    """KALM-format offline data from Meta-World's scripted policies with noise.

    Args:
        settings: ``KalmIngestParams`` (uses ``tasks`` — ``None``: the level's KALM task
            list —, ``n_per_task``, ``seed``, ``level``, ``n_instructions`` and, when set,
            ``horizon`` and ``noise``).
    """
    from .data import generate_metaworld_dataset
    from .tasks import TASKS_BY_LEVEL

    optional = {
        k: getattr(settings, k) for k in ("horizon", "noise") if getattr(settings, k) is not None
    }
    return generate_metaworld_dataset(
        settings.tasks or list(TASKS_BY_LEVEL[settings.level]),
        settings.n_per_task,
        settings.seed,
        level=settings.level,
        n_instructions=settings.n_instructions,
        **optional,
    )
