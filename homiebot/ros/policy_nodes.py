"""The policy nodes of a graph with learned skill models (docs/skills.md, "The policy as its own ROS 2 node"): one
``skill_policy_<slot>`` node (executor_nodes/policy_node.py) per slot, the sim bridge rendering the policies' cameras
at their size, the executors forwarding the slots' Picks and Go tos to them, and the planner node naming the folders
in the record. ``homie up sim --skill-model MODEL=DIR`` (homiebot/cli/ros.py) and ``ros2 launch homie sim.launch.py
skill_models:=MODEL=DIR,...`` (launch/launch/sim.launch.py) both build the graph from :class:`PolicyNodes`, after the
same checks (:func:`homiebot.config.run.parse_skill_models`, then every folder as ``homie run`` checks it), so the two
start the same nodes with the same parameters. Needs no rclpy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from homiebot.config.run import CLI_SKILL_MODELS, LAUNCH_SKILL_MODELS, SkillModelSyntax, parse_skill_models
from homiebot.ros.supervisor import GraphSpec, NodeSpec

#: The policy node's package, executable (``ros2 run``, launch) and module (``python -m``, ``homie up``).
PACKAGE = "executor_nodes"
EXECUTABLE = "skill_policy"
MODULE = "executor_nodes.policy_node"


def policy_slug(slot: str) -> str:
    """A slot as a ROS name's part: lower case, ``-`` as ``_`` (``RT-1-X`` -> ``rt_1_x``)."""
    return slot.lower().replace("-", "_")


def navigation_slot(slot: str) -> bool:
    """Whether ``slot`` (EMMOE's spelling) is a navigation model's: its policy serves Go to."""
    from homiebot.skills.skillset import NAVIGATION_MODELS

    return slot in NAVIGATION_MODELS


def policy_action(slot: str) -> str:
    """The action a slot's policy node serves (executor_nodes/policy_node.py's default): Navigate for a navigation slot
    (a Go to policy), else Manipulate."""
    return f"/skill_policy/{policy_slug(slot)}/{'navigate' if navigation_slot(slot) else 'manipulate'}"


def policy_image_size(models: dict[str, str], syntax: SkillModelSyntax = CLI_SKILL_MODELS) -> int:
    """The side of the images the policies take (one size: the bridge renders the skill cameras once), each folder
    checked as ``homie run`` checks it, and an arm policy refused if it takes an image the bridge does not publish
    (the target marked); 0 without any. ValueError with one line, naming ``syntax``'s option."""
    from homiebot.skills.learned_skill import check_graph_serves, check_skill_model

    sizes = {slot: next(iter(check_skill_model(slot, folder, syntax.option).images.values()))[1]
             for slot, folder in models.items()}
    for slot, folder in models.items():
        if not navigation_slot(slot):  # no image with the target marked: the bridge publishes plain cameras
            check_graph_serves(slot, folder, syntax.option)
    if len(set(sizes.values())) > 1:
        raise ValueError(f"{syntax.option}: the policies take images of different sizes ({sizes}); the graph's skill "
                         f"cameras render one size")
    return next(iter(sizes.values()), 0)


@dataclass(frozen=True)
class PolicyNodes:
    """The learned skill models of a graph (slot -> absolute folder, checked) and the policies' image side."""

    models: dict[str, str]
    image_size: int

    @classmethod
    def checked(cls, entries: list[str], skills: str | None,
                syntax: SkillModelSyntax = CLI_SKILL_MODELS) -> PolicyNodes:
        """``MODEL=DIR`` entries parsed and their folders checked (ValueError, one line): what ``homie up`` refuses
        before anything starts. ``skills``: the graph's skill setting (the models need ``physical``)."""
        models = parse_skill_models(entries, skills, syntax)
        return cls(models, policy_image_size(models, syntax))

    @classmethod
    def from_launch_argument(cls, value: str, skills: str | None) -> PolicyNodes:
        """``skill_models:=NoMaD=DIR,RT-1-X=DIR`` (the launch file's argument: comma-separated entries, so a folder
        cannot have a comma in its name) checked as ``--skill-model`` is."""
        return cls.checked(value.split(","), skills, LAUNCH_SKILL_MODELS)

    def node_name(self, slot: str) -> str:
        return f"skill_policy_{policy_slug(slot)}"

    def node_specs(self) -> list[NodeSpec]:
        """One node per slot, with the parameters it is given in the graph (its own, besides the parameter file's)."""
        return [NodeSpec(name=self.node_name(slot), package=PACKAGE, executable=EXECUTABLE, module=MODULE,
                         remaps=[f"__node:={self.node_name(slot)}"],
                         parameters={"model": slot, "policy": folder, "action": policy_action(slot)})
                for slot, folder in self.models.items()]

    @staticmethod
    def position(names: list[str]) -> int:
        """Where the policy nodes go among a graph's nodes (``names``, in order): after the manipulation executor,
        else before the last node."""
        return names.index("manip_executor") + 1 if "manip_executor" in names else len(names) - 1

    def with_nodes(self, graph: GraphSpec) -> GraphSpec:
        """``graph`` with the policy nodes at :meth:`position`."""
        if not self.models:
            return graph
        at = self.position([node.name for node in graph.nodes])
        return GraphSpec(nodes=[*graph.nodes[:at], *self.node_specs(), *graph.nodes[at:]])

    def overrides(self) -> dict[str, dict[str, Any]]:
        """The other nodes' parameters for the policies: the record's ``skills.models`` (planner node), the skill
        cameras' size (sim bridge), and each executor's ``learned_skills`` (slot=action of the slots it forwards)."""
        if not self.models:
            return {}
        given: dict[str, dict[str, Any]] = {"planner_node": {"skill_models": json.dumps(self.models)},
                                            "sim_bridge": {"skill_camera_size": self.image_size}}
        for executor, navigation in (("manip_executor", False), ("nav_executor", True)):
            slots = [slot for slot in self.models if navigation_slot(slot) == navigation]
            if slots:
                given[executor] = {"learned_skills": ",".join(f"{slot}={policy_action(slot)}" for slot in slots)}
        return given


__all__ = ["PolicyNodes", "navigation_slot", "policy_action", "policy_image_size", "policy_slug"]
