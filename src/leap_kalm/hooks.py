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


class CredentialsHook:
    """Exposes API keys from ``conf/local/credentials.yml`` as environment variables.

    An entry ``openai: {api_key: sk-...}`` becomes ``OPENAI_API_KEY`` (an entry
    ``<name>: {api_key: ...}`` becomes ``<NAME>_API_KEY``) unless that variable is already
    set. Keys are never logged or written to datasets; clients read them from the
    environment.
    """

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        try:
            credentials = context.config_loader["credentials"]
        except Exception:  # no credentials file is fine
            return
        exported = []
        for name, entry in (credentials or {}).items():
            if isinstance(entry, dict) and entry.get("api_key"):
                variable = f"{str(name).upper()}_API_KEY"
                if not os.environ.get(variable):
                    os.environ[variable] = str(entry["api_key"])
                    exported.append(variable)
        if exported:
            logger.info(
                "API keys from credentials exported as %s (values not shown)", ", ".join(exported)
            )
