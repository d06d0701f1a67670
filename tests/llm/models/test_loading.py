"""load_model on adapters."""

import json
import os

from leap_kalm.llm.models.loading import load_model


def test_adapter_directory_loads_on_its_base(tiny_model_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    peft_model = get_peft_model(
        base, LoraConfig(r=2, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    peft_model.save_pretrained(tmp_path / "adapter")
    cfg = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert os.path.isabs(cfg["base_model_name_or_path"])
    model, tokenizer = load_model(str(tmp_path / "adapter"))
    assert type(model).__name__ == "PeftModelForCausalLM"
    assert tokenizer.pad_token is not None
