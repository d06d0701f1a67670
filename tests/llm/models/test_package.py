"""The package keeps the old ``leap_kalm.llm.models`` interface and its CLI."""

import subprocess
import sys

import pytest

import leap_kalm.llm.models as models
from leap_kalm.llm.models import cli, embedded, hardware, loading, registry, tiny

# Every public name of the former single-module ``leap_kalm.llm.models``, by defining module.
OLD_PUBLIC_NAMES = {
    registry: [
        "EMBEDDED_MODEL",
        "TINY_MODEL",
        "REGISTRY",
        "ModelConfig",
        "ModelNotAvailableError",
        "default_cache_dir",
        "resolve_model_path",
    ],
    hardware: ["select_device", "cpu_has_native_bf16", "select_dtype"],
    embedded: ["gguf_location", "prepare_embedded_model"],
    tiny: ["CHATML_TEMPLATE", "build_tiny_model"],
    loading: ["load_model"],
    cli: ["main"],
}


@pytest.mark.parametrize(
    "module,name",
    [(module, name) for module, names in OLD_PUBLIC_NAMES.items() for name in names],
    ids=lambda x: x if isinstance(x, str) else x.__name__.rsplit(".", 1)[-1],
)
def test_package_reexports_the_old_names(module, name):
    assert getattr(models, name) is getattr(module, name)
    assert name in models.__all__


def test_importing_the_package_loads_no_heavy_libraries():
    code = (
        "import sys, leap_kalm.llm.models; "
        "print(sorted(m for m in ('torch', 'transformers', 'peft', 'tokenizers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_lists_the_registry(capsys):
    assert models.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(registry.REGISTRY)
    assert lines[0] == f"{registry.EMBEDDED_MODEL:24s} {registry.REGISTRY[registry.EMBEDDED_MODEL]}"


def test_cli_runs_as_a_module():
    out = subprocess.run(
        [sys.executable, "-m", "leap_kalm.llm.models", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "{prepare,list}" in out.stdout and "--cache-dir" in out.stdout
    assert "Model registry: the embedded SmolLM2" in out.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "leap_kalm.llm.models", "list"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.split()[0] == registry.EMBEDDED_MODEL
