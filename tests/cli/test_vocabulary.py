"""One CLI vocabulary (homiebot/cli/options.py, docs/commands.md "One vocabulary"): the same option names for the
same things in every command, ``-o/--out`` for every output, and the old spellings still taken for one release
with one warning line."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from homiebot.cli import build_app


def _options() -> list[tuple[str, str, tuple[str, ...], bool]]:
    """(command, parameter name, flags, hidden) for every option of every leaf command."""
    found: list[tuple[str, str, tuple[str, ...], bool]] = []

    def walk(command: object, prefix: list[str]) -> None:
        children = getattr(command, "commands", None)
        if children is not None:
            for name, child in children.items():
                walk(child, [*prefix, name])
            return
        if getattr(command, "hidden", False):  # a deprecated command keeps its old spellings until it goes
            return
        for param in command.params:  # type: ignore[attr-defined]
            if param.param_type_name == "option":
                flags = tuple(sorted([*param.opts, *param.secondary_opts]))
                found.append((" ".join(prefix), param.name, flags, bool(param.hidden)))

    walk(typer.main.get_command(build_app()), [])
    return found


#: Spellings that must not be shown: each names a thing another spelling names everywhere else.
RETIRED = {
    "--report-dir": "--out",
    "--planner-robot": "--planner",
    "--planner-human": "--partner-planner",
    "--agent": "--planner",
    "--instruction": "the INSTRUCTION argument",
    "--json-out": "--out",
}
#: A flag that means different things in different commands, on purpose (documented in docs/commands.md).
#: ``--backend``: who runs an evaluation's episodes (local or ray), only in homie eval; the simulator is --simulator.
SHOWN_ONLY_IN = {"--backend": {"eval"}}


def test_every_output_is_out_or_o() -> None:
    wrong = [(cmd, flags) for cmd, name, flags, hidden in _options()
             if not hidden and ("--out" in flags or name == "out") and set(flags) != {"--out", "-o"}]
    assert not wrong, wrong


def test_a_flag_means_one_thing() -> None:
    """Every shown flag has the same companions (short name, --no- form) wherever it appears."""
    spellings: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for _cmd, _name, flags, hidden in _options():
        if not hidden:
            for flag in flags:
                spellings[flag].add(flags)
    mixed = {flag: sorted(forms) for flag, forms in spellings.items() if len(forms) > 1}
    assert not mixed, mixed


def test_retired_spellings_are_hidden() -> None:
    shown = [(cmd, flag) for cmd, _name, flags, hidden in _options() if not hidden
             for flag in flags if flag in RETIRED]
    assert not shown, f"shown old spellings (use {RETIRED}): {shown}"
    for flag, commands in SHOWN_ONLY_IN.items():
        elsewhere = {cmd for cmd, _n, flags, hidden in _options() if not hidden and flag in flags} - commands
        assert not elsewhere, f"{flag} is shown by {sorted(elsewhere)}"


def test_the_model_options_are_one_definition() -> None:
    """homie run, eval and up sim take the model planner's and recovery's options with the same flags and help."""
    wanted = {"base_url", "model", "adapter", "api_key_env", "constrained", "decode", "planner_option",
              "recovery", "recovery_stages", "recovery_search"}
    root = typer.main.get_command(build_app())
    helps: dict[str, set[str]] = defaultdict(set)
    for path in (["run"], ["eval"], ["up", "sim"]):
        command = root
        for part in path:
            command = command.commands[part]  # type: ignore[attr-defined]
        names = {p.name: p for p in command.params}
        assert wanted <= set(names), (path, wanted - set(names))
        for key in wanted:
            helps[key].add(names[key].help)
    assert all(len(texts) == 1 for texts in helps.values()), {k: v for k, v in helps.items() if len(v) > 1}


@pytest.mark.parametrize(
    ("argv", "old", "new"),
    [
        (["metrics", "{missing}", "--report-dir", "{tmp}/r"], "--report-dir", "use --out"),
        (["run", "--task", "demo-drawer", "--backend", "nope", "--out", "{tmp}/o"], "--backend", "use --simulator"),
        (["train", "eval", "--model", "{missing}", "--sft", "{missing}", "--json", "{tmp}/s.json"], "--json",
         "use --out"),
        (["muep", "metrics", "{missing}"], "homie muep metrics", "use homie metrics"),
        (["muep", "run", "--out", "{tmp}/m", "--agent", "nope"], "homie muep run", "use homie eval --suite muep"),
    ],
)
def test_old_spellings_still_work_with_one_warning(tmp_path: Path, argv: list[str], old: str, new: str) -> None:
    args = [a.format(tmp=tmp_path, missing=tmp_path / "missing") for a in argv]
    result = CliRunner().invoke(build_app(), args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == 1 and old in warnings[0] and "deprecated" in warnings[0] and new in warnings[0], lines
    # The old spelling meant what the new one means: the command went on and refused the bad value in one line.
    assert result.exit_code == 2 and len(lines) == 2 and lines[1].startswith("error: "), lines


def test_both_spellings_with_different_values_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_app(), ["metrics", str(tmp_path), "--report-dir", str(tmp_path / "a"),
                                              "--out", str(tmp_path / "b")])
    assert result.exit_code == 2
    assert "--report-dir and --out are the same option (give --out only)" in result.stderr
