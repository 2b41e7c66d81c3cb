"""Every third-party package that ``homiebot/`` imports is declared in pyproject.toml, and the core install alone runs
the command line.

Why both: typer 0.29 stopped depending on click while ``homiebot/cli/failures.py`` imported it, so ``make demo`` on
a fresh machine failed at the first import although ``make test`` passed (a test extra brought click in). The static
check finds an import that no requirement declares; the slow check makes a virtual environment from the core lock
alone (locks/core.txt, as ``scripts/setup.sh core`` does) and imports every module and every command's help there.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import tomllib  # Python >= 3.11, as on the project's machines (the check reads pyproject.toml)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "homiebot"

#: Modules that no PyPI distribution of ours provides: interface packages that colcon builds in this workspace
#: (msgs/ is homie_msgs; ros2_ws/compat/ holds the tf2_msgs, nav2_msgs and control_msgs stand-ins, built where the
#: ROS 2 install has none, scripts/setup_ros.sh).
WORKSPACE_MODULES = {"homie_msgs", "tf2_msgs", "nav2_msgs", "control_msgs"}
#: Modules of distributions in an extra that the test profile does not install (so packages_distributions() cannot
#: see them here): the module's distribution, as the extra names it.
UNINSTALLED_MODULES = {"torchao": "torchao"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return _normalize(match.group(1))


def _declared() -> dict[str, set[str]]:
    """Distribution name -> the profiles declaring it ('core' or an extra's name)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared: dict[str, set[str]] = {}
    for requirement in project["dependencies"]:
        declared.setdefault(_requirement_name(requirement), set()).add("core")
    for extra, requirements in project["optional-dependencies"].items():
        for requirement in requirements:
            declared.setdefault(_requirement_name(requirement), set()).add(extra)
    return declared


def _third_party_imports(package: Path) -> dict[str, set[str]]:
    """Top-level module name -> the files importing it, for every absolute import of a non-stdlib module."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in {"homiebot", "__future__"}:
                    continue
                found.setdefault(top, set()).add(str(path.relative_to(package.parent)))
    return found


def _undeclared_imports(package: Path) -> list[str]:
    declared = _declared()
    providers = importlib.metadata.packages_distributions()
    undeclared: list[str] = []
    for module, files in sorted(_third_party_imports(package).items()):
        if module in WORKSPACE_MODULES:
            continue
        distributions = providers.get(module) or ([UNINSTALLED_MODULES[module]] if module in UNINSTALLED_MODULES else [])
        if not distributions:
            undeclared.append(f"{module} (imported by {sorted(files)[0]}): no installed distribution provides it")
            continue
        if not any(_normalize(dist) in declared for dist in distributions):
            undeclared.append(f"{module} (distribution {', '.join(distributions)}; imported by {', '.join(sorted(files)[:3])})")
    return undeclared


def test_every_third_party_import_is_declared() -> None:
    undeclared = _undeclared_imports(PACKAGE)
    assert not undeclared, "imports that pyproject.toml declares in no profile:\n" + "\n".join(undeclared)


def test_the_static_check_finds_an_undeclared_import(tmp_path: Path) -> None:
    """The check above can fail: the import of click that stopped ``make demo`` (typer no longer brings click, and
    no profile declares it) is found, while typer, a core requirement, is not."""
    package = tmp_path / "homiebot"
    (package / "cli").mkdir(parents=True)
    (package / "cli" / "failures.py").write_text("import click\nimport typer\nfrom homiebot import types\n")
    assert [line.split()[0] for line in _undeclared_imports(package)] == ["click"]


@pytest.fixture(scope="module")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a virtual environment with the core lock alone, made once for this module's tests; CI passes
    the one its ``make demo`` has just made from locks/core.txt (HOMIE_CORE_VENV) instead of making another."""
    given = os.environ.get("HOMIE_CORE_VENV")
    if given and (Path(given) / "bin" / "python").is_file():
        return Path(given) / "bin" / "python"
    return _core_venv(tmp_path_factory.mktemp("core") / "venv")


def _core_venv(where: Path) -> Path:
    lock = ROOT / "locks" / "core.txt"
    venv.EnvBuilder(with_pip=True).create(where)
    python = where / "bin" / "python"
    platform_line = subprocess.run(
        [str(python), "-c", "import sys, sysconfig; print(f'cp{sys.version_info.major}{sys.version_info.minor} {sysconfig.get_platform()}')"],
        check=True, capture_output=True, text=True).stdout.strip()
    hashed = f"# platform: {platform_line}" in lock.read_text().splitlines()
    args = ["--require-hashes", "--no-deps", "-r", str(lock)] if hashed else ["-r", str(lock)]
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
    if install.returncode != 0:
        pytest.skip(f"cannot install locks/core.txt here (no package index reachable?): {install.stderr.strip()[-300:]}")
    return python


@pytest.mark.slow
def test_core_install_alone_runs_every_command_help(core_python: Path, tmp_path: Path) -> None:
    python = core_python
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    # The app and its command list, built from the core install alone.
    listed = subprocess.run(
        [str(python), "-c", "from homiebot.cli import build_app\n"
         "app = build_app()\n"
         "for c in app.registered_commands: print(c.name or c.callback.__name__.replace('_', '-'))\n"
         "for g in app.registered_groups:\n"
         "    for c in g.typer_instance.registered_commands: print(g.name, c.name or c.callback.__name__.replace('_', '-'))"],
        env=env, capture_output=True, text=True, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    commands = [line.split() for line in listed.stdout.splitlines() if line.strip()]
    assert len(commands) > 20, commands
    runner = "import sys\nfrom homiebot.cli import main\nsys.argv = ['homie', *sys.argv[1:]]\nmain()"
    failed = []
    for command in commands:
        result = subprocess.run([str(python), "-c", runner, *command, "--help"], env=env, capture_output=True,
                                text=True, cwd=tmp_path)
        if result.returncode != 0:
            failed.append(f"homie {' '.join(command)} --help: exit {result.returncode}: {result.stderr.strip()[-300:]}")
    assert not failed, "\n".join(failed)


@pytest.mark.slow
def test_core_install_imports_every_module_or_names_its_extra(core_python: Path, tmp_path: Path) -> None:
    """Each module of homiebot either imports with the core alone, or fails for a package that an extra declares
    (the heavy backends load on use); never for a package that no profile declares."""
    python = core_python
    modules = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in PACKAGE.rglob("*.py"))
    probe = (
        "import importlib, json, sys\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as err:\n"
        "        out[name] = err.name\n"
        "print(json.dumps(out))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    result = subprocess.run([str(python), "-c", probe, *modules], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    import json

    missing = json.loads(result.stdout.strip().splitlines()[-1])
    declared = _declared()
    providers = importlib.metadata.packages_distributions()
    wrong = []
    for module, absent in sorted(missing.items()):
        top = (absent or "").split(".")[0]
        if top in WORKSPACE_MODULES or top == "homiebot":
            continue
        distributions = providers.get(top) or ([UNINSTALLED_MODULES[top]] if top in UNINSTALLED_MODULES else [])
        profiles = set().union(*(declared.get(_normalize(d), set()) for d in distributions)) if distributions else set()
        if not profiles or "core" in profiles:
            wrong.append(f"{module}: needs {absent}, which {'the core declares but' if 'core' in profiles else 'no profile declares;'} the core install lacks")
    assert not wrong, "\n".join(wrong)
