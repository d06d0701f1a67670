"""CLEVR-Robot's surface for the worlds registry (a KALM world)."""

from __future__ import annotations

from typing import Any

from leap_kalm.envs.clevr.physics import N_ACTIONS

ACTIONS = {"kind": "discrete", "dim": N_ACTIONS}  # ball a // 8 pushed in direction a % 8


def generate_offline_data(settings: Any) -> dict[str, Any]:
    """KALM-format offline data from the scripted pusher with noise.

    Args:
        settings: ``KalmIngestParams`` (uses ``n_episodes``, ``seed``, ``level``,
            ``n_instructions`` and, when set, ``horizon`` and ``noise``).
    """
    from .data import generate_clevr_dataset

    optional = {
        k: getattr(settings, k) for k in ("horizon", "noise") if getattr(settings, k) is not None
    }
    return generate_clevr_dataset(
        settings.n_episodes,
        settings.seed,
        level=settings.level,
        n_instructions=settings.n_instructions,
        **optional,
    )
