"""``homie train pack``: a run's newest checkpoint with Adam's moments in bfloat16, resumed by ``homie train sft
--resume`` as it is (torch casts the moments back to the parameters' float32 on load) and continuing at its step."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from homiebot.training.build import DATA_FILE, BuildOptions, build  # noqa: E402
from homiebot.training.pack import OPTIMIZER_FILE  # noqa: E402
from homiebot.training.progress import StopRule  # noqa: E402
from homiebot.training.tiny import write_tiny_chat_model  # noqa: E402
from homiebot.training.trainer import CHECKPOINTS, TRAINING_FILE, preset_for, train  # noqa: E402

pytestmark = pytest.mark.models

STEPS = 6


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from homiebot.testing.synthetic_records import write_episode

    root = tmp_path_factory.mktemp("pack")
    for n in range(3):
        write_episode(root / "runs" / "episodes" / f"syn-{n:03d}" / "run0", f"syn-{n:03d}", 4, n == 0)
    build([root / "runs"], root / "sft", "sft", BuildOptions(split="all", rewrites=0, system_prompt=False))
    import pyarrow.parquet as pq

    rows = pq.read_table(root / "sft" / DATA_FILE).to_pylist()
    write_tiny_chat_model(root / "model", [m["content"] for r in rows for m in r["prompt"] + r["completion"]])
    return root


def _preset():
    # A high rate so that the moments are far from zero and their rounding shows if it mattered.
    return preset_for("sft", "cpu-small", save_steps=1000, learning_rate=1e-2)


def _homie(*args: str):
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    return CliRunner().invoke(build_app(), list(args))


def test_a_packed_checkpoint_resumes_where_the_run_stopped(setup, tmp_path):
    import torch
    from safetensors.torch import load_file

    root = setup
    whole = train("sft", root / "sft", root / "model", tmp_path / "whole", _preset(), max_steps=STEPS, progress=False)
    first = train("sft", root / "sft", root / "model", tmp_path / "run", _preset(), max_steps=STEPS, progress=False,
                  stop=StopRule(stop_after_steps=3))
    assert not first.finished and first.steps == 3

    result = _homie("train", "pack", "--from", str(tmp_path / "run"), "--out", str(tmp_path / "pack"))
    assert result.exit_code == 0, result.output
    assert "packed checkpoint-3" in result.output
    source = tmp_path / "run" / CHECKPOINTS / "checkpoint-3"
    packed = tmp_path / "pack" / CHECKPOINTS / "checkpoint-3"
    assert (packed / "adapter_model.safetensors").read_bytes() == (source / "adapter_model.safetensors").read_bytes()
    assert not any(p.name.startswith("tokenizer") for p in packed.iterdir())
    moments = torch.load(packed / OPTIMIZER_FILE, weights_only=True)["state"]
    original = torch.load(source / OPTIMIZER_FILE, weights_only=True)["state"]
    assert moments and all(s["exp_avg"].dtype == torch.bfloat16 and s["exp_avg_sq"].dtype == torch.bfloat16
                           for s in moments.values())
    assert all(moments[k]["exp_avg"].float().allclose(original[k]["exp_avg"], rtol=1e-2, atol=1e-8) for k in original)
    assert (packed / OPTIMIZER_FILE).stat().st_size < 0.6 * (source / OPTIMIZER_FILE).stat().st_size

    # Continued from the pack alone (another machine: no other file of the run) by `homie train sft --resume`, it runs
    # steps 4-6 of the schedule.
    result = _homie("train", "sft", "--data", str(root / "sft"), "--model", str(root / "model"), "--out",
                    str(tmp_path / "pack"), "--preset", "cpu-small", "--lr", "0.01", "--max-steps", str(STEPS),
                    "--resume")
    assert result.exit_code == 0, result.output
    rest = json.loads((tmp_path / "pack" / TRAINING_FILE).read_text())
    assert rest["finished"] and rest["steps"] == STEPS
    assert [h["step"] for h in rest["log_history"] if "loss" in h] == list(range(1, STEPS + 1))
    assert rest["step_learning_rates"] == pytest.approx(whole.step_learning_rates[3:], rel=1e-6)
    # The moments came back: the rest follows the uninterrupted run up to their bfloat16 rounding. A reset
    # optimizer (Adam's first step moves every weight by about the learning rate) would not.
    assert rest["losses"][3:] == pytest.approx(whole.losses[3:], rel=2e-2)
    a, b = load_file(str(tmp_path / "whole" / "adapter_model.safetensors")), load_file(
        str(tmp_path / "pack" / "adapter_model.safetensors"))
    assert all(b[n].dtype == torch.float32 and b[n].allclose(a[n], rtol=5e-2, atol=1e-3) for n in a)


def test_pack_refuses_bad_input_without_writing(setup, tmp_path):
    root = setup
    result = _homie("train", "pack", "--from", str(root / "sft"), "--out", str(tmp_path / "p"))
    assert result.exit_code == 2 and "error: --from" in result.output and "no checkpoint" in result.output
    assert not (tmp_path / "p").exists()
    train("sft", root / "sft", root / "model", tmp_path / "run", _preset(), max_steps=1, progress=False)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("mine")
    result = _homie("train", "pack", "--from", str(tmp_path / "run"), "--out", str(busy))
    assert result.exit_code == 2 and "not empty" in result.output
    assert [p.name for p in busy.iterdir()] == ["x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "run"]  # no staging folder left
