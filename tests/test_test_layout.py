"""The test tree's own invariants: pytest imports test modules by basename (rootdir "prepend" import mode, which
the sibling imports such as ``from test_metrics import ...`` rely on), so two test files with one basename abort
the whole collection ("import file mismatch"). This fails fast, naming both files, instead."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_test_module_basenames_are_unique() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(TESTS)))
    duplicates = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert not duplicates, f"test modules sharing a basename (rename one): {duplicates}"
