"""No package imports another package's private names: the lint gate's companion to the import-linter contracts
(pyproject.toml, [tool.importlinter]), which see modules but not the names imported from them.

A name is private when it starts with one underscore (PEP 8, "Naming Conventions": ``_Step``, ``_parse_options``;
dunders such as ``__version__`` are not). A package is ``homiebot.<first part>`` (``homiebot.planner``), or the ROS 2
node package a file of ``ros2_ws/src`` belongs to; importing a private name from a module of one's own package is
allowed. Imports inside functions count as well.

    python scripts/check_private_imports.py [ROOT]    # ROOT: the repository (default: this script's)

Prints one line per finding (``path:line: ...``) and exits 1 when there is one, 0 otherwise.
"""

from __future__ import annotations

import ast
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("check_private_imports")

CORE = "homiebot"
NODES = Path("ros2_ws/src")
SKIPPED_PARTS = {"build", "install", "log", "__pycache__"}


@dataclass(frozen=True)
class PrivateImport:
    path: Path
    line: int
    importer: str
    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.importer} imports the private name {self.name} of {self.module}"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(root: Path, path: Path) -> str:
    """The dotted name of a source file: ``homiebot/planner/expert.py`` -> ``homiebot.planner.expert``; a node
    package's file -> its name under ``ros2_ws/src/<distribution>/``."""
    relative = path.relative_to(root)
    if relative.parts[: len(NODES.parts)] == NODES.parts:
        relative = relative.relative_to(NODES).relative_to(relative.relative_to(NODES).parts[0])
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(module: str) -> str:
    """``homiebot.planner.expert`` -> ``homiebot.planner``; a node package's module -> its top-level package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == CORE else parts[0]


def imported_module(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def source_files(root: Path) -> Iterator[Path]:
    for top in (root / CORE, root / NODES):
        if top.is_dir():
            yield from sorted(p for p in top.rglob("*.py") if not SKIPPED_PARTS & set(p.relative_to(root).parts))


def private_imports(root: Path) -> list[PrivateImport]:
    found: list[PrivateImport] = []
    for path in source_files(root):
        importer = module_name(root, path)
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = imported_module(node, importer, path.name == "__init__.py")
            if not module.startswith(CORE) or package_of(module) == package_of(importer):
                continue
            found += [PrivateImport(path.relative_to(root), node.lineno, importer, module, alias.name)
                      for alias in node.names if is_private(alias.name)]
    return found


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[1]
    found = private_imports(root)
    for finding in found:
        log.info("%s", finding)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
