"""Run a training job in several processes with ``accelerate launch`` (GPUs, or CPU with gloo).

``launch_training`` writes the job (model, records, settings) to a folder, starts
``accelerate launch --multi_gpu --num_processes N -m leap_kalm.training.launch job.json``
and checks both the exit code and the saved weights. Each worker asserts the world size
it was promised, runs one thread on CPU, and tears its process group down at the end.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from leap_kalm.schemas import ModelRef

logger = logging.getLogger(__name__)


def _write_job(job: dict[str, Any], records: list[dict[str, Any]]) -> Path:
    """The job folder next to its ``output_dir``: records as JSONL and ``job.json``."""
    output_dir = Path(job["output_dir"])
    job_dir = output_dir.with_name(output_dir.name + "-job")
    job_dir.mkdir(parents=True, exist_ok=True)
    records_path = job_dir / "records.jsonl"
    with records_path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    job_path = job_dir / "job.json"
    job_path.write_text(json.dumps({**job, "records": str(records_path)}, indent=2, default=str))
    return job_path


def _accelerate_command(
    job_path: Path, num_processes: int, on_gpu: bool, config_file: str | None = None
) -> list[str]:
    """The launch command: plain data parallel, or what an accelerate config file says
    (DeepSpeed ZeRO, FSDP; ``conf/accelerate/``), with ``num_processes`` from the parameters."""
    launch = [sys.executable, "-m", "accelerate.commands.launch"]
    worker = ["-m", "leap_kalm.training.launch", str(job_path)]
    if config_file:
        return [*launch, "--config_file", config_file, "--num_processes", str(num_processes),
                "--main_process_port", "0", *worker]  # fmt: skip
    return [
        *launch,
        "--multi_gpu", "--num_processes", str(num_processes), "--num_machines", "1",
        "--mixed_precision", "bf16" if on_gpu else "no", "--dynamo_backend", "no",
        "--main_process_port", "0", *worker,
    ]  # fmt: skip


def checked_config_file(path: str | None) -> str | None:
    """An accelerate config file as an absolute path.

    Raises:
        FileNotFoundError: Naming the parameter and the missing file.
        ValueError: When the file is not an accelerate config (no ``distributed_type``).
    """
    if not path:
        return None
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise FileNotFoundError(
            f"accelerate_config: no file {file}; see conf/accelerate/ for DeepSpeed and FSDP examples"
        )
    import yaml

    try:
        config = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ValueError(f"accelerate_config {file} is not valid YAML: {error}") from error
    if not isinstance(config, dict) or "distributed_type" not in config:
        raise ValueError(
            f"accelerate_config {file} is not an accelerate config file (no distributed_type); "
            "write one with `accelerate config --config_file PATH`"
        )
    return str(file)


def _checked_result(
    method: str, result: Any, job_path: Path, output_dir: str, num_processes: int
) -> ModelRef:
    """The saved model, once exit code, result file, world size and weights all agree."""
    if result.returncode != 0:
        raise RuntimeError(
            f"{method} training under accelerate failed (exit {result.returncode}):\n{result.stderr[-4000:]}"
        )
    done = job_path.parent / "result.json"
    if not done.exists():
        raise RuntimeError(
            f"{method} training exited 0 but wrote no {done}; output:\n{result.stdout[-2000:]}"
        )
    outcome = json.loads(done.read_text())
    if outcome["world_size"] != num_processes:
        raise RuntimeError(
            f"asked for {num_processes} processes, training ran with {outcome['world_size']}"
        )
    if not list(Path(output_dir).glob("*.safetensors")):
        raise RuntimeError(f"{method} training wrote no weights into {output_dir}")
    return ModelRef(**outcome["ref"])


def launch_training(
    method: str,
    model: ModelRef | dict[str, Any],
    records: list[dict[str, Any]],
    params: dict[str, Any],
    output_dir: str,
    num_processes: int,
    load_kwargs: dict[str, Any] | None = None,
    timeout: float | None = None,
    config_file: str | None = None,
) -> ModelRef:
    """Train with a registered ``method`` in ``num_processes`` processes (under an
    accelerate ``config_file`` when given: DeepSpeed, FSDP); return the saved model."""
    import torch

    from leap_kalm.training.runner import get_trainer

    get_trainer(method)  # an unknown method fails here, not in the workers
    config_file = checked_config_file(config_file)
    job = {
        "method": method,
        "model": model.__dict__ if isinstance(model, ModelRef) else {"config": model},
        "params": params,
        "output_dir": str(Path(output_dir).resolve()),
        "num_processes": num_processes,
        "load_kwargs": load_kwargs or {},
    }
    job_path = _write_job(job, records)
    on_gpu = torch.cuda.is_available()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    if not on_gpu:
        env["ACCELERATE_USE_CPU"] = "1"
    command = _accelerate_command(job_path, num_processes, on_gpu, config_file)
    logger.info(
        "launching %s training in %d processes: %s", method, num_processes, " ".join(command)
    )
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return _checked_result(method, result, job_path, output_dir, num_processes)


def _worker(job_path: str) -> None:
    import torch
    import torch.distributed as dist

    from leap_kalm.llm.models import load_model
    from leap_kalm.training.runner import train_loaded

    job = json.loads(Path(job_path).read_text())
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size != job["num_processes"]:
        raise SystemExit(f"expected {job['num_processes']} processes, WORLD_SIZE is {world_size}")
    if not torch.cuda.is_available():
        torch.set_num_threads(1)
    spec = job["model"]
    model_spec = spec["config"] if "config" in spec else ModelRef(**spec)
    model, tokenizer = load_model(model_spec, device="cpu", **job["load_kwargs"])
    records = [json.loads(line) for line in Path(job["records"]).open(encoding="utf-8")]
    ref = train_loaded(job["method"], model, tokenizer, records, job["params"], job["output_dir"])
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0:
        outcome = {
            "world_size": world_size,
            "ref": {**ref.__dict__, "meta": {**ref.meta, "world_size": world_size}},
        }
        (Path(job_path).parent / "result.json").write_text(json.dumps(outcome, default=str))
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    _worker(sys.argv[1])
