"""Project hooks: seed every random number generator before a run."""

from __future__ import annotations

import logging
import os
import random
from typing import Any

from kedro.framework.hooks import hook_impl

logger = logging.getLogger(__name__)


def seed_everything(seed: int, deterministic_torch: bool = False) -> None:
    """Seed ``random``, numpy and torch (if installed) with one integer."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency, but keep the hook light
        return
    torch.manual_seed(seed)
    if deterministic_torch:
        torch.use_deterministic_algorithms(True, warn_only=True)


class SeedingHook:
    """Seeds random/numpy/torch from the ``seed`` parameter before the pipeline runs."""

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        params = catalog.load("parameters") if "parameters" in catalog else {}
        seed = int(params.get("seed", 0))
        seed_everything(seed, bool(params.get("deterministic_torch", False)))
        logger.info("Seeded random, numpy and torch with %d", seed)
