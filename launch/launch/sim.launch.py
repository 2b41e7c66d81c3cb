"""Bring up the HomieBot graph on a machine with ROS 2 installed: ``ros2 launch homie sim.launch.py``.

Arguments (give only the ones you change; ``name:=`` with an empty value is refused by ``ros2 launch``):
  task          built-in task id; default none: the planner waits for homie_msgs/Task on /homie/task
  scene         scene library name (default: the task's scene)
  planner       planner registry name (expert, scripted, random, openai, ...)
  simulator     simulator backend of the sim bridge (mujoco)
  seed          run index (the scene seed is the task's seed + this)
  noise         skill execution noise preset of the sim bridge: noiseless, emmoe_table4 (alias emmoe);
                default: config/homie.yaml's (noiseless)
  skills        oracle or physical: the sim bridge serves the arm and gripper controllers under physics and the
                navigation and manipulation executors run Go to, Pick and Put through NavigateToPose,
                FollowJointTrajectory and GripperCommand (docs/robots.md); default: config/homie.yaml's (oracle)
  articulation  with skills:=physical, how Open and Close run: physical (the manipulation executor's arm, the
                default) or oracle (the sim bridge's skill set sets the joint); homie up sim --articulation
  use_sim_time  false (default) or true, passed to every node of the graph: their messages are stamped in
                simulated time either way (docs/ros.md, "Time"); true also moves the nodes' own clocks (rosout,
                timers) onto /clock, which only advances when a skill runs
  rviz          true (default): also start rviz2 with rviz/homie.rviz when rviz2 is installed (else the graph
                starts without it, and the log says so)
  partner_planner  the planner of PARTNR's human partner (expert, react, scripted, ...); given, the graph is
                config/graph_pair.yaml's (the sim bridge with the human under /human, the human's executors) and
                the planner node drives both agents in lock-step rounds (docs/ros.md, "Two agents")
  mode          decentralized (default) or centralized control of the pair
  exit_when_done  false (default: the graph stays up for the next homie_msgs/Task) or true: the planner node exits
                after its first episode, and the graph is shut down with it; ``ros2 launch`` then exits 0 when the
                episode ran (whatever its outcome) and non-zero when it failed or a node missed its deadline
  robot         a robot profile: a built-in name (sim, fetch, spot) or a YAML path (docs/robots.md); default sim.
                A profile whose robot is not the simulator starts config/graph_robot.yaml instead: no sim bridge, and
                robot_interfaces waits for the robot's interfaces, one line per missing one; with exit_when_done the
                graph shuts down once all are found. Reading a profile needs homiebot importable by launch's python
  skill_models  learned policies in EMMOE's model slots, MODEL=DIR entries separated by commas (MODEL one of RT-1-X,
                octo, NoMaD, PixNav in any case; DIR a LeRobot policy folder, no comma in its path); needs
                skills:=physical and the simulator's graph (refused with a real robot's profile). Each gets a policy node, skill_policy_<slot>, with the parameters homie up sim
                --skill-model gives it, and the bridge, the executors and the planner node theirs (docs/skills.md);
                checked as --skill-model is, by the same code (homiebot.ros.policy_nodes, so homiebot must be
                importable by launch's python), before any process starts

The processes and their order come from config/graph.yaml, the parameters from config/homie.yaml: the same
files ``homie up sim`` uses where launch is not installed (PyPI wheels), so both bring up the same graph with the
same policy (homiebot.ros.supervisor): a node with ``restart: on-failure`` is started again after a non-zero
exit, ``always`` after any exit, at most ``max_restarts`` times; when a ``required`` node exits, the whole graph
is shut down, and ``ros2 launch`` exits non-zero if that exit was a failure. Every package is looked up before
any process starts, so a missing one starts nothing.
"""

from __future__ import annotations

import os

import yaml
from ament_index_python.packages import PackageNotFoundError, get_package_prefix, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, LogInfo, OpaqueFunction, RegisterEventHandler, TimerAction
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

ARGUMENTS = {
    "task": ("none", "Built-in task id; none: wait for homie_msgs/Task on /homie/task."),
    "scene": ("default", "Scene library name; default: the task's scene."),
    "planner": ("expert", "Planner registry name."),
    "simulator": ("mujoco", "Simulator backend of the sim bridge."),
    "seed": ("0", "Run index: the scene seed is the task's seed + this."),
    "noise": ("default", "Skill execution noise preset of the sim bridge (noiseless, emmoe_table4 or emmoe); default: config/homie.yaml's."),
    "skills": ("default", "oracle or physical (the standard interfaces under physics); default: config/homie.yaml's."),
    "articulation": ("default", "With skills:=physical: physical (the arm opens and closes doors and drawers) or oracle (the simulator sets the joint)."),
    "use_sim_time": ("false", "Every node's use_sim_time parameter (their stamps are simulated time either way)."),
    "rviz": ("true", "Start rviz2 with the HomieBot layout when rviz2 is installed."),
    "partner_planner": ("none", "The human partner's planner; given, the two-agent graph (config/graph_pair.yaml)."),
    "mode": ("decentralized", "Control of the robot and human pair: decentralized or centralized."),
    "exit_when_done": ("false", "true: shut the graph down once the planner's first episode is over."),
    "robot": ("sim", "Robot profile (sim, fetch, spot or a YAML path); a real robot's: no simulator, wait for its interfaces."),
    "skill_models": ("none", "Learned policies MODEL=DIR[,MODEL=DIR...] (MODEL: RT-1-X, octo, NoMaD, PixNav; needs skills:=physical): one policy node each, as homie up sim --skill-model."),
}
#: Argument values that mean "not given" (``ros2 launch`` cannot pass an empty value).
UNSET = ("", "none", "default")
#: The skill settings (homiebot.config.SkillsMode) and the nodes that take the ``skills`` parameter.
SKILLS = ("oracle", "physical")
SKILLS_NODES = ("sim_bridge", "nav_executor", "manip_executor")
#: The nodes that take the ``articulation`` parameter (docs/robots.md, "Physical skills through the ROS graph").
ARTICULATION_NODES = ("sim_bridge", "manip_executor", "planner_node")
RESTART_DELAY_S = 0.5


class GraphFailed(RuntimeError):
    """A required node failed: raised in the exit handler, so ``ros2 launch`` shuts down and exits 1."""


def restart_decision(spec: dict, code: int, restarts: int) -> str:
    """``restart``, ``give_up`` (the policy wanted a restart, none are left) or ``stop``: the rule of
    homiebot.ros.supervisor.Supervisor.poll, repeated here because the launch file runs without homiebot."""
    policy = spec.get("restart", "on-failure")
    wanted = policy == "always" or (policy == "on-failure" and code != 0)
    if not wanted:
        return "stop"
    return "restart" if restarts < int(spec.get("max_restarts", 3)) else "give_up"


def _installed(package: str) -> bool:
    try:
        get_package_prefix(package)
    except PackageNotFoundError:
        return False
    return True


def _real_robot(value: str) -> str:
    """The resolved path of a real robot's profile, or "" for the simulator's robot (the default graph)."""
    if value.lower() in UNSET or value == "sim":
        return ""
    from homiebot.config.robot import load_profile, profile_path  # the profile's rules are the core's

    if load_profile(value).simulated:  # a bad profile raises here, before any process starts
        return ""
    return str(profile_path(value).resolve())


def _policy_nodes(value: str, skills: str | None):
    """The policy nodes of ``skill_models:=`` (homiebot.ros.policy_nodes.PolicyNodes), None when not given; a bad
    value is one line (RuntimeError), before any process starts."""
    if value.lower() in UNSET:
        return None
    try:  # the rules of homie up sim --skill-model, from the same code
        from homiebot.ros.policy_nodes import PolicyNodes
    except ImportError as err:
        raise RuntimeError(f"skill_models:= needs homiebot importable by launch's python ({err}); source "
                           f"scripts/ros_env.sh in the repository first") from None
    try:
        return PolicyNodes.from_launch_argument(value, skills)
    except ValueError as err:
        raise RuntimeError(str(err)) from None


def _robot_graph(specs: list[dict], params_file: str, profile: str, exit_when_done: bool) -> list:
    """config/graph_robot.yaml's nodes; its required node's exit ends the launch (non-zero exit: a failure)."""

    def on_exit(event, exit_context):
        if exit_context.is_shutdown:
            return None
        if event.returncode != 0:
            raise GraphFailed(f"the robot graph's node failed (exit code {event.returncode}); the graph is shut down")
        return [EmitEvent(event=Shutdown(reason="every interface of the robot profile was found"))]

    nodes = [Node(package=spec["package"], executable=spec["executable"], name=spec["name"],
                  parameters=[params_file, spec.get("parameters", {}),
                              {"robot": profile, "exit_when_done": exit_when_done}],
                  output="screen", emulate_tty=True) for spec in specs]
    return [RegisterEventHandler(OnProcessExit(on_exit=on_exit)), *nodes]


def _graph(context, *_args, **_kwargs):
    share = get_package_share_directory("homie")
    params_file = os.path.join(share, "config", "homie.yaml")

    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context).strip()

    pair = arg("partner_planner").lower() not in UNSET
    robot = _real_robot(arg("robot"))
    graph_file = "graph_robot.yaml" if robot else "graph_pair.yaml" if pair else "graph.yaml"
    with open(os.path.join(share, "config", graph_file)) as handle:
        specs = yaml.safe_load(handle)["nodes"]

    missing = [spec["package"] for spec in specs if not _installed(spec["package"])]
    if missing:  # before any process starts: nothing to leave behind
        raise RuntimeError(f"package(s) not found: {', '.join(sorted(set(missing)))}; build the workspace first")
    use_sim_time = arg("use_sim_time").lower() in ("true", "1", "yes")
    if robot:  # a real robot: only its graph's nodes, told which profile to wait for
        if arg("skill_models").lower() not in UNSET:  # said, not dropped: that graph has no policy nodes
            raise RuntimeError(f"skill_models:= needs the simulator's graph (robot:=sim); robot:={arg('robot')} starts "
                               f"config/graph_robot.yaml, which has no policy nodes")
        return _robot_graph(specs, params_file, robot, arg("exit_when_done").lower() in ("true", "1", "yes"))
    skills = arg("skills").lower()
    if skills not in UNSET and skills not in SKILLS:  # before any process starts
        raise RuntimeError(f"skills:={arg('skills')}: use {' or '.join(SKILLS)}")
    policies = _policy_nodes(arg("skill_models"), skills if skills not in UNSET else None)
    if policies is not None:  # one node per slot, after the manipulation executor, as homie up puts them
        at = policies.position([spec["name"] for spec in specs])
        specs[at:at] = [spec.model_dump() for spec in policies.node_specs()]
    overrides = {
        "sim_bridge": {"simulator": arg("simulator")},
        "planner_node": {
            "planner": arg("planner"),
            # The graph's simulator, as the record's run configuration names it (the noise and skills below too).
            "simulator": arg("simulator"),
            "seed": int(arg("seed")),
            # The planner starts an episode once every other node reports ready (docs/ros.md, "Readiness").
            "await_nodes": ",".join(spec["name"] for spec in specs if spec["name"] != "planner_node"),
        },
    }
    if arg("exit_when_done").lower() in ("true", "1", "yes"):
        # The planner node is required: its exit after the episode shuts the graph down (on_exit below).
        overrides["planner_node"]["exit_when_done"] = True
    for name, node, key in (("task", "planner_node", "task"), ("scene", "planner_node", "scene"),
                            ("noise", "sim_bridge", "noise"), ("noise", "planner_node", "noise")):
        if arg(name).lower() not in UNSET:
            overrides[node][key] = arg(name)
    if pair:
        overrides["planner_node"].update(partner_planner=arg("partner_planner"), mode=arg("mode"))
    if skills not in UNSET:
        for node in (*SKILLS_NODES, "planner_node"):  # the planner node names it in the record's configuration
            overrides.setdefault(node, {})["skills"] = skills
    if policies is not None:  # the skill cameras' size, the executors' learned_skills, the record's skills.models
        for node, given in policies.overrides().items():
            overrides.setdefault(node, {}).update(given)
    articulation = arg("articulation").lower()
    if articulation not in UNSET:  # checked as homie up sim --articulation checks it (homiebot.cli.options)
        if articulation not in SKILLS:
            raise RuntimeError(f"articulation:={arg('articulation')}: use {' or '.join(SKILLS)}")
        if skills != "physical":
            raise RuntimeError("articulation:= needs skills:=physical (the oracle skills' Open and Close set the joint)")
        for node in ARTICULATION_NODES:
            overrides.setdefault(node, {})["articulation"] = articulation

    def make_node(spec: dict) -> Node:
        # A graph's own parameters and remappings (graph_pair.yaml's human executors); the node's name is the
        # spec's, so its __node remap is launch's name= here.
        remaps = [tuple(rule.split(":=", 1)) for rule in spec.get("remaps", []) if not rule.startswith("__node:=")]
        return Node(
            package=spec["package"],
            executable=spec["executable"],
            name=spec["name"],
            parameters=[params_file, {"use_sim_time": use_sim_time}, spec.get("parameters", {}),
                        overrides.get(spec["name"], {})],
            remappings=remaps or None,
            output="screen",
            emulate_tty=True,
            # Nodes off the planner's path (perception) yield the CPU to it, as `homie up` starts them.
            prefix=f"nice -n {spec['nice']}" if spec.get("nice") else None,
        )

    # One exit handler for every node, restarts included (launch's own respawn restarts after any exit and
    # without a limit): the policy of homiebot.ros.supervisor.
    running: dict[int, dict] = {}
    restarts: dict[str, int] = {}

    def start(spec: dict) -> Node:
        node = make_node(spec)
        running[id(node)] = spec
        return node

    def on_exit(event, exit_context):
        spec = running.pop(id(event.action), None)
        if spec is None or exit_context.is_shutdown:
            return None
        decision = restart_decision(spec, event.returncode, restarts.get(spec["name"], 0))
        name, code = spec["name"], event.returncode
        if decision == "restart":
            restarts[name] = restarts.get(name, 0) + 1
            return [LogInfo(msg=f"{name} exited with code {code}; restart {restarts[name]}/{spec.get('max_restarts', 3)}"),
                    TimerAction(period=RESTART_DELAY_S, actions=[start(spec)])]
        if spec.get("required", False):  # stopped for good: the graph cannot go on without it
            if code != 0:
                raise GraphFailed(f"required node {name} failed (exit code {code}); the graph is shut down")
            return [EmitEvent(event=Shutdown(reason=f"{name} finished"))]
        return [LogInfo(msg=f"{name} exited with code {code}; " + ("gave up restarting it" if decision == "give_up" else "not restarted"))]

    actions = [RegisterEventHandler(OnProcessExit(on_exit=on_exit))]
    actions += [start(spec) for spec in specs]
    if arg("rviz").lower() in ("true", "1", "yes"):
        if _installed("rviz2"):
            actions.append(Node(
                package="rviz2",
                executable="rviz2",
                name="rviz2",
                arguments=["-d", os.path.join(share, "rviz", "homie.rviz")],
                # The graph stamps /tf, images and joints with the simulated time and publishes it on /clock.
                parameters=[{"use_sim_time": True}],
                output="log",
            ))
        else:
            actions.append(LogInfo(msg="rviz2 is not installed: the graph starts without it (rviz:=false to say so)"))
    return actions


def generate_launch_description() -> LaunchDescription:
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text) in ARGUMENTS.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=_graph)])
