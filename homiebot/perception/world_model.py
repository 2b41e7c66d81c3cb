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

import numpy as np
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
from homiebot.perception.object_fit import ObjectCatalog, ObjectModel, fit_object
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
        self.observed_at: float | None = None  # the simulated time of the latest fused observation
        # The robot's object model library: each class's shape and size, as a robot knows the objects it handles
        # (a size table, no poses). The scene declares the models of the objects it holds; keyed by the class the
        # detector names, so perception completes what it sees by what it thinks it sees.
        self.catalog = ObjectCatalog(ObjectModel(o.category, o.shape, o.size, o.wall_thickness) for o in spec.objects)

    @property
    def graph(self) -> WorldGraph:
        return self._builder.graph

    @property
    def describes_world(self) -> bool:
        """Whether planner requests carry :meth:`describe` (the loop's perception hook declares it)."""
        return self.config.describe_world

    @property
    def looks_again(self) -> bool:
        """Whether skills that plan from the graph should look again before they read it (the episode loop's
        ``_perceived_world``, through :meth:`look`): the image-built graph places objects from the latest view of
        them."""
        return self._privileged is None

    def look(self, observation: Observation) -> list[str]:
        """A skill's look (:attr:`looks_again`): fuse the objects of one observation, not its furniture. The
        furniture the planner is told of stays as the episode's views built it (views from a skill's every
        intermediate pose, fused as furniture, renamed a kitchen counter a desk in emmoe-011 by the label vote), and
        the skills plan furniture from the map anyway. Nothing for the privileged graph."""
        if not isinstance(self._builder, ConceptGraphBuilder):
            return []
        self.observed_at = observation.sim_time
        return self._builder.update(observation, objects_only=True)

    def observe(self, observation: Observation, state: WorldState) -> list[str]:
        """Fuse one observation (four views). ``state`` is read only by the privileged builder."""
        self.observed_at = observation.sim_time
        if self._privileged is not None:
            return self._privileged.update(observation, state)
        assert isinstance(self._builder, ConceptGraphBuilder)
        if state.held is None:
            # The hand is empty (the robot's own joints tell) while the graph says it holds something: a Put dropped
            # it (E2). Where it fell, this observation may tell (ConceptGraphBuilder.let_go).
            for node in self.graph.held_by(ROBOT_ID):
                self._builder.let_go(node.id)
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
                      state: WorldState | None = None,
                      released_at: tuple[float, float, float] | None = None) -> list[str]:
        """Deterministic update after a *successful* action with simulator instance names (module docstring);
        ``released_at``: where a Put's hand let go of the object (its centre, map frame), when the skill knows; the
        image-built graph places it there instead of on the middle of the place (:func:`apply_action`)."""
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
        return self._builder.apply_action(act, node.id, where.id if where is not None else None,
                                          released_at=released_at if act is Action.PUT else None)

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
        unplaced = self._builder.unplaced if isinstance(self._builder, ConceptGraphBuilder) else frozenset()
        for node in self.graph.nodes():
            if node.kind is NodeKind.AGENT or node.id in unplaced:
                continue  # an object the hand let go of is not known to be anywhere until a view shows it
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

        * An object is completed from its latest view with its class's model (:meth:`_seen_object`): a box with
          the model's size and a heading from its seen footprint, a round object (a can, a fruit) with the model's
          size, both placed with their unseen part away from the camera. An object no view has shown is not
          there, unless the robot holds it (the hand knows what it holds).
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
        """An object as perception places it. The views see the near side and the top of an object, so the node's
        box is the visible surface (emmoe-084's short can: 6.8 of its 8.5 cm wide, 2.2 of its 3.5 cm high) and its
        centre lies towards the camera; a grasp planned on it opened the fingers too little and hit a box, or closed
        them in front of a fruit. So the object is completed with its class's model (:attr:`catalog`, by the node's
        label) from the points of the latest view that showed it (:mod:`homiebot.perception.object_fit`): a box
        gets the model's size and the heading of its seen footprint, a round object the model's size; both are
        placed with their unseen part away from the camera and their top at the seen top.

        Without those points (the privileged graph, a node an action placed) a round object is completed about the
        node's centre, as it looks alike from every side; a box keeps the seen box without a heading. Nothing of
        ``entity`` but its identity and properties (name, category, states) is read: no pose, no size."""
        seen = replace(entity, position=node.position, bbox_min=node.bbox_min, bbox_max=node.bbox_max,
                       half_extents=None, yaw=None)
        extent = tuple(b - a for a, b in zip(node.bbox_min, node.bbox_max, strict=True))
        points = self._builder.seen_points(node.id) if isinstance(self._builder, ConceptGraphBuilder) else None
        if points is not None:
            extent = tuple(float(v) for v in np.ptp(points.points, axis=0))
        model = self.catalog.model_for(node.category, extent)  # type: ignore[arg-type]
        if model is None:
            return seen
        seen = replace(seen, wall_thickness=model.wall_thickness)
        fit = fit_object(points, model) if points is not None else None
        if fit is not None:
            return replace(seen, position=fit.centre, bbox_min=fit.bbox_min, bbox_max=fit.bbox_max,
                           half_extents=fit.half_extents, yaw=fit.yaw)
        if not model.round:
            return seen
        radius = model.size[0] / 2
        height = model.height
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
