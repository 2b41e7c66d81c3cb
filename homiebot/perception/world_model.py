"""The perception facade an episode loop (or the ROS perception node) drives: one world graph kept up to date
from the four views and from successful actions, and what the planner and the executor need from it.

Per round::

    model = WorldModel(sim.scene_spec(), sim.state(), PerceptionConfig(builder="conceptgraph"))
    model.observe(observation, sim.state())                 # after reset and after every round's render
    request.world_description = model.describe()             # PARTNR's text world description (when configured)
    request.grounded_targets = model.observed_targets()      # names for constrained decoding
    executor = Executor(sim, grounder=model.grounder())      # F2 for names perception does not know
    ...
    if report.feedback.success:
        model.record_action(subtask.action, report.target, report.place, sim.state())

``record_action`` takes the simulator's instance names (what the executor grounded to). The privileged graph uses
them as they are; the image-built graph uses the node the target was grounded through (the :class:`GraphGrounder`
remembers which node each instance it answered came from), else finds its node for the instance by category and
proximity (PARTNR A.7.2's matching heuristic), and skips the update when it has never seen the instance.

:class:`GraphGrounder` grounds a planner's string against the *graph* (so an object no camera has shown yet is
F2, as under PARTNR's partial observability) and answers with the simulator instance the node stands for.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from homiebot.perception.conceptgraph import ConceptGraphBuilder
from homiebot.perception.grounding import (
    Embedder,
    ExactTiersGrounder,
    Grounder,
    GroundingResult,
    SemanticGrounder,
)
from homiebot.perception.matching import resolve_instance
from homiebot.perception.privileged import PrivilegedGraphBuilder
from homiebot.perception.quality import make_builders
from homiebot.perception.world_graph import ROBOT_ID, GraphNode, NodeKind, Relation, WorldGraph
from homiebot.sim.scene import SceneSpec
from homiebot.types import Action, EntityKind, EntityState, Observation, WorldState

log = logging.getLogger(__name__)


class PerceptionConfig(BaseModel):
    """Perception settings of an episode (validated; a misspelt field is an error)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    builder: Literal["privileged", "conceptgraph"] = "privileged"  # homiebot.config.GRAPH_BUILDERS
    describe_world: bool = Field(True, description="fill PlanRequest.world_description with the graph's text")
    semantic_grounding: bool = Field(True, description="MiniLM tier after the exact tiers (needs the perception extra)")
    label_confusion: float = Field(0.0, ge=0.0, le=1.0, description="stand-in detector's confusion rate")
    seed: int = 0


class WorldModel:
    """A world graph builder plus the views of it the planner and the executor need (module docstring)."""

    def __init__(self, spec: SceneSpec, state: WorldState, config: PerceptionConfig | None = None,
                 embedder: Embedder | None = None):
        config = config if config is not None else PerceptionConfig()
        self.config = config
        self.spec = spec
        privileged, conceptgraph = make_builders(spec, state, label_confusion=config.label_confusion, seed=config.seed)
        # One of the two is used; the other's type tells mypy which calls each takes.
        self._privileged: PrivilegedGraphBuilder | None = privileged if config.builder == "privileged" else None
        self._builder: PrivilegedGraphBuilder | ConceptGraphBuilder = self._privileged or conceptgraph
        self._semantic: Grounder = SemanticGrounder(embedder) if config.semantic_grounding else ExactTiersGrounder()
        self._grounded: dict[str, str] = {}  # simulator instance -> node id it was last grounded through

    @property
    def graph(self) -> WorldGraph:
        return self._builder.graph

    @property
    def describes_world(self) -> bool:
        """Whether planner requests carry :meth:`describe` (the loop's perception hook declares it)."""
        return self.config.describe_world

    def observe(self, observation: Observation, state: WorldState) -> list[str]:
        """Fuse one observation (four views). ``state`` is read only by the privileged builder."""
        if self._privileged is not None:
            return self._privileged.update(observation, state)
        assert isinstance(self._builder, ConceptGraphBuilder)
        return self._builder.update(observation)

    def node_for_instance(self, instance: str, state: WorldState) -> GraphNode | None:
        """The graph node standing for a simulator instance, or None when perception has not seen it."""
        if self.graph.has(instance) and self.graph.node(instance).kind is not NodeKind.AGENT:
            return self.graph.node(instance)
        grounded = self._grounded.get(instance)
        if grounded is not None and self.graph.has(grounded):
            return self.graph.node(grounded)
        entity = state.entities.get(instance)
        if entity is None:
            return None
        if entity.held or state.held == instance:
            held = [n for n in self.graph.held_by(ROBOT_ID) if n.category == entity.category] or self.graph.held_by(ROBOT_ID)
            if held:
                return held[0]
        kind = {EntityKind.OBJECT: NodeKind.OBJECT, EntityKind.FURNITURE: NodeKind.FURNITURE,
                EntityKind.ROOM: NodeKind.ROOM}[entity.kind]
        same = [n for n in self.graph.nodes(kind) if n.category == entity.category]
        if not same:
            return None
        nearest = min(same, key=lambda n: math.dist(n.position, entity.position))
        # an unseen instance must not take over a seen one of the same category far away
        return nearest if math.dist(nearest.position, entity.position) <= 1.0 else None

    def record_action(self, action: Action | str, target: str | None, place: str | None = None,
                      state: WorldState | None = None) -> list[str]:
        """Deterministic update after a *successful* action with simulator instance names (module docstring)."""
        act = action if isinstance(action, Action) else Action.parse(action)
        if act in (None, Action.GO_TO, Action.END) or target is None:
            return []
        if self._privileged is not None:
            relation = None
            if act is Action.PUT and state is not None and target in state.entities:
                truth = state.entities[target].relation
                relation = Relation(truth) if truth in ("on", "in") else None
            if not self.graph.has(target):
                log.debug("privileged graph: %s on %s, which no view has shown yet", act.value, target)
                return []
            return self._privileged.apply_action(act, target, place, relation)
        if state is None:
            raise ValueError("the image-built graph needs the world state to find the nodes of simulator instances")
        node = self.node_for_instance(target, state)
        where = self.node_for_instance(place, state) if place is not None else None
        if node is None or (place is not None and where is None):
            log.debug("image-built graph: %s %s/%s not in the graph; no update", act.value, target, place)
            return []
        assert isinstance(self._builder, ConceptGraphBuilder)
        return self._builder.apply_action(act, node.id, where.id if where is not None else None)

    def remember_grounding(self, instance: str, node_id: str) -> None:
        """Note that ``instance`` was grounded through ``node_id`` (the node an action on it updates)."""
        self._grounded[instance] = node_id

    def describe(self) -> str:
        return self.graph.describe()

    def world_graph_json(self) -> str:
        """The graph's JSON export on one line (the episode record's ``world_graphs.jsonl``)."""
        return self.graph.to_json(indent=None)

    def observed_targets(self) -> tuple[str, ...]:
        return self.graph.observed_targets()

    def grounder(self) -> GraphGrounder:
        return GraphGrounder(self, self._semantic)

    def instance_of(self, node: GraphNode, state: WorldState) -> str | None:
        """The simulator instance a node stands for (what grounding through the node answers)."""
        placement = self.graph.placement(node.id)
        if placement is not None and placement[1] is Relation.HELD_BY and state.held is not None:
            return state.held  # the node in the hand is what the simulator says the hand holds
        if self.config.builder == "privileged":
            entity = state.entities.get(node.name)
            if entity is not None and entity.category == node.category:
                return node.name  # the privileged graph keeps the simulator's names
        # An image-built graph numbers its own nodes: its "apple_1" is not the simulator's apple_1.
        return resolve_instance(node, state)

    def perceived_names(self, state: WorldState) -> dict[str, str]:
        """Simulator instance -> the graph name that grounds to it, for every instance the graph holds.

        For a privileged planner (the expert) that decides in simulator instances but must speak perception's
        language: an image-built graph numbers its nodes in the order it found them, so its ``apple_1`` may be
        the simulator's ``apple_2``. Built as the inverse of grounding (:meth:`instance_of`), so saying the name
        grounds back to the same instance. Where two nodes stand for one instance (a duplicate detection) the
        node nearest the instance wins; an instance absent from the result is one perception has not seen.
        """
        names: dict[str, str] = {}
        best: dict[str, float] = {}
        for node in self.graph.nodes():
            if node.kind is NodeKind.AGENT:
                continue
            instance = self.instance_of(node, state)
            entity = state.entities.get(instance) if instance is not None else None
            if instance is None or entity is None:
                continue
            distance = math.dist(node.position, entity.position)
            if distance < best.get(instance, math.inf):
                names[instance], best[instance] = node.name, distance
        return names


    def perceived_state(self, state: WorldState) -> WorldState:
        """``state`` as the robot knows it through perception: what a skill that plans from the world graph reads.

        * An object is where its node is: the node's centre and box (from the views' depth; a visible surface
          only, so a box is usually shallower than the object), with no heading or own box (the graph has none).
          A round object (a can, a fruit) is completed with its model's size (:meth:`_seen_object`). An object
          no view has shown is not there, unless the robot holds it (the hand knows what it holds).
        * Furniture is the map's: its box and interior, as a real robot navigates and plans around furniture in a
          semantic map built beforehand, and perceives the objects that move (docs/perception.md, "What the skills
          read"). The views' furniture boxes are their visible faces only: planned from them, the expert's physical
          episodes through perception fell from SR 77 to 30 with them (a fridge's front face as its box: "no arm
          configuration reaches in fridge").
        * The robot's pose, what it holds, rooms and articulation states are the state's (odometry and the
          robot's own joints).
        """
        names = self.perceived_names(state)
        nodes = {node.name: node for node in self.graph.nodes()}  # one table, not a scan of the graph per entity
        entities = {}
        for name, entity in state.entities.items():
            node_name = names.get(name)
            node = nodes.get(node_name) if node_name is not None else None
            if entity.kind is EntityKind.OBJECT:
                if node is None:
                    if entity.held or state.held == name:
                        entities[name] = entity
                    continue
                entities[name] = self._seen_object(entity, node, state)
            else:
                entities[name] = entity
        return replace(state, entities=entities)


    def _seen_object(self, entity: EntityState, node: GraphNode, state: WorldState) -> EntityState:
        """An object as perception places it: the node's centre, and its box. The views see the near side and the
        top of an object, so the box is the visible surface (emmoe-084's short can: 6.8 of its 8.5 cm wide, 2.2
        of its 3.5 cm high), and a grasp planned on it opened the fingers too little and closed them beside the
        can. A round object (a cylinder or a sphere in the scene's object models: a can, a fruit) looks alike
        from every side and has no heading to estimate, so its model's size completes it, as a pose estimator
        does with a known object: the node's centre across, its top at the seen top. Anything else keeps the seen
        box, without a heading."""
        seen = replace(entity, position=node.position, bbox_min=node.bbox_min, bbox_max=node.bbox_max,
                       half_extents=None, yaw=None)
        try:
            model = self.spec.object_by_name(entity.name)
        except KeyError:
            return seen
        if model.shape not in ("cylinder", "sphere"):
            return seen
        radius = model.size[0] / 2
        height = model.size[0] if model.shape == "sphere" else model.size[2]
        x, y, _ = node.position
        centre = (x, y, node.bbox_max[2] - height / 2)
        low = (x - radius, y - radius, centre[2] - height / 2)
        high = (x + radius, y + radius, centre[2] + height / 2)
        return replace(seen, position=centre, bbox_min=low, bbox_max=high, half_extents=(radius, radius, height / 2))


class GraphGrounder:
    """Grounds against the perceived graph; answers with the simulator instance the chosen node stands for."""

    def __init__(self, model: WorldModel, inner: Grounder):
        self.model = model
        self.inner = inner

    def ground(self, target: str, state: WorldState) -> GroundingResult:
        graph = self.model.graph
        result = self.inner.ground(target, graph.as_world_state(state.robot, state.robot_radius))
        if result.instance is None:
            return result
        node = graph.by_name(result.instance)
        instance = self.model.instance_of(node, state) if node is not None else None
        if node is None or instance is None:
            return GroundingResult(None, result.score, "none", result.candidates)
        self.model.remember_grounding(instance, node.id)  # what record_action updates if the action succeeds
        candidates = tuple(
            c for c in (self.model.instance_of(n, state) for n in map(graph.by_name, result.candidates) if n) if c
        )
        return GroundingResult(instance, result.score, result.method, candidates)
