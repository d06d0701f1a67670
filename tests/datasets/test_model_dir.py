import json
import os

import pytest
from kedro.io.core import DatasetError, Version

from leap_kalm.datasets import ModelDirDataset
from leap_kalm.schemas import ModelRef


def test_save_model_and_tokenizer_then_load_ref(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    ds = ModelDirDataset(filepath=str(tmp_path / "student"))
    ds.save((model, tokenizer))
    ref = ds.load()
    assert isinstance(ref, ModelRef) and ref.kind == "model"
    assert os.path.isabs(ref.path)
    assert os.path.exists(os.path.join(ref.path, "config.json"))
    assert os.path.exists(os.path.join(ref.path, "tokenizer_config.json"))
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-model-")]


def test_save_ref_copies_directory_and_keeps_meta(tmp_path, tiny_model_dir):
    ds = ModelDirDataset(filepath=str(tmp_path / "copy"))
    ds.save(ModelRef(path=tiny_model_dir, meta={"seed": 3}))
    ref = ds.load()
    assert ref.meta["seed"] == 3 and ref.meta["copied_from"] == tiny_model_dir


def test_adapter_is_recognised(tmp_path):
    src = tmp_path / "adapter_src"
    src.mkdir()
    (src / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "/abs/base"}))
    ds = ModelDirDataset(filepath=str(tmp_path / "adapter"))
    ds.save(ModelRef(path=str(src), kind="adapter"))
    with pytest.raises(DatasetError, match=r"no weights \(adapter_model.safetensors"):
        ds.load()  # an adapter directory whose save did not finish
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2, 2)}, str(tmp_path / "adapter" / "adapter_model.safetensors"))
    ref = ds.load()
    assert ref.kind == "adapter" and ref.base_model == "/abs/base"


def test_versions_do_not_overwrite_each_other(tmp_path, tiny_model_dir):
    path = str(tmp_path / "m")
    ModelDirDataset(filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(
        ModelRef(path=tiny_model_dir, meta={"it": 0})
    )
    ModelDirDataset(filepath=path, version=Version(None, "2026-01-02T00.00.00.000Z")).save(
        ModelRef(path=tiny_model_dir, meta={"it": 1})
    )
    assert ModelDirDataset(filepath=path, version=Version(None, None)).load().meta["it"] == 1
    assert (
        ModelDirDataset(filepath=path, version=Version("2026-01-01T00.00.00.000Z", None))
        .load()
        .meta["it"]
        == 0
    )


def test_bad_inputs(tmp_path):
    ds = ModelDirDataset(filepath=str(tmp_path / "x"))
    with pytest.raises(DatasetError, match="no model directory"):
        ds.load()
    with pytest.raises(DatasetError, match="save_pretrained"):
        ds.save({"weights": 1})
    with pytest.raises(DatasetError, match="missing directory"):
        ds.save(ModelRef(path=str(tmp_path / "nowhere")))
    assert not os.path.exists(tmp_path / "x"), "a failed save must leave nothing behind"
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="neither config.json"):
        ModelDirDataset(filepath=str(tmp_path / "empty")).load()
    with pytest.raises(DatasetError, match="only local directories"):
        ModelDirDataset(filepath="memory://models/x")


def test_missing_ok_skipped_and_staged(tmp_path, tiny_model_dir):
    import shutil

    assert ModelDirDataset(filepath=str(tmp_path / "none"), missing_ok=True).load() is None
    versioned = ModelDirDataset(
        filepath=str(tmp_path / "v"), missing_ok=True, version=Version(None, None)
    )
    assert versioned.load() is None
    skipped = ModelDirDataset(filepath=str(tmp_path / "skipped"))
    skipped.save(ModelRef(path="", kind="skipped", meta={"why": "dpo run"}))
    assert skipped.load().kind == "skipped" and skipped.load().meta == {"why": "dpo run"}
    staged = tmp_path / "staged_src"
    shutil.copytree(tiny_model_dir, staged)
    moved = ModelDirDataset(filepath=str(tmp_path / "moved"))
    moved.save(ModelRef(path=str(staged), meta={"staged": True, "seed": 1}))
    assert not staged.exists()
    ref = moved.load()
    assert ref.kind == "model" and ref.meta == {"seed": 1}
