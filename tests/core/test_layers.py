"""The layers gate finds what it is there to find: an upward import planted in a copy of the package fails
``lint-imports`` (the contracts of pyproject.toml's [tool.importlinter]) and names the import, a package nobody placed
fails the exhaustive layers contract, and a planted import of another package's private name fails
scripts/check_private_imports.py. The old import paths of the moved task language still work, with a warning.

Copies, not the tree itself: the gate's verdict on the tree is scripts/lint.sh's; here only the copy is changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib  # Python >= 3.11, as on the project's machines

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (the test extra)")


def _copy_package(tmp_path: Path) -> Path:
    """The package's Python files and the import-linter configuration, in ``tmp_path``."""
    shutil.copytree(ROOT / "homiebot", tmp_path / "homiebot",
                    ignore=lambda folder, names: [n for n in names if n == "__pycache__"
                                                  or (not n.endswith(".py") and not Path(folder, n).is_dir())])
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = "".join(f'[[tool.importlinter.contracts]]\n{_toml_table(c)}\n' for c in config["contracts"])
    settings = {k: v for k, v in config.items() if k != "contracts"}
    (tmp_path / "pyproject.toml").write_text(f"[tool.importlinter]\n{_toml_table(settings)}\n{contracts}")
    return tmp_path


def _toml_table(table: dict[str, object]) -> str:
    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "".join(f"{k} = {value(v)}\n" for k, v in table.items())


def _lint_imports(copy: Path) -> subprocess.CompletedProcess[str]:
    # The copy comes first on the path, before the editable install of the tree.
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=copy, env=env, capture_output=True, text=True,
                          check=False)


def _plant(module: Path, line: str) -> None:
    text = module.read_text()
    head, sep, rest = text.partition("from __future__ import annotations\n")
    module.write_text(head + sep + line + "\n" + rest if sep else line + "\n" + text)


def test_an_upward_import_fails_lint_imports_and_is_named(tmp_path: Path) -> None:
    copy = _copy_package(tmp_path)
    # The task language importing a planner: two layers up.
    _plant(copy / "homiebot/tasks/goals.py", "import homiebot.planner.base  # noqa: F401")
    result = _lint_imports(copy)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "homiebot.tasks is not allowed to import homiebot.planner" in result.stdout
    assert "homiebot.tasks.goals -> homiebot.planner.base" in result.stdout


def test_an_import_inside_a_function_counts_too(tmp_path: Path) -> None:
    copy = _copy_package(tmp_path)
    module = copy / "homiebot/planner/expert.py"
    module.write_text(module.read_text() + "\n\ndef _later() -> None:\n    from homiebot.training import trainer  # noqa: F401\n")
    result = _lint_imports(copy)
    assert result.returncode == 1
    assert "homiebot.planner.expert -> homiebot.training.trainer" in result.stdout


def test_a_package_without_a_layer_fails_the_exhaustive_contract(tmp_path: Path) -> None:
    copy = _copy_package(tmp_path)
    (copy / "homiebot/newthing").mkdir()
    (copy / "homiebot/newthing/__init__.py").write_text("")
    result = _lint_imports(copy)
    assert result.returncode == 1
    assert "homiebot.newthing" in result.stdout


def test_a_private_name_of_another_package_fails_the_private_import_check(tmp_path: Path) -> None:
    copy = _copy_package(tmp_path)
    check = [sys.executable, str(ROOT / "scripts/check_private_imports.py"), str(copy)]
    # Within a package a private name may be shared (homiebot.cli's modules share _fail).
    within = copy / "homiebot/planner/react.py"
    within.write_text(within.read_text() + "\nfrom homiebot.planner.partnr_expert import _NOT_THERE  # noqa: E402\n")
    assert subprocess.run(check, capture_output=True, text=True, check=False).returncode == 0
    planted = copy / "homiebot/multiagent/split.py"
    _plant(planted, "from homiebot.planner.hf_backend import (\n    Generation,\n    _causal_text_engine,\n)")
    line = planted.read_text().splitlines().index("from homiebot.planner.hf_backend import (") + 1
    result = subprocess.run(check, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert result.stdout.strip() == (f"homiebot/multiagent/split.py:{line}: homiebot.multiagent.split imports the "
                                     "private name _causal_text_engine of homiebot.planner.hf_backend")


@pytest.mark.parametrize(("old", "new"), [
    ("homiebot.eval.tasks", "homiebot.tasks.suite"),
    ("homiebot.eval.goals", "homiebot.tasks.goals"),
    ("homiebot.eval.partnr.language", "homiebot.tasks.partnr.language"),
    ("homiebot.training.text_engine", "homiebot.planner.text_engine"),
])
def test_an_old_import_path_warns_and_is_the_moved_module(old: str, new: str) -> None:
    # A fresh interpreter: the warning is given once, on the first import.
    probe = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "print(old is new, [str(w.message) for w in caught if w.category is DeprecationWarning])\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == f"True ['{old} is deprecated and goes in the next release: import {new}']"
