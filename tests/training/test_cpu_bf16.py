"""The cpu presets' bf16 autocast is turned off on an x86 CPU that would emulate it (measured: 12.8x the CPU of an
fp32 step there, BENCHMARKS.md run 4), kept where the CPU has it or where that is unknown, and the run records what it trained with."""

from __future__ import annotations

import json
import logging

import pytest

from homiebot.training import cpu_bf16
from homiebot.training.trainer import preset_for, resolve_cpu_bf16


def test_the_preset_loses_bf16_only_on_a_cpu_known_to_lack_it(caplog):
    preset = preset_for("sft", "cpu", cpu_bf16=True)  # explicit: kept as given whatever this CPU has
    assert preset.cpu_bf16
    with caplog.at_level(logging.WARNING):
        off = resolve_cpu_bf16(preset, native=False)
    assert not off.cpu_bf16 and off.processes == preset.processes and off.learning_rate == preset.learning_rate
    assert "bf16 autocast off" in caplog.text
    assert resolve_cpu_bf16(preset, native=True) == preset
    assert resolve_cpu_bf16(preset, native=None) == preset
    fp32 = preset_for("sft", "cpu-small")
    assert resolve_cpu_bf16(fp32, native=False) == fp32


def test_a_preset_by_name_follows_the_cpu_and_an_explicit_value_is_kept(monkeypatch):
    monkeypatch.setattr("homiebot.training.trainer.native_cpu_bf16", lambda: False)
    assert not preset_for("sft", "cpu").cpu_bf16 and not preset_for("dpo", "cpu").cpu_bf16
    assert preset_for("sft", "cpu", cpu_bf16=True).cpu_bf16  # a benchmark measuring bf16 gets bf16
    monkeypatch.setattr("homiebot.training.trainer.native_cpu_bf16", lambda: True)
    assert preset_for("sft", "cpu").cpu_bf16


def test_the_cpu_is_asked_only_on_x86_and_answers_from_torchs_checks(monkeypatch):
    monkeypatch.setattr(cpu_bf16.platform, "machine", lambda: "aarch64")
    assert cpu_bf16.native_cpu_bf16() is None
    torch_cpu = pytest.importorskip("torch.cpu")
    monkeypatch.setattr(cpu_bf16.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch_cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch_cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert cpu_bf16.native_cpu_bf16() is False
    monkeypatch.setattr(torch_cpu, "_is_amx_tile_supported", lambda: True)
    assert cpu_bf16.native_cpu_bf16() is True
    monkeypatch.delattr(torch_cpu, "_is_amx_tile_supported")
    assert cpu_bf16.native_cpu_bf16() is None


@pytest.mark.models
def test_a_run_on_a_cpu_without_bf16_trains_and_records_fp32(monkeypatch, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    from homiebot.testing.synthetic_records import write_episode
    from homiebot.training.build import DATA_FILE, BuildOptions, build
    from homiebot.training.tiny import write_tiny_chat_model
    from homiebot.training.trainer import train

    write_episode(tmp_path / "runs" / "episodes" / "syn-000" / "run0", "syn-000", 3, True)
    build([tmp_path / "runs"], tmp_path / "sft", "sft", BuildOptions(split="all", rewrites=0, system_prompt=False))
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "sft" / DATA_FILE).to_pylist()
    write_tiny_chat_model(tmp_path / "model", [m["content"] for r in rows for m in r["prompt"] + r["completion"]])
    monkeypatch.setattr("homiebot.training.trainer.native_cpu_bf16", lambda: False)
    preset = preset_for("sft", "cpu", processes=1, max_length=512, save_steps=100)
    train("sft", tmp_path / "sft", tmp_path / "model", tmp_path / "out", preset, max_steps=1, progress=False)
    record = json.loads((tmp_path / "out" / "training.json").read_text())
    assert record["preset"]["cpu_bf16"] is False and record["steps"] == 1
