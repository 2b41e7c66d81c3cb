"""``--adapter DIR`` of ``homie run|eval|up sim`` (homiebot/cli/train_adapter.py): a usable peft adapter passes
as the ``adapter`` planner option; a missing, non-peft, weightless or wrongly sized one, a bundled GGUF model
and a planner without adapters are refused in one line before anything loads. The adapters here are written
in peft's file layout (adapter_config.json, adapter_model.safetensors with ``lora_A``/``lora_B`` weights);
``tests/training/test_trainer_tiny.py`` plans an episode with one that ``homie train sft`` wrote."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.cli.train_adapter import AdapterOptionError, adapter_option, check_adapter, read_adapter

HIDDEN, INTERMEDIATE = 32, 64


def _model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    config = {"model_type": "qwen2", "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _adapter(folder: Path, hidden: int = HIDDEN, intermediate: int = INTERMEDIATE, rank: int = 4) -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": rank}))
    prefix = "base_model.model.model.layers.0"
    save_file(
        {
            f"{prefix}.self_attn.q_proj.lora_A.weight": np.zeros((rank, hidden), np.float32),
            f"{prefix}.self_attn.q_proj.lora_B.weight": np.zeros((hidden, rank), np.float32),
            f"{prefix}.mlp.down_proj.lora_A.weight": np.zeros((rank, intermediate), np.float32),
            f"{prefix}.mlp.down_proj.lora_B.weight": np.zeros((hidden, rank), np.float32),
        },
        str(folder / "adapter_model.safetensors"),
    )
    return folder


def test_a_peft_adapter_on_its_model_is_the_adapter_option(tmp_path: Path) -> None:
    model, adapter = _model(tmp_path / "m"), _adapter(tmp_path / "a")
    info = read_adapter(adapter)
    assert info.peft_type == "LORA" and info.input_sizes == {HIDDEN, INTERMEDIATE}
    assert adapter_option(adapter, "hf", {"model": str(model)}) == {"adapter": str(adapter.absolute())}
    assert adapter_option(None, "hf", {"model": str(model)}) == {}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "absent", "no such folder"),
        (lambda p: (p / "file").write_text("x") and p / "file", "not a folder"),
        (lambda p: (p / "empty").mkdir() or p / "empty", "no adapter_config.json"),
    ],
)
def test_what_is_not_an_adapter_is_refused(tmp_path: Path, make, message: str) -> None:
    with pytest.raises(AdapterOptionError, match=message):
        check_adapter(make(tmp_path), "hf", str(_model(tmp_path / "m")))


def test_a_broken_adapter_folder_is_refused(tmp_path: Path) -> None:
    model = str(_model(tmp_path / "m"))
    adapter = _adapter(tmp_path / "a")
    (adapter / "adapter_config.json").write_text("{not json")
    with pytest.raises(AdapterOptionError, match="does not read as JSON"):
        check_adapter(adapter, "hf", model)
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 4}))
    with pytest.raises(AdapterOptionError, match="no peft_type"):
        check_adapter(adapter, "hf", model)
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    (adapter / "adapter_model.safetensors").unlink()
    with pytest.raises(AdapterOptionError, match="no adapter weights"):
        check_adapter(adapter, "hf", model)
    (adapter / "adapter_model.safetensors").write_bytes(b"\x00" * 16)
    with pytest.raises(AdapterOptionError, match="does not read"):
        check_adapter(adapter, "hf", model)


def test_an_adapter_of_another_model_size_is_refused(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path / "a", hidden=576, intermediate=1536)  # SmolLM2-135M's sizes
    with pytest.raises(AdapterOptionError, match=r"another size .*\[576, 1536\].*\[32, 64\]"):
        check_adapter(adapter, "hf", str(_model(tmp_path / "m")))


def test_the_planner_and_the_model_must_take_an_adapter(tmp_path: Path) -> None:
    model, adapter = str(_model(tmp_path / "m")), _adapter(tmp_path / "a")
    with pytest.raises(AdapterOptionError, match="planner 'expert' takes no adapter"):
        check_adapter(adapter, "expert", model)
    with pytest.raises(AdapterOptionError, match="bundled GGUF model"):
        check_adapter(adapter, "hf", "smollm2")
    with pytest.raises(AdapterOptionError, match="needs --model"):
        check_adapter(adapter, "hf", None)
    with pytest.raises(AdapterOptionError, match="not both"):
        adapter_option(adapter, "hf", {"model": model, "adapter": str(adapter)})


@pytest.mark.parametrize("command", ["run", "eval"])
def test_the_commands_refuse_a_bad_adapter_in_one_line_and_write_nothing(tmp_path: Path, command: str) -> None:
    model = _model(tmp_path / "m")
    adapter = _adapter(tmp_path / "a", hidden=576, intermediate=1536)
    out = tmp_path / "out"
    where = ["--task", "emmoe-001"] if command == "run" else ["--tasks", "emmoe-001"]
    args = [command, *where, "--planner", "hf", "--model", str(model), "--adapter", str(adapter), "--out", str(out)]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 2, result.output
    assert "another size" in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_hf_planner_from_python_refuses_an_adapter_on_a_bundled_model(tmp_path: Path) -> None:
    """The CLI check above guards ``homie``; HFPlanner built from Python refuses it too (it ran the plain bundled
    model before, the adapter unused), before anything loads."""
    from homiebot.planner.hf_backend import HFPlanner, PlannerLoadError

    adapter = _adapter(tmp_path / "adapter")
    with pytest.raises(PlannerLoadError, match=r"bundled GGUF model, which takes no adapter.*homie train base"):
        HFPlanner(model="smollm2", adapter=str(adapter))
