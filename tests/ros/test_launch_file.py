"""launch/launch/sim.launch.py without a ROS 2 install: ``launch`` and ``launch_ros`` are not on PyPI, so they
are replaced by small fakes (FakeNode, FakeOnProcessExit, ...) that record what the launch file asks for. The
checks: rviz only when installed, every package looked up before any process starts, ``use_sim_time`` reaches
every node, only named arguments override parameters, and the restart / shutdown policy is the one of
``homie up``'s supervisor (same decisions for the same exits; a failed required node fails the launch).
The file itself runs under real ``ros2 launch`` in ``test_ros_launch.py`` where launch_testing is installed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO / "launch" / "launch" / "sim.launch.py"


@dataclass
class FakeNode:
    kwargs: dict[str, Any]


@dataclass
class FakeAction:
    kind: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeOnProcessExit:
    on_exit: Any
    target_action: Any = None


class FakeLaunchConfiguration:
    def __init__(self, name: str) -> None:
        self.name = name

    def perform(self, context: FakeContext) -> str:
        return context.arguments[self.name]


@dataclass
class FakeContext:
    arguments: dict[str, str]
    is_shutdown: bool = False


@dataclass
class FakeExit:
    action: Any
    returncode: int


class FakePackageNotFoundError(KeyError):
    pass


def _load_launch_file(monkeypatch: pytest.MonkeyPatch, share: Path, installed: set[str]) -> types.ModuleType:
    def module(name: str, **attrs: Any) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, mod)
        return mod

    def action(kind: str):
        return lambda *args, **kwargs: FakeAction(kind, {"args": args, **kwargs})

    def prefix(package: str) -> str:
        if package not in installed:
            raise FakePackageNotFoundError(package)
        return f"/fake/{package}"

    module("launch", LaunchDescription=lambda entities: FakeAction("LaunchDescription", {"entities": entities}))
    module("launch.actions", **{k: action(k) for k in ("DeclareLaunchArgument", "EmitEvent", "LogInfo", "OpaqueFunction",
                                                        "RegisterEventHandler", "TimerAction")})
    module("launch.event_handlers", OnProcessExit=FakeOnProcessExit)
    module("launch.events", Shutdown=action("Shutdown"))
    module("launch.substitutions", LaunchConfiguration=FakeLaunchConfiguration)
    module("launch_ros")
    module("launch_ros.actions", Node=lambda **kwargs: FakeNode(kwargs))
    module("ament_index_python")
    module("ament_index_python.packages", PackageNotFoundError=FakePackageNotFoundError, get_package_prefix=prefix,
           get_package_share_directory=lambda package: str(share))
    spec = importlib.util.spec_from_file_location("homie_sim_launch", LAUNCH_FILE)
    launch_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_file)
    return launch_file


def _share(tmp_path: Path, nodes: list[dict] | None = None) -> Path:
    share = tmp_path / "share"
    (share / "config").mkdir(parents=True)
    shutil.copy(REPO / "launch" / "config" / "homie.yaml", share / "config" / "homie.yaml")
    graph = yaml.safe_load((REPO / "launch" / "config" / "graph.yaml").read_text())
    if nodes is not None:
        graph["nodes"] = nodes
    (share / "config" / "graph.yaml").write_text(yaml.safe_dump(graph))
    return share


def _arguments(launch_file: types.ModuleType, **given: str) -> dict[str, str]:
    return {name: given.get(name, default) for name, (default, _) in launch_file.ARGUMENTS.items()}


GRAPH_PACKAGES = {"sim_bridge", "executor_nodes", "homie_perception", "planner_node"}


def test_rviz_only_when_installed_and_use_sim_time_everywhere(monkeypatch, tmp_path) -> None:
    share = _share(tmp_path)
    launch_file = _load_launch_file(monkeypatch, share, GRAPH_PACKAGES)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, task="emmoe-084", use_sim_time="true")))
    nodes = [a for a in actions if isinstance(a, FakeNode)]
    assert [n.kwargs["name"] for n in nodes] == [n["name"] for n in yaml.safe_load((share / "config/graph.yaml").read_text())["nodes"]]
    assert all({"use_sim_time": True} in n.kwargs["parameters"] for n in nodes)
    messages = [a.kwargs["msg"] for a in actions if isinstance(a, FakeAction) and a.kind == "LogInfo"]
    assert any("rviz2 is not installed" in m for m in messages)  # default rviz:=true, rviz2 absent
    planner = next(n for n in nodes if n.kwargs["name"] == "planner_node").kwargs["parameters"][-1]
    assert planner["task"] == "emmoe-084" and "scene" not in planner  # unset arguments change nothing
    assert planner["await_nodes"] == "sim_bridge,nav_executor,manip_executor,executor,perception"

    launch_file = _load_launch_file(monkeypatch, share, GRAPH_PACKAGES | {"rviz2"})
    actions = launch_file._graph(FakeContext(_arguments(launch_file)))
    rviz = [a for a in actions if isinstance(a, FakeNode) and a.kwargs["package"] == "rviz2"]
    assert len(rviz) == 1 and rviz[0].kwargs["parameters"] == [{"use_sim_time": True}]
    others = [a for a in actions if isinstance(a, FakeNode) and a.kwargs["package"] != "rviz2"]
    assert all({"use_sim_time": False} in n.kwargs["parameters"] for n in others)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, rviz="false")))
    assert not [a for a in actions if isinstance(a, FakeNode) and a.kwargs["package"] == "rviz2"]


def test_exit_when_done_shuts_the_graph_down_after_the_episode(monkeypatch, tmp_path) -> None:
    """exit_when_done:=true reaches the planner node, whose exit after its episode ends the launch (0: the episode
    ran; a failed or timed-out episode fails it); without it the planner is not told to exit."""
    launch_file = _load_launch_file(monkeypatch, _share(tmp_path), GRAPH_PACKAGES)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, task="demo-green-can", exit_when_done="true",
                                                        rviz="false")))
    planner = next(a for a in actions if isinstance(a, FakeNode) and a.kwargs["name"] == "planner_node")
    assert planner.kwargs["parameters"][-1]["exit_when_done"] is True
    handler = next(a for a in actions if isinstance(a, FakeAction) and a.kind == "RegisterEventHandler").kwargs["args"][0]
    reply = handler.on_exit(FakeExit(planner, 0), FakeContext({}))
    assert [a.kind for a in reply] == ["EmitEvent"] and reply[0].kwargs["event"].kind == "Shutdown"
    actions = launch_file._graph(FakeContext(_arguments(launch_file, task="demo-green-can", exit_when_done="true",
                                                        rviz="false")))
    planner = next(a for a in actions if isinstance(a, FakeNode) and a.kwargs["name"] == "planner_node")
    handler = next(a for a in actions if isinstance(a, FakeAction) and a.kind == "RegisterEventHandler").kwargs["args"][0]
    with pytest.raises(launch_file.GraphFailed, match="planner_node"):
        handler.on_exit(FakeExit(planner, 3), FakeContext({}))
    actions = launch_file._graph(FakeContext(_arguments(launch_file, task="demo-green-can", rviz="false")))
    planner = next(a for a in actions if isinstance(a, FakeNode) and a.kwargs["name"] == "planner_node")
    assert "exit_when_done" not in planner.kwargs["parameters"][-1]


def test_skills_physical_reaches_the_bridge_and_both_skill_executors(monkeypatch, tmp_path) -> None:
    """skills:=physical sets the bridge's robot and the executors that drive it (docs/robots.md), and the planner
    node's, which its record's run configuration names; noise:= reaches the bridge and the planner node alike;
    unset, the parameter file's value stands; a wrong value starts nothing."""
    launch_file = _load_launch_file(monkeypatch, _share(tmp_path), GRAPH_PACKAGES)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, skills="physical", noise="emmoe", rviz="false")))
    nodes = {a.kwargs["name"]: a.kwargs["parameters"][-1] for a in actions if isinstance(a, FakeNode)}
    assert {name for name, overrides in nodes.items() if overrides.get("skills") == "physical"} == {
        "sim_bridge", "nav_executor", "manip_executor", "planner_node"}
    assert {name for name, overrides in nodes.items() if overrides.get("noise") == "emmoe"} == {
        "sim_bridge", "planner_node"}
    assert nodes["planner_node"]["simulator"] == nodes["sim_bridge"]["simulator"] == "mujoco"
    actions = launch_file._graph(FakeContext(_arguments(launch_file, rviz="false")))
    assert not any("skills" in a.kwargs["parameters"][-1] for a in actions if isinstance(a, FakeNode))
    with pytest.raises(RuntimeError, match="skills:=physics: use oracle or physical"):
        launch_file._graph(FakeContext(_arguments(launch_file, skills="physics", rviz="false")))


def test_articulation_reaches_the_bridge_the_manipulation_executor_and_the_planner(monkeypatch, tmp_path) -> None:
    """articulation:= (with skills:=physical, as homie up sim --articulation) sets the sim bridge's skill set, the
    manipulation executor's Open and Close and the planner node's record (docs/robots.md); unset, no node gets it;
    without skills:=physical or with a wrong value nothing starts."""
    launch_file = _load_launch_file(monkeypatch, _share(tmp_path), GRAPH_PACKAGES)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, skills="physical", articulation="oracle",
                                                        rviz="false")))
    nodes = {a.kwargs["name"]: a.kwargs["parameters"][-1] for a in actions if isinstance(a, FakeNode)}
    assert {name for name, overrides in nodes.items() if overrides.get("articulation") == "oracle"} == {
        "sim_bridge", "manip_executor", "planner_node"}
    actions = launch_file._graph(FakeContext(_arguments(launch_file, skills="physical", rviz="false")))
    assert not any("articulation" in a.kwargs["parameters"][-1] for a in actions if isinstance(a, FakeNode))
    with pytest.raises(RuntimeError, match="articulation:= needs skills:=physical"):
        launch_file._graph(FakeContext(_arguments(launch_file, articulation="physical", rviz="false")))
    with pytest.raises(RuntimeError, match="articulation:=arm: use oracle or physical"):
        launch_file._graph(FakeContext(_arguments(launch_file, skills="physical", articulation="arm", rviz="false")))


def test_skill_models_start_one_policy_node_each_with_the_parameters_homie_up_gives(monkeypatch, tmp_path) -> None:
    """skill_models:=NoMaD=DIR,rt-1-x=DIR (with skills:=physical) starts a policy node per slot after the manipulation
    executor, with homie up sim --skill-model's names and parameters (homiebot.ros.policy_nodes builds both), and
    gives the bridge the policies' image size, each executor the slots it forwards and the planner node the record's
    folders; the planner waits for the policy nodes too. Unset, no policy node."""
    from homiebot.ros.policy_nodes import PolicyNodes
    from homiebot.ros.supervisor import DEFAULT_GRAPH, load_graph
    from tests.cli.test_skills_option import _stand_in_go_to, _stand_in_policy

    go_to, pick = _stand_in_go_to(tmp_path / "go_to"), _stand_in_policy(tmp_path / "pick")
    launch_file = _load_launch_file(monkeypatch, _share(tmp_path), GRAPH_PACKAGES)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, skills="physical", rviz="false",
                                                        skill_models=f"NoMaD={go_to},rt-1-x={pick}")))
    nodes = {a.kwargs["name"]: a.kwargs for a in actions if isinstance(a, FakeNode)}
    assert list(nodes) == ["sim_bridge", "nav_executor", "manip_executor", "skill_policy_nomad", "skill_policy_rt_1_x",
                           "executor", "perception", "planner_node"]
    expected = {"skill_policy_nomad": {"model": "NoMaD", "policy": str(go_to), "action": "/skill_policy/nomad/navigate"},
                "skill_policy_rt_1_x": {"model": "RT-1-X", "policy": str(pick),
                                        "action": "/skill_policy/rt_1_x/manipulate"}}
    homie_up = PolicyNodes.checked([f"NoMaD={go_to}", f"rt-1-x={pick}"], "physical").with_nodes(load_graph(DEFAULT_GRAPH))
    for name, parameters in expected.items():
        node = nodes[name]
        assert (node["package"], node["executable"]) == ("executor_nodes", "skill_policy")
        assert node["parameters"][0].endswith("homie.yaml") and {"use_sim_time": False} in node["parameters"]
        assert node["parameters"][2] == parameters == homie_up.node(name).parameters
    given = {name: node["parameters"][-1] for name, node in nodes.items()}
    assert given["sim_bridge"]["skill_camera_size"] == 32
    assert given["nav_executor"]["learned_skills"] == "NoMaD=/skill_policy/nomad/navigate"
    assert given["manip_executor"]["learned_skills"] == "RT-1-X=/skill_policy/rt_1_x/manipulate"
    assert yaml.safe_load(given["planner_node"]["skill_models"]) == {"NoMaD": str(go_to), "RT-1-X": str(pick)}
    assert given["planner_node"]["await_nodes"].split(",") == [n for n in nodes if n != "planner_node"]
    actions = launch_file._graph(FakeContext(_arguments(launch_file, skills="physical", rviz="false")))
    assert not [a for a in actions if isinstance(a, FakeNode) and a.kwargs["executable"] == "skill_policy"]


def test_a_bad_skill_models_value_is_one_line_and_starts_nothing(monkeypatch, tmp_path) -> None:
    """skill_models:= is refused as homie up sim --skill-model is (the same parser and folder checks), in one line
    that names the launch argument, before any node is made."""
    from tests.cli.test_skills_option import _stand_in_go_to, _stand_in_policy

    go_to, pick = _stand_in_go_to(tmp_path / "go_to"), _stand_in_policy(tmp_path / "pick")
    launch_file = _load_launch_file(monkeypatch, _share(tmp_path), GRAPH_PACKAGES)
    cases = [
        ({"skill_models": f"NoMaD={go_to}"}, "skill_models:= needs skills:=physical"),
        ({"skills": "physical", "skill_models": f"gpt={go_to}"}, "skill_models:= 'gpt=" + str(go_to) + "': unknown model slot 'gpt'"),
        ({"skills": "physical", "skill_models": "NoMaD"}, "skill_models:= 'NoMaD': give MODEL=DIR"),
        ({"skills": "physical", "skill_models": f"NoMaD={go_to},nomad={go_to}"}, "skill_models:= NoMaD is given twice"),
        ({"skills": "physical", "skill_models": f"NoMaD={go_to},"}, "skill_models:= '': give MODEL=DIR"),
        ({"skills": "physical", "skill_models": f"NoMaD={tmp_path / 'none'}"},
         f"skill_models:= NoMaD: policy {tmp_path / 'none'} is not a folder"),
        ({"skills": "physical", "skill_models": f"NoMaD={pick}"}, f"skill_models:= NoMaD={pick}: the policy outputs 10 values"),
    ]
    for given, words in cases:
        with pytest.raises(RuntimeError) as raised:
            launch_file._graph(FakeContext(_arguments(launch_file, rviz="false", **given)))
        message = str(raised.value)
        assert message.startswith(words) and "\n" not in message and "--skill-model" not in message, (given, message)
    share = _share(tmp_path / "robot")  # a real robot's graph has no policy nodes: said, not dropped
    shutil.copy(REPO / "launch" / "config" / "graph_robot.yaml", share / "config" / "graph_robot.yaml")
    launch_file = _load_launch_file(monkeypatch, share, GRAPH_PACKAGES)
    with pytest.raises(RuntimeError, match=r"^skill_models:= needs the simulator's graph \(robot:=sim\); robot:=fetch"):
        launch_file._graph(FakeContext(_arguments(launch_file, robot="fetch", skills="physical",
                                                  skill_models=f"NoMaD={go_to}")))


def test_a_missing_package_starts_nothing(monkeypatch, tmp_path) -> None:
    launch_file = _load_launch_file(monkeypatch, _share(tmp_path), GRAPH_PACKAGES - {"homie_perception"})
    with pytest.raises(RuntimeError, match="homie_perception"):
        launch_file._graph(FakeContext(_arguments(launch_file)))


def test_every_documented_argument_is_declared() -> None:
    """The arguments docs/ros.md's commands pass are declared, and none of them is given an empty value."""
    import re

    text = (REPO / "docs" / "ros.md").read_text()
    commands = re.findall(r"ros2 launch homie sim\.launch\.py([^`]*)`", text.replace("\n", " "))
    assert commands
    source = LAUNCH_FILE.read_text()
    for command in commands:
        for name, value in re.findall(r"(\w+):=(\S*)", command):
            assert value, f"empty value for {name}:= in docs/ros.md (ros2 launch refuses it)"
            assert f'"{name}": (' in source, f"{name} is not a declared argument"


# ---------------------------------------------------------------------------------------- restart policy

CASES = [
    # restart, required, max_restarts, exit codes of the successive runs
    ("on-failure", False, 3, [1, 1, 1, 1]),
    ("on-failure", False, 3, [1, 0]),
    ("always", False, 2, [0, 0, 0]),
    ("never", False, 3, [1]),
    ("on-failure", True, 2, [1, 1, 1]),
    ("on-failure", True, 2, [-9, 0]),
    ("never", True, 0, [0]),
    ("never", True, 0, [1]),
]


def _launch_outcomes(monkeypatch, tmp_path, spec: dict, codes: list[int]) -> list[str]:
    launch_file = _load_launch_file(monkeypatch, _share(tmp_path, [spec]), GRAPH_PACKAGES)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, rviz="false")))
    handler = next(a for a in actions if isinstance(a, FakeAction) and a.kind == "RegisterEventHandler").kwargs["args"][0]
    current = next(a for a in actions if isinstance(a, FakeNode))
    outcomes = []
    for code in codes:
        try:
            reply = handler.on_exit(FakeExit(current, code), FakeContext({}))
        except launch_file.GraphFailed:
            outcomes.append("graph failed")
            break
        kinds = [a.kind for a in reply]
        if "TimerAction" in kinds:
            outcomes.append("restart")
            current = next(a for a in reply if a.kind == "TimerAction").kwargs["actions"][0]
        elif "EmitEvent" in kinds:
            outcomes.append("graph finished")
            break
        else:
            outcomes.append("stopped")
            break
    return outcomes


def _supervisor_outcomes(monkeypatch, tmp_path, spec: dict, codes: list[int]) -> list[str]:
    from homiebot.ros import supervisor as supervisor_module
    from homiebot.ros.supervisor import GraphSpec, NodeSpec, Supervisor

    @dataclass
    class FakePopen:
        returncode: int
        pid: int = 1

        def poll(self) -> int:
            return self.returncode

    remaining = list(codes)

    def spawn(self, process) -> None:
        process.popen = FakePopen(remaining.pop(0))

    monkeypatch.setattr(supervisor_module.Supervisor, "_spawn", spawn)
    node = NodeSpec(**{k: v for k, v in spec.items() if k in NodeSpec.model_fields})
    supervisor = Supervisor(GraphSpec(nodes=[node]), REPO / "launch" / "config" / "homie.yaml", env={}, restart_delay_s=0.0,
                            shm_dir=None)
    process = supervisor.processes[node.name]
    spawn(supervisor, process)
    outcomes = []
    while True:
        kinds = [e.kind for e in supervisor.poll()]
        if "restarting" in kinds:
            outcomes.append("restart")
            continue
        ended = supervisor.required_finished()
        if ended is not None:  # homie up: a required node's non-zero last exit is a failure (exit 1)
            outcomes.append("graph failed" if ended.exit_codes[-1] != 0 else "graph finished")
        else:
            outcomes.append("stopped")
        return outcomes


@pytest.mark.parametrize(("restart", "required", "max_restarts", "codes"), CASES)
def test_launch_and_homie_up_follow_the_same_restart_policy(monkeypatch, tmp_path, restart, required, max_restarts,
                                                           codes) -> None:
    spec = {"name": "sim_bridge", "package": "sim_bridge", "executable": "sim_bridge", "module": "sim_bridge.node",
            "restart": restart, "required": required, "max_restarts": max_restarts}
    launched = _launch_outcomes(monkeypatch, tmp_path / "launch", spec, codes)
    supervised = _supervisor_outcomes(monkeypatch, tmp_path / "up", spec, codes)
    assert launched == supervised
    expected_restarts = sum(1 for o in launched if o == "restart")
    assert expected_restarts <= max_restarts
    if required and codes[len(launched) - 1] != 0:
        assert launched[-1] == "graph failed"


def test_incompatible_launch_testing_is_detected(monkeypatch, request) -> None:
    """pytest 9 cannot load launch_testing before 3.4.12: the suite must still run, skipping the launch tier."""
    import importlib.metadata

    root = next(p for p in request.config.pluginmanager.get_plugins()
                if getattr(p, "__file__", "").endswith(str(Path("tests") / "conftest.py")) and hasattr(p, "launch_testing_problem"))
    monkeypatch.setattr(root.pytest, "__version__", "9.0.2")
    for found, problem in (("3.4.3", True), ("3.4.12", False), ("3.7.1", False)):
        monkeypatch.setattr(importlib.metadata, "version", lambda name, found=found: found)
        reason = root.launch_testing_problem()
        assert bool(reason) is problem, (found, reason)
        if problem:
            assert "ros2/launch#979" in reason and found in reason
    monkeypatch.setattr(root.pytest, "__version__", "8.4.2")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.4.3")
    assert root.launch_testing_problem() is None


FAKE_HOOKS = '''"""A stand-in for launch_testing's pytest plugin (launch_testing is not on PyPI): says under which name it runs."""
import os
import sys


def pytest_configure(config):
    with open(os.environ["FAKE_LAUNCH_TESTING_LOG"], "a") as log:
        log.write(config.pluginmanager.get_name(sys.modules[__name__]) + "\\n")
'''


@pytest.mark.parametrize("by_hand", [True, False])
def test_launch_testing_loaded_by_hand_is_not_registered_twice(tmp_path, by_hand) -> None:
    """``pytest -p launch_testing.pytest.hooks`` (as launch_testing's docs say) runs the suite with the plugin once;
    without ``-p`` the conftest registers it itself."""
    fake = tmp_path / "site"
    package = fake / "launch_testing" / "pytest"
    package.mkdir(parents=True)
    (fake / "launch_testing" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "hooks.py").write_text(FAKE_HOOKS)
    metadata = fake / "launch_testing-3.4.12.dist-info"  # new enough for any pytest (no known problem)
    metadata.mkdir()
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: launch_testing\nVersion: 3.4.12\n")
    log = tmp_path / "registered.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]),
           "FAKE_LAUNCH_TESTING_LOG": str(log)}
    selected = "tests/ros/test_launch_file.py::test_every_documented_argument_is_declared"
    extra = ["-p", "launch_testing.pytest.hooks"] if by_hand else []
    done = subprocess.run([sys.executable, "-m", "pytest", *extra, "-p", "no:cacheprovider", "-q", selected],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "already registered" not in done.stdout + done.stderr
    names = log.read_text().split()
    assert names == (["launch_testing.pytest.hooks"] if by_hand else ["homie_launch_testing"])


def test_a_real_robot_profile_starts_the_robot_graph_without_the_bridge(monkeypatch, tmp_path) -> None:
    """robot:=fetch: config/graph_robot.yaml's nodes only (no sim bridge), told the profile's path; its node's clean
    exit (every interface found, exit_when_done) shuts the launch down, a failed one fails it."""
    share = _share(tmp_path)
    shutil.copy(REPO / "launch" / "config" / "graph_robot.yaml", share / "config" / "graph_robot.yaml")
    launch_file = _load_launch_file(monkeypatch, share, GRAPH_PACKAGES)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, robot="fetch", exit_when_done="true")))
    nodes = [a for a in actions if isinstance(a, FakeNode)]
    assert [n.kwargs["name"] for n in nodes] == ["robot_interfaces"]
    told = nodes[0].kwargs["parameters"][-1]
    assert told["exit_when_done"] is True and Path(told["robot"]).name == "fetch.yaml" and Path(told["robot"]).is_file()
    handler = next(a for a in actions if isinstance(a, FakeAction) and a.kind == "RegisterEventHandler").kwargs["args"][0]
    done = handler.on_exit(FakeExit(nodes[0], 0), FakeContext({}))
    assert [a.kind for a in done] == ["EmitEvent"]
    with pytest.raises(launch_file.GraphFailed):
        handler.on_exit(FakeExit(nodes[0], 2), FakeContext({}))
    # The simulator's profile keeps the standard graph; an unknown profile starts nothing.
    sim = launch_file._graph(FakeContext(_arguments(launch_file, robot="sim")))
    assert "sim_bridge" in [a.kwargs["name"] for a in sim if isinstance(a, FakeNode)]
    from homiebot.config.robot import RobotProfileError

    with pytest.raises(RobotProfileError, match="no robot profile 'fetchh'"):
        launch_file._graph(FakeContext(_arguments(launch_file, robot="fetchh")))
