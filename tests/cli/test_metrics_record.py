"""``homie metrics`` on one episode record (a ``homie run --out`` folder, or the ``record/`` a ``homie up sim``
run keeps): EMMOE's table for that episode; a damaged or free-text record is one line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HOMIE = str(Path(sys.executable).with_name("homie"))


def _homie(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([HOMIE, *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("metrics_record")
    done = _homie("run", "--task", "demo-drawer", "--no-render", "--out", str(tmp / "record"), cwd=tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp / "record"


@pytest.mark.slow
def test_metrics_of_one_record(record: Path, tmp_path: Path) -> None:
    done = _homie("metrics", str(record), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["episodes"] == 1 and report["summary"]["sr"] == 1.0
    assert report["summary"]["plwsr"] is None  # no expert reference run: n/a, not 0
    # A homie up run directory holds its record in record/: the same report.
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "record").symlink_to(record, target_is_directory=True)
    again = _homie("metrics", str(tmp_path / "up"), "--json", cwd=tmp_path)
    assert json.loads(again.stdout)["table2"] == report["table2"]
    table = _homie("metrics", str(record), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert table.returncode == 0 and "100.00" in table.stdout
    assert {p.name for p in (tmp_path / "report").iterdir()} >= {"report.json", "report.md"}


@pytest.mark.parametrize("damage", ["rounds", "free_text"])
def test_unscorable_records_are_one_line(record: Path, tmp_path: Path, damage: str) -> None:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(record), str(copy)], check=True)
    if damage == "rounds":
        (copy / "rounds.jsonl").write_text("{not json\n")
    else:
        summary = json.loads((copy / "summary.json").read_text())
        summary["task"] = None
        (copy / "summary.json").write_text(json.dumps(summary))
    done = _homie("metrics", str(copy), cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    assert str(copy) in lines[0] and "Traceback" not in done.stderr
