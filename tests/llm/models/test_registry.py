"""ModelConfig and name resolution."""

import pytest

from leap_kalm.llm.models.registry import (
    ModelConfig,
    ModelNotAvailableError,
    resolve_model_path,
)


def test_model_config_rejects_unknown_keys():
    assert ModelConfig.from_dict({"name": "tiny-test", "dtype": "float32"}).dtype == "float32"
    assert ModelConfig.from_dict("tiny-test").name == "tiny-test"
    with pytest.raises(ValueError, match="unknown keys \\['temperature'\\]"):
        ModelConfig.from_dict({"name": "x", "temperature": 1.0})


def test_unavailable_models_fail_with_a_way_forward(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(
        ModelNotAvailableError, match="meta-llama/Meta-Llama-3-8B-Instruct.*hf download"
    ):
        resolve_model_path("meta-llama/Meta-Llama-3-8B-Instruct")
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        resolve_model_path("./no/such/model")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelNotAvailableError, match="no config.json"):
        resolve_model_path(str(empty))
