import platform
import sys

import pytest

from leap_kalm.llm.models import load_model
from leap_kalm.training import memory
from leap_kalm.training.sft import SFTParams, train_sft

RECORDS = [
    {
        "prompt": [{"role": "user", "content": f"Task: find apple {i}. Where is it?"}],
        "completion": [{"role": "assistant", "content": "REASON:\nCold.\nACTION:\ngo to fridge 1"}],
    }
    for i in range(8)
]


class _FakeCFunction:
    """Stands in for a C library function: records each call's arguments, returns 1."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args[0] if len(args) == 1 else args)
        return 1


def _fake(monkeypatch, getter: str) -> _FakeCFunction:
    function = _FakeCFunction()
    monkeypatch.setattr(memory, getter, lambda: function)
    return function


@pytest.fixture
def fake_trim(monkeypatch):
    return _fake(monkeypatch, "_malloc_trim")


@pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_glibc_has_malloc_trim_and_it_runs():
    assert memory._malloc_trim() is not None
    assert memory.release_freed_memory() is True


def test_release_trims_the_whole_heap(fake_trim):
    assert memory.release_freed_memory() is True
    assert fake_trim.calls == [0]


def test_without_malloc_trim_nothing_is_called(monkeypatch):
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)
    assert memory.release_freed_memory() is False


def _fire(callback) -> None:
    """A training's events, as the trainer calls them: a step's end, a save, the end."""
    callback.on_step_end(None, None, None)
    callback.on_save(None, None, None)
    callback.on_train_end(None, None, None)


def _train_three_steps(model_dir, out, freed_memory: str, ceiling_gb=None) -> None:
    model, tokenizer = load_model(model_dir)
    params = SFTParams.from_dict(
        {
            "max_steps": 3,
            "learning_rate": 1e-3,
            "per_device_train_batch_size": 2,
            "lora": {"r": 0},
            "freed_memory": freed_memory,
            "freed_memory_ceiling_gb": ceiling_gb,
        }
    )
    train_sft(model, tokenizer, RECORDS, params, str(out))


def test_the_callback_releases_after_steps_saves_and_the_end(fake_trim):
    (callback,) = memory.memory_release_callbacks("release")
    _fire(callback)
    assert fake_trim.calls == [0, 0, 0]


def test_sft_releases_memory_after_every_step_and_when_done(tiny_model_dir, tmp_path, fake_trim):
    _train_three_steps(tiny_model_dir, tmp_path / "out", "release")
    # 3 optimiser steps + the end of training + once more after the trainer is dropped
    assert len(fake_trim.calls) == 5


@pytest.fixture
def fake_mallopt(monkeypatch):
    return _fake(monkeypatch, "_mallopt")


KEEP = [(memory.M_MMAP_MAX, 0), (memory.M_TRIM_THRESHOLD, -1)]
DEFAULTS = [
    (memory.M_MMAP_MAX, memory.GLIBC_MMAP_MAX),
    (memory.M_MMAP_THRESHOLD, 32 * 1024 * 1024),  # glibc's dynamic maximum on 64-bit
    (memory.M_TRIM_THRESHOLD, 64 * 1024 * 1024),
]


def test_keep_turns_mmap_and_trimming_off_then_restores_and_releases(fake_mallopt, fake_trim):
    with memory.freed_memory_policy("keep") as kept:
        assert kept is True
        assert fake_mallopt.calls == KEEP
        assert fake_trim.calls == []
    assert fake_mallopt.calls == KEEP + DEFAULTS
    assert fake_trim.calls == [0]


def test_keep_restores_the_defaults_when_training_fails(fake_mallopt, fake_trim):
    with pytest.raises(RuntimeError, match="boom"):
        with memory.freed_memory_policy("keep"):
            raise RuntimeError("boom")
    assert fake_mallopt.calls == KEEP + DEFAULTS
    assert fake_trim.calls == [0]


def test_release_leaves_the_allocator_alone(fake_mallopt, fake_trim):
    with memory.freed_memory_policy("release") as kept:
        assert kept is False
    assert fake_mallopt.calls == [] and fake_trim.calls == []


def test_keep_without_mallopt_does_nothing(monkeypatch, fake_trim):
    monkeypatch.setattr(memory, "_mallopt", lambda: None)
    with memory.freed_memory_policy("keep") as kept:
        assert kept is False
    assert fake_trim.calls == []


def test_an_unknown_policy_is_an_error_that_names_it():
    with pytest.raises(ValueError, match=r"freed_memory: 'hold'.*release.*keep"):
        with memory.freed_memory_policy("hold"):
            pass
    with pytest.raises(ValueError, match="freed_memory: 'hold'"):
        SFTParams.from_dict({"freed_memory": "hold"})
    with pytest.raises(ValueError, match="freed_memory"):
        memory.memory_release_callbacks("hold")


def test_keep_installs_no_callback():
    assert memory.memory_release_callbacks("keep") == []


@pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_glibc_accepts_the_keep_settings():
    mallopt = memory._mallopt()
    assert mallopt is not None
    with memory.freed_memory_policy("keep") as kept:
        assert kept is True
        block = bytearray(64 * 1024 * 1024)  # above every mmap threshold: from the heap now
        block[-1] = 1
        del block
    for param, value in KEEP + DEFAULTS:  # 1: glibc took the setting
        assert mallopt(param, value) == 1
    for param, value in DEFAULTS:
        mallopt(param, value)


def test_sft_that_keeps_freed_memory_releases_it_only_at_the_end(
    tiny_model_dir, tmp_path, fake_trim, fake_mallopt
):
    _train_three_steps(tiny_model_dir, tmp_path / "out", "keep")
    assert fake_mallopt.calls == KEEP + DEFAULTS
    # no release per step: once when the policy ends, once after the trainer is dropped
    assert fake_trim.calls == [0, 0]


def test_training_keeps_freed_memory_by_default():
    assert SFTParams.from_dict({}).freed_memory == "keep"


def test_the_policy_does_not_change_where_a_job_resumes(tiny_model_dir, tmp_path):
    from leap_kalm.training.common import checkpoint_job_dir

    model, _ = load_model(tiny_model_dir)
    base = {"checkpoint_steps": 2, "checkpoint_dir": str(tmp_path)}
    keep = SFTParams.from_dict({**base, "freed_memory": "keep"})
    release = SFTParams.from_dict({**base, "freed_memory": "release"})
    ceiling = SFTParams.from_dict({**base, "freed_memory_ceiling_gb": 8.0})
    other = SFTParams.from_dict({**base, "learning_rate": 1e-3})
    settings = (keep, release, ceiling, other)
    dirs = [checkpoint_job_dir(p, model, RECORDS, "sft") for p in settings]
    assert dirs[0] == dirs[1] == dirs[2] != dirs[3]


def _capacity_after_import(env: dict) -> str:
    """The oneDNN cache capacity a fresh interpreter sees after importing leap_kalm."""
    import os
    import subprocess

    code = "import os, leap_kalm; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    base = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_importing_the_project_bounds_onednns_primitive_cache():
    import leap_kalm

    assert _capacity_after_import({}) == str(leap_kalm.ONEDNN_PRIMITIVE_CACHE_CAPACITY) == "128"


def test_a_capacity_already_in_the_environment_wins():
    assert _capacity_after_import({"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"}) == "1024"


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/statm is Linux's")
def test_resident_size_is_read_and_follows_an_allocation():
    before = memory.resident_gb()
    block = bytearray(300 * 1000 * 1000)
    block[::4096] = b"x" * len(block[::4096])  # touch every page
    after = memory.resident_gb()
    del block
    assert before is not None and 0 < before < after
    assert after - before > 0.25


def test_the_ceiling_releases_only_after_a_step_above_it(monkeypatch, fake_trim):
    resident = [5.0]
    monkeypatch.setattr(memory, "resident_gb", lambda: resident[0])
    (callback,) = memory.memory_release_callbacks("keep", ceiling_gb=8.0)
    callback.on_step_end(None, None, None)
    assert fake_trim.calls == []
    resident[0] = 9.5
    callback.on_step_end(None, None, None)
    assert fake_trim.calls == [0] and callback.releases == 1
    monkeypatch.setattr(memory, "resident_gb", lambda: None)  # a system that does not say
    callback.on_step_end(None, None, None)
    assert fake_trim.calls == [0]
    assert memory.memory_release_callbacks("keep", ceiling_gb=None) == []
    with pytest.raises(ValueError, match="freed_memory_ceiling_gb must be >= 0"):
        memory.memory_release_callbacks("keep", ceiling_gb=-1)
    with pytest.raises(ValueError, match="freed_memory_ceiling_gb must be >= 0"):
        SFTParams.from_dict({"freed_memory_ceiling_gb": -0.5})


def test_sft_under_a_zero_ceiling_releases_after_every_step(
    tiny_model_dir, tmp_path, fake_trim, fake_mallopt
):
    _train_three_steps(tiny_model_dir, tmp_path / "out", "keep", ceiling_gb=0.0)
    assert fake_mallopt.calls == KEEP + DEFAULTS  # still keeping between the releases
    # 3 optimiser steps (each above 0 GB) + the policy's end + after the trainer is dropped
    assert len(fake_trim.calls) == 5
