import random

import numpy as np

from leap_kalm.hooks import SeedingHook, seed_everything
from leap_kalm.progress import track


def _draw():
    import torch

    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_seed_everything_makes_all_generators_repeat():
    seed_everything(7)
    first = _draw()
    seed_everything(7)
    assert _draw() == first
    seed_everything(8)
    assert _draw() != first


class _Catalog:
    def __init__(self, params):
        self._params = params

    def __contains__(self, name):
        return name == "parameters"

    def load(self, name):
        return self._params


def test_hook_seeds_from_the_seed_parameter():
    hook = SeedingHook()
    hook.before_pipeline_run(run_params={}, pipeline=None, catalog=_Catalog({"seed": 3}))
    first = _draw()
    hook.before_pipeline_run(run_params={}, pipeline=None, catalog=_Catalog({"seed": 3}))
    assert _draw() == first


def test_track_yields_everything_with_or_without_bars(monkeypatch):
    monkeypatch.setenv("LEAP_KALM_PROGRESS", "1")
    assert list(track(range(5), "counting")) == [0, 1, 2, 3, 4]
    monkeypatch.setenv("LEAP_KALM_PROGRESS", "0")
    assert list(track(iter("abc"), "letters")) == ["a", "b", "c"]
