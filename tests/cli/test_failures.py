"""Every ``homie`` subcommand fails the same way on what a user gets wrong (docs/cli.md, "Errors and exit
codes"): one ``error:`` line on stderr, exit 2, no traceback, nothing written.

The commands are discovered from the app, so a new subcommand fails :func:`test_every_command_has_cases`
until it gets its cases here. For each command the applicable classes are run as real subprocesses:
an output path that cannot be written (under ``/proc``, and under a regular file), a missing input file,
a malformed one (a scene with a YAML syntax error: one line naming the file, line and column), and a bad
name (scene, task, planner, suite, builder, ...).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import typer

from homiebot.cli import build_app
from homiebot.cli.failures import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, CommandFailed, check_output, classify

HOMIE = str(Path(sys.executable).with_name("homie"))
UNWRITABLE = "{unwritable}"  # replaced by each unwritable location in turn
MISSING = "{missing}"  # replaced by a path that does not exist
MALFORMED = "{malformed}"  # replaced by a scene file with a YAML syntax error
ONE_AGENT_GRAPH = str(Path(__file__).resolve().parents[2] / "launch" / "config" / "graph.yaml")  # no human in it

# command -> {case class: arguments}. Absent classes do not apply (the command has no such input).
CASES: dict[str, dict[str, list[str]]] = {
    "run": {
        "unwritable": ["--task", "demo-drawer", "--out", UNWRITABLE],
        "bad_name": ["--task", "nope-000", "--out", "{tmp}/out"],
        "malformed_input": ["tidy up", "--scene", MALFORMED, "--out", "{tmp}/out"],
        "missing_adapter": ["--task", "demo-drawer", "--planner", "hf", "--model", "{tmp}", "--adapter", MISSING,
                            "--out", "{tmp}/out"],
        "unusable_adapter": ["--task", "demo-drawer", "--planner", "hf", "--model", "{tmp}", "--adapter", "{tmp}",
                             "--out", "{tmp}/out"],
        # Option names and values, checked before anything is written (typed from the planner's configuration class).
        "unknown_option": ["--task", "demo-drawer", "-p", "foo=bar", "--out", "{tmp}/out"],
        "malformed_option": ["--task", "demo-drawer", "-p", "=x", "--out", "{tmp}/out"],
        "option_not_a_number": ["--task", "demo-drawer", "-p", "interact_range_m=far", "--out", "{tmp}/out"],
        "option_not_yes_no": ["--task", "demo-drawer", "-p", "close_opened=maybe", "--out", "{tmp}/out"],
        "missing_out": ["--task", "demo-drawer"],  # a usage error of click's: one line too, not typer's usage box
        "not_an_integer": ["--task", "demo-drawer", "--seed", "abc", "--out", "{tmp}/out"],
        "hf_option_not_an_integer": ["--task", "demo-drawer", "--planner", "hf", "--model", "{tmp}",
                                     "-p", "max_new_tokens=abc", "--out", "{tmp}/out"],
        "hf_option_not_yes_no": ["--task", "demo-drawer", "--planner", "hf", "--model", "{tmp}",
                                 "-p", "share_prefix=maybe", "--out", "{tmp}/out"],
        "openai_option_not_yes_no": ["--task", "demo-drawer", "--planner", "openai", "-p", "constrained=maybe",
                                     "--out", "{tmp}/out"],
        "openai_option_not_a_number": ["--task", "demo-drawer", "--planner", "openai", "-p", "temperature=hot",
                                       "--out", "{tmp}/out"],
        # A model path is looked at (not loaded) before anything is written.
        "missing_model": ["--task", "demo-drawer", "--planner", "hf", "--model", MISSING, "--out", "{tmp}/out"],
        # --planner expert on a PARTNR-style task is the suite's expert, whose options are checked.
        "suite_expert_option": ["--task", "partnr-1-022", "--planner", "expert", "-p", "foo=bar", "--out", "{tmp}/out"],
    },
    "tasks": {"bad_name": ["--suite", "nope"]},
    "play": {
        "unwritable": ["--task", "demo-drawer", "--out", UNWRITABLE],
        "bad_name": ["--task", "nope-000", "--out", "{tmp}/out"],
    },
    "eval": {
        "unwritable": ["--suite", "demo", "--out", UNWRITABLE],
        "bad_name": ["--suite", "demo", "--planner", "nope", "--out", "{tmp}/out"],
        "bad_agents": ["--agents", "robot+dog", "--suite", "partnr", "--out", "{tmp}/out"],
        "bad_mode": ["--agents", "robot+human", "--mode", "joint", "--suite", "partnr", "--out", "{tmp}/out"],
        "bad_pair": ["--agents", "robot+human", "--mode", "centralized", "--partner-planner", "scripted",
                     "--suite", "partnr", "--out", "{tmp}/out"],
        "bad_pair_perception": ["--agents", "robot+human", "--perception", "everything", "--suite", "partnr",
                                "--tasks", "partnr-6-007", "--out", "{tmp}/out"],
        "missing_adapter": ["--suite", "demo", "--planner", "hf", "--model", "{tmp}", "--adapter", MISSING,
                            "--out", "{tmp}/out"],
        "unusable_adapter": ["--suite", "demo", "--planner", "hf", "--model", "{tmp}", "--adapter", "{tmp}",
                             "--out", "{tmp}/out"],
        "unknown_option": ["--tasks", "emmoe-001", "-p", "foo=bar", "--out", "{tmp}/out"],
        "malformed_option": ["--tasks", "emmoe-001", "-p", "=x", "--out", "{tmp}/out"],
        "option_not_a_number": ["--tasks", "emmoe-001", "-p", "near_threshold_m=near", "--out", "{tmp}/out"],
        "missing_out": ["--tasks", "emmoe-001"],
        "partner_without_agents": ["--suite", "demo", "--partner-planner", "expert", "--out", "{tmp}/out"],
        "missing_model": ["--tasks", "emmoe-001", "--planner", "hf", "--model", MISSING, "--out", "{tmp}/out"],
    },
    "metrics": {
        "unwritable": ["{tmp}", "--out", UNWRITABLE],
        "missing_input": [MISSING],
        "bad_convention": ["{tmp}", "--convention", "nope"],
    },
    "report": {
        "unwritable": ["{tmp}", "--out", UNWRITABLE],
        "missing_input": [MISSING],
    },
    "sim scenes": {},
    "sim validate": {"missing_input": [MISSING], "malformed_input": [MALFORMED]},
    "sim render": {
        "unwritable": ["--scene", "apartment_1", "--out", UNWRITABLE],
        "bad_name": ["--scene", "nope", "--out", "{tmp}/out"],
        "missing_input": ["--scene", MISSING + ".yaml", "--out", "{tmp}/out"],
        "malformed_input": ["--scene", MALFORMED, "--out", "{tmp}/out"],
    },
    "sim urdf": {"unwritable": ["--out", UNWRITABLE]},
    "perception eval": {
        "unwritable": ["--scene", "apartment_1", "--no-semantic", "--out", UNWRITABLE],
        "bad_name": ["--scene", "nope", "--no-semantic"],
    },
    "perception graph": {
        "unwritable": ["--scene", "apartment_1", "--out", UNWRITABLE],
        "bad_name": ["--scene", "apartment_1", "--builder", "nope", "--out", "{tmp}/out"],
    },
    "perception ground": {"bad_name": ["fridge", "--scene", "nope"]},
    "perception calibrate": {"bad_name": ["--scene", "nope"]},
    "up robot": {
        "bad_name": ["--robot", "stretch"],
        "missing_profile": ["--robot", MISSING + ".yaml"],
        "malformed_input": ["--robot", MALFORMED],
        "simulator_profile": ["--robot", "sim"],
    },
    "up sim": {
        "unwritable": ["--task", "demo-drawer", "--out", UNWRITABLE],
        "bad_name": ["--task", "demo-drawer", "--planner", "nope", "--out", "{tmp}/out"],
        "bad_recovery": ["--task", "demo-drawer", "--recovery", "nope", "--out", "{tmp}/out"],
        "bad_recovery_stages": ["--task", "demo-drawer", "--recovery", "cmfr", "--recovery-stages", "5", "--out", "{tmp}/out"],
        "recovery_option_alone": ["--task", "demo-drawer", "--no-recovery-search", "--out", "{tmp}/out"],
        "bad_partner_planner": ["--task", "partnr-1-022", "--partner-planner", "nope", "--out", "{tmp}/out"],
        "bad_pair_mode": ["--task", "partnr-1-022", "--partner-planner", "expert", "--mode", "joint", "--out", "{tmp}/out"],
        "bad_pair": ["--task", "partnr-1-022", "--partner-planner", "scripted", "--mode", "centralized", "--out", "{tmp}/out"],
        "pair_with_recovery": ["--task", "partnr-1-022", "--partner-planner", "expert", "--recovery", "cot", "--out", "{tmp}/out"],
        "pair_graph_without_human": ["--task", "partnr-1-022", "--partner-planner", "expert", "--graph", ONE_AGENT_GRAPH,
                                     "--out", "{tmp}/out"],
        "pair_with_perception": ["--task", "partnr-1-022", "--partner-planner", "expert", "--perception", "privileged",
                                 "--out", "{tmp}/out"],
        "missing_adapter": ["--task", "demo-drawer", "--planner", "hf", "--model", "{tmp}", "--adapter", MISSING,
                            "--out", "{tmp}/out"],
        # Planner options typed and the model looked at before the run folder, as homie run does.
        "unknown_option": ["--task", "demo-drawer", "-p", "foo=bar", "--out", "{tmp}/out"],
        "hf_option_not_an_integer": ["--task", "emmoe-001", "-p", "max_new_tokens=abc", "--planner", "hf",
                                     "--model", "smollm2", "--out", "{tmp}/out"],
        "missing_model": ["--task", "demo-drawer", "--planner", "hf", "--model", MISSING, "--out", "{tmp}/out"],
        "suite_expert_option": ["--task", "partnr-1-022", "--planner", "expert", "-p", "foo=bar", "--out", "{tmp}/out"],
        "pair_missing_model": ["--task", "partnr-1-022", "--partner-planner", "hf", "--model", MISSING,
                               "--out", "{tmp}/out"],
    },
    "bag record": {"unwritable": ["--out", UNWRITABLE, "--duration", "1"], "missing_out": ["--duration", "1"]},
    "bag play": {"missing_input": [MISSING]},
    "bag info": {"missing_input": [MISSING]},
    "bag replay": {
        "missing_input": [MISSING],
        "unwritable": [MISSING, "--out", UNWRITABLE],
        "bad_planner_option": [MISSING, "-p", "no-equals-sign"],
    },
    "ros clean-shm": {},
    "muep run": {
        "unwritable": ["--out", UNWRITABLE, "--limit", "1"],
        "bad_name": ["--out", "{tmp}/out", "--agent", "nope"],
    },
    "muep metrics": {"missing_input": [MISSING]},
    "muep compare": {"missing_input": [MISSING]},
    "data build": {
        "unwritable": ["sft", "--from", MISSING, "--out", UNWRITABLE],  # the output is checked first
        "missing_input": ["sft", "--from", MISSING, "--out", "{tmp}/out"],
        "bad_name": ["nope", "--from", "{tmp}", "--out", "{tmp}/out"],
    },
    "data check": {
        "missing_input": ["--from", MISSING, "--no-tokens"],
        "bad_value": ["--from", "{tmp}", "--examples", "-1"],
    },
    "data collect": {
        "unwritable": ["--out", UNWRITABLE, "--seed-offset", "10"],
        "bad_name": ["--out", "{tmp}/out", "--planner", "nope"],
        "evaluation_seed": ["--out", "{tmp}/out", "--seed-offset", "0"],
    },
    "data corrections": {
        "unwritable": ["--out", UNWRITABLE],
        "evaluation_seed": ["--out", "{tmp}/out", "--seed-offset", "0"],
        "bad_name": ["--out", "{tmp}/out", "--tasks", "emmoe-999"],
        "missing_input": ["--out", "{tmp}/out", "--replay", MISSING, "--replay-episodes", "3"],
        "not_a_student": ["--out", "{tmp}/out", "--model", "smollm2"],
        "bad_value": ["--out", "{tmp}/out", "--takeover", "0"],
    },
    "data skills": {
        "unwritable": ["--skill", "pick", "-n", "1", "--out", UNWRITABLE],
        "bad_name": ["--skill", "juggle", "-n", "1", "--out", "{tmp}/out"],
        "evaluation_seed": ["--skill", "pick", "-n", "1", "--first-seed", "1000000", "--out", "{tmp}/out"],
        "existing_output": ["--skill", "pick", "-n", "1", "--out", "{tmp}/.."],  # the test's folder: not empty
    },
    "data export": {
        "unwritable": ["--from", MISSING, "--out", UNWRITABLE],  # the output is checked first
        "missing_input": ["--from", MISSING, "--out", "{tmp}/out"],
    },
    "train skill": {
        "unwritable": ["--data", MISSING, "--out", UNWRITABLE],  # the output is checked first
        "missing_input": ["--data", MISSING, "--out", "{tmp}/out"],
        "not_a_data_set": ["--data", "{tmp}", "--out", "{tmp}/out"],
        "bad_name": ["--data", "{tmp}", "--policy", "diffusion", "--out", "{tmp}/out"],
    },
    "train base": {
        "unwritable": ["--out", UNWRITABLE],
        "bad_name": ["--model", "nope", "--out", "{tmp}/out"],
    },
    "train sft": {
        "unwritable": ["--data", MISSING, "--model", MISSING, "--out", UNWRITABLE],
        "missing_input": ["--data", MISSING, "--model", MISSING, "--out", "{tmp}/out"],
        "bad_max_steps": ["--data", MISSING, "--model", MISSING, "--out", "{tmp}/out", "--max-steps", "-1"],
        "bad_warmup": ["--data", "{tmp}", "--model", "{tmp}", "--out", "{tmp}/out", "--warmup-steps", "-1"],
    },
    "train dpo": {
        "unwritable": ["--data", MISSING, "--model", MISSING, "--out", UNWRITABLE],
        "missing_input": ["--data", MISSING, "--model", MISSING, "--out", "{tmp}/out"],
        "bad_max_steps": ["--data", MISSING, "--model", MISSING, "--out", "{tmp}/out", "--max-steps", "0"],
        "bad_warmup": ["--data", "{tmp}", "--model", "{tmp}", "--out", "{tmp}/out", "--warmup-steps", "-1"],
    },
    "train merge": {
        "missing_input": ["--model", MISSING, "--adapter", MISSING, "--out", "{tmp}/out"],
        "unwritable": ["--model", MISSING, "--adapter", MISSING, "--out", UNWRITABLE],
    },
    "train gguf": {
        "missing_input": ["--model", MISSING, "--out", "{tmp}/out.gguf"],
        "unwritable": ["--model", MISSING, "--out", UNWRITABLE],
    },
    "train dagger": {
        "missing_input": ["--model", MISSING, "--out", "{tmp}/out", "--tasks", "emmoe-084"],
        "unwritable": ["--model", "{tmp}", "--out", UNWRITABLE, "--tasks", "emmoe-084"],
        "bad_teacher": ["--model", "{tmp}", "--out", "{tmp}/out", "--tasks", "emmoe-084", "--teacher-model", "nope"],
        "bad_warmup": ["--model", "{tmp}", "--out", "{tmp}/out", "--tasks", "emmoe-084", "--warmup-steps", "-1"],
    },
    "train pack": {
        "missing_input": ["--from", MISSING, "--out", "{tmp}/pack"],
        "unwritable": ["--from", "{tmp}", "--out", UNWRITABLE],
    },
    "train eval": {
        "missing_input": ["--model", MISSING, "--sft", MISSING],
        "unwritable": ["--model", MISSING, "--sft", MISSING, "--out", UNWRITABLE],
    },
    "muep export": {
        "unwritable": ["--out", UNWRITABLE],
        "bad_name": ["--out", "{tmp}/out", "--phrasing", "nope"],
    },
}

#: (command, case) -> what its one line must name: the refusal is about what was wrong, not some later complaint.
MENTIONS: dict[tuple[str, str], str] = {
    ("run", "unknown_option"): "does not take option(s) foo; it takes: interact_range_m",
    ("run", "malformed_option"): "'=x' must look like key=value",
    ("run", "option_not_a_number"): "interact_range_m=far must be a number",
    ("run", "option_not_yes_no"): "close_opened=maybe must be a yes/no value",
    ("run", "missing_out"): "missing option '--out'",
    ("run", "not_an_integer"): "'--seed'",
    ("run", "hf_option_not_an_integer"): "max_new_tokens=abc must be an integer",
    ("run", "hf_option_not_yes_no"): "share_prefix=maybe must be a yes/no value",
    ("run", "openai_option_not_yes_no"): "constrained=maybe must be a yes/no value",
    ("run", "openai_option_not_a_number"): "temperature=hot must be a number",
    ("run", "missing_model"): "does not exist: the hf planner loads local folders only",
    ("run", "suite_expert_option"): "planner 'partnr_expert' does not take option(s) foo",
    ("eval", "missing_model"): "does not exist: the hf planner loads local folders only",
    ("up robot", "bad_name"): "no robot profile 'stretch'",
    ("up robot", "simulator_profile"): "run `homie up sim` for it",
    ("up sim", "unknown_option"): "planner 'expert' does not take option(s) foo",
    ("up sim", "hf_option_not_an_integer"): "max_new_tokens=abc must be an integer",
    ("up sim", "missing_model"): "does not exist: the hf planner loads local folders only",
    ("up sim", "suite_expert_option"): "planner 'partnr_expert' does not take option(s) foo",
    ("up sim", "pair_missing_model"): "does not exist: the hf planner loads local folders only",
    ("data build", "unwritable"): "cannot write --out {location}",
    ("data corrections", "unwritable"): "cannot write --out {location}",
    ("data corrections", "evaluation_seed"): "the emmoe100 evaluation plays",
    ("data corrections", "missing_input"): "no data set",
    ("data corrections", "not_a_student"): "subtask-only answers",
    ("data corrections", "bad_value"): "--takeover must be >= 1",
    ("data export", "unwritable"): "cannot write --out {location}",
    ("data skills", "unwritable"): "cannot write --out {location}",
    ("data skills", "evaluation_seed"): "seed 1000000 is an evaluation seed",
    ("data skills", "existing_output"): "exists and is not an empty folder",
    ("eval", "unknown_option"): "does not take option(s) foo; it takes: interact_range_m",
    ("eval", "malformed_option"): "'=x' must look like key=value",
    ("eval", "option_not_a_number"): "near_threshold_m=near must be a number",
    ("eval", "missing_out"): "missing option '--out' / '-o' (see homie eval --help)",
    ("train skill", "unwritable"): "cannot write --out {location}",
    ("train skill", "missing_input"): "does not exist",
    ("train skill", "not_a_data_set"): "not a LeRobot data set",
    ("train skill", "bad_name"): "unknown --policy 'diffusion'",
    ("train sft", "bad_max_steps"): "'--max-steps'",
    ("train dpo", "bad_max_steps"): "'--max-steps'",
    # The output is checked before the data set is read and the model loaded.
    ("train sft", "unwritable"): "cannot write --out {location}",
    ("train dpo", "unwritable"): "cannot write --out {location}",
    ("train merge", "unwritable"): "cannot write --out {location}",
    ("train eval", "unwritable"): "cannot write --out {location}",
    ("eval", "partner_without_agents"): "--partner-planner is an option of --agents robot+human",
    ("metrics", "bad_convention"): "unknown convention 'nope'; choose tables or prose",
    ("bag record", "missing_out"): "give the bag directory to create: --out DIR",
}
#: An atomic write's temporary beside its target (``/proc/.out.tmp-x1y2z3ab``): never the path an error names.
TEMPORARY = re.compile(r"/\.[^/\s]+\.(tmp|old)-[a-z0-9_]{8}")


def _leaf_commands() -> list[str]:
    root = typer.main.get_command(build_app())
    found: list[str] = []

    def walk(command: object, prefix: list[str]) -> None:
        children = getattr(command, "commands", None)  # click groups hold their subcommands here
        if children is None:
            found.append(" ".join(prefix))
            return
        for name, child in children.items():
            walk(child, [*prefix, name])

    walk(root, [])
    return sorted(found)


def test_every_command_has_cases() -> None:
    assert sorted(CASES) == _leaf_commands()


def _invocations(tmp: Path) -> list[tuple[str, str, list[str]]]:
    blocker = tmp / "a-file"
    blocker.write_text("not a folder")
    malformed = tmp / "broken_scene.yaml"
    malformed.write_text("name: broken\nrooms: [kitchen, hall\n  - furniture: none\n")  # an unclosed list
    unwritable = ["/proc/homie-test/out", str(blocker / "out")]
    runs = []
    for command, cases in CASES.items():
        for case, arguments in cases.items():
            variants = unwritable if case == "unwritable" else [None]
            for location in variants:
                args = [
                    a.replace(UNWRITABLE, location or "").replace(MISSING, str(tmp / "missing"))
                    .replace(MALFORMED, str(malformed))
                    .replace("{tmp}", str(tmp / "work"))
                    for a in arguments
                ]
                runs.append((command, f"{case} {location or ''}".strip(), [*command.split(), *args]))
    return runs


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.slow
def test_every_command_fails_with_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    runs = _invocations(tmp_path)
    before = _snapshot(tmp_path)
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "COLUMNS": "200"}

    def invoke(run: tuple[str, str, list[str]]) -> tuple[str, str, subprocess.CompletedProcess]:
        command, case, argv = run
        done = subprocess.run([HOMIE, *argv], capture_output=True, text=True, timeout=300, env=env,
                              cwd=tmp_path / "work")
        return command, case, done

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(invoke, runs))
    problems = []
    for command, case, done in results:
        # A deprecated spelling's notice ("warning: homie muep run is deprecated ...") is not the error line.
        lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("warning: ")]
        ok = (
            done.returncode == EXIT_BAD_INPUT
            and len(lines) == 1
            and lines[0].startswith("error: ")
            and "Traceback" not in done.stderr + done.stdout
        )
        if ok and case.startswith("malformed_input"):
            ok = "broken_scene.yaml" in lines[0] and "line 3, column" in lines[0]  # which file, where in it
        name, _, location = case.partition(" ")
        if ok and (command, name) in MENTIONS:
            ok = MENTIONS[command, name].format(location=location) in lines[0]
        if ok:
            ok = not TEMPORARY.search(lines[0])
        if not ok:
            problems.append(f"homie {command} [{case}]: exit {done.returncode}, stderr {done.stderr.strip()[-400:]!r}")
    assert not problems, "\n".join(problems)
    assert _snapshot(tmp_path) == before, "a refused command wrote something"
    assert len(results) >= 40


# ------------------------------------------------------------------------------ the mapping itself


def test_error_classes_map_to_their_exit_code() -> None:
    from homiebot.eval.runner import EvalError
    from homiebot.planner.hf_backend import PlannerBackendError, PlannerLoadError
    from homiebot.planner.openai_backend import OpenAIServerError

    assert classify(OpenAIServerError("cannot reach the server"))[0] == EXIT_ENVIRONMENT
    assert classify(PlannerBackendError("x"))[0] == EXIT_ENVIRONMENT
    assert classify(PlannerLoadError("no model at /nope"))[0] == EXIT_BAD_INPUT  # a bad model path
    assert classify(EvalError("x")) == (EXIT_BAD_INPUT, "x")
    assert classify(OSError(28, "No space left on device", "/data/x"))[0] == EXIT_ENVIRONMENT
    assert classify(PermissionError(13, "Permission denied", "/x"))[0] == EXIT_BAD_INPUT
    assert classify(CommandFailed("why", 1)) == (1, "why")
    assert classify(ValueError("a bug")) is None  # anything else keeps its traceback


def test_check_output_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out"
    assert check_output(target) == target
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(typer.Exit) as raised:
        check_output(tmp_path / "file")
    assert raised.value.exit_code == EXIT_BAD_INPUT
    with pytest.raises(typer.Exit):
        check_output(tmp_path, directory=False)


def test_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([HOMIE, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"homie {version('homiebot')}", done
