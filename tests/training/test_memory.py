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


class _FakeTrim:
    def __init__(self):
        self.calls = []

    def __call__(self, pad):
        self.calls.append(pad)
        return 1


@pytest.fixture
def fake_trim(monkeypatch):
    trim = _FakeTrim()
    monkeypatch.setattr(memory, "_malloc_trim", lambda: trim)
    return trim


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


def test_the_callback_releases_after_steps_saves_and_the_end(fake_trim):
    callback = memory.memory_release_callback()
    callback.on_step_end(None, None, None)
    callback.on_save(None, None, None)
    callback.on_train_end(None, None, None)
    assert fake_trim.calls == [0, 0, 0]


def test_sft_releases_memory_after_every_step_and_when_done(tiny_model_dir, tmp_path, fake_trim):
    model, tokenizer = load_model(tiny_model_dir)
    params = SFTParams.from_dict(
        {"max_steps": 3, "learning_rate": 1e-3, "per_device_train_batch_size": 2, "lora": {"r": 0}}
    )
    train_sft(model, tokenizer, RECORDS, params, str(tmp_path / "out"))
    # 3 optimiser steps + the end of training + once more after the trainer is dropped
    assert len(fake_trim.calls) == 5
