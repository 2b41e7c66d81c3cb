"""The world graph: PARTNR's hierarchical scene graph (PARTNR paper, appendix A.7).

Levels: an abstract ``house`` root, ``room`` nodes, ``furniture`` nodes, and ``object`` / ``agent`` nodes.
Each node carries a category, a planner-facing instance name, aliases, a 3D position and axis-aligned box, and
states (``is_open``, ``held``, ``powered_on``). Edges are typed:

* ``part_of``  room -> house
* ``in_room``  furniture / object / agent -> room
* ``on``, ``in``  object -> furniture (the object's placement)
* ``held_by``  object -> agent

The store underneath is a :class:`networkx.MultiDiGraph` keyed by relation, so queries such as "everything in
the kitchen" are graph queries. An entity has at most one placement edge (``on`` / ``in`` / ``held_by``) and at
most one ``in_room`` edge; :meth:`WorldGraph.set_placement` and :meth:`WorldGraph.set_room` keep that
invariant, which is what makes the deterministic action updates of PARTNR (A.7.1) a single call.

``WorldGraphExport`` is the plain-data form (versioned by :data:`SCHEMA_VERSION`) used for JSON files and for
the ROS 2 ``homie_msgs/WorldGraph`` conversion; :meth:`WorldGraph.describe` renders the text world description
PARTNR feeds its planners, and :meth:`WorldGraph.observed_targets` the short list of names a constrained
decoder may emit (``PlanRequest.grounded_targets``).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import networkx as nx
from pydantic import TypeAdapter, ValidationError

from homiebot.files import atomic_write_text
from homiebot.types import EntityKind, EntityState, Pose2D, WorldState

#: Version of the plain-data schema (``WorldGraphExport``). Bump on any incompatible change; readers refuse
#: newer versions with a clear error instead of guessing.
SCHEMA_VERSION = 1

HOUSE_ID = "house"
ROBOT_ID = "robot"

Vec3 = tuple[float, float, float]
StateValue = bool | float | str


class NodeKind(str, enum.Enum):
    HOUSE = "house"
    ROOM = "room"
    FURNITURE = "furniture"
    OBJECT = "object"
    AGENT = "agent"


class Relation(str, enum.Enum):
    PART_OF = "part_of"
    IN_ROOM = "in_room"
    ON = "on"
    IN = "in"
    HELD_BY = "held_by"


#: Relations that place an entity (at most one per entity).
PLACEMENT_RELATIONS = frozenset({Relation.ON, Relation.IN, Relation.HELD_BY})

#: The level of each kind in PARTNR's hierarchy (house 0, rooms 1, furniture 2, objects and agents 3).
LEVEL = {NodeKind.HOUSE: 0, NodeKind.ROOM: 1, NodeKind.FURNITURE: 2, NodeKind.OBJECT: 3, NodeKind.AGENT: 3}


class GraphSchemaError(ValueError):
    """A world-graph document could not be read (wrong version, missing or malformed field)."""


@dataclass
class GraphNode:
    """One entity of the world graph.

    ``id`` is the stable key; ``name`` is what a planner sees and writes (the simulator's instance name for the
    privileged builder, a generated ``<category>_<n>`` for the image-based one, which may be renamed when its
    label changes while its id stays). ``affordances`` are static capabilities (``openable``, ``container``,
    ``surface``) that the deterministic action updates need; ``states`` are what actions change.
    """

    id: str
    kind: NodeKind
    category: str
    name: str
    aliases: tuple[str, ...] = ()
    position: Vec3 = (0.0, 0.0, 0.0)
    bbox_min: Vec3 = (0.0, 0.0, 0.0)
    bbox_max: Vec3 = (0.0, 0.0, 0.0)
    states: dict[str, StateValue] = field(default_factory=dict)
    affordances: tuple[str, ...] = ()
    detections: int = 0  # how many observations were fused into this node (0: known a priori or by action)
    confidence: float = 1.0  # label confidence (1.0 for privileged nodes)


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    relation: Relation


@dataclass
class ExportNode:
    """Plain-data node (the fields of ``homie_msgs/WorldGraph``'s node entries)."""

    id: str
    kind: str
    category: str
    name: str
    aliases: list[str]
    position: Vec3
    bbox_min: Vec3
    bbox_max: Vec3
    states: dict[str, StateValue]
    affordances: list[str] = field(default_factory=list)
    detections: int = 0
    confidence: float = 1.0


@dataclass
class ExportEdge:
    source: str
    target: str
    relation: str


@dataclass
class WorldGraphExport:
    """The versioned plain-data form of a :class:`WorldGraph` (JSON files, ROS message conversion)."""

    schema_version: int
    scene: str
    nodes: list[ExportNode]
    edges: list[ExportEdge]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> WorldGraphExport:
        """Validate a decoded JSON document; a wrong version or a malformed field raises :class:`GraphSchemaError`."""
        if not isinstance(data, dict):
            raise GraphSchemaError(f"world graph: expected a JSON object, got {type(data).__name__}")
        version = data.get("schema_version")
        if version is None:
            raise GraphSchemaError("world graph: missing 'schema_version'")
        if version != SCHEMA_VERSION:
            raise GraphSchemaError(
                f"world graph: schema_version {version!r} is not supported (this reader knows {SCHEMA_VERSION})"
            )
        try:
            return _EXPORT_ADAPTER.validate_python(data)
        except ValidationError as err:
            details = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in err.errors()
            )
            raise GraphSchemaError(f"world graph: {details}") from None


_EXPORT_ADAPTER = TypeAdapter(WorldGraphExport)


def _vec(values: Iterable[float]) -> Vec3:
    x, y, z = (float(v) for v in values)
    return (x, y, z)


class WorldGraph:
    """PARTNR's hierarchical world graph over a networkx multi-digraph (see the module docstring)."""

    def __init__(self, scene: str = ""):
        self.scene = scene
        self._g = nx.MultiDiGraph()
        self.add_node(GraphNode(HOUSE_ID, NodeKind.HOUSE, "house", HOUSE_ID))

    # ------------------------------------------------------------------ nodes
    def add_node(self, node: GraphNode) -> GraphNode:
        if node.id in self._g:
            raise ValueError(f"world graph already has a node {node.id!r}")
        self._g.add_node(node.id, data=node)
        if node.kind is NodeKind.ROOM:
            self._g.add_edge(node.id, HOUSE_ID, key=Relation.PART_OF, relation=Relation.PART_OF)
        return node

    def has(self, node_id: str) -> bool:
        return node_id in self._g

    def node(self, node_id: str) -> GraphNode:
        try:
            return self._g.nodes[node_id]["data"]
        except KeyError:
            raise KeyError(f"world graph has no node {node_id!r}") from None

    def nodes(self, kind: NodeKind | None = None) -> list[GraphNode]:
        """Nodes (of one kind), sorted by id for deterministic output."""
        found = [d["data"] for _, d in self._g.nodes(data=True)]
        if kind is not None:
            found = [n for n in found if n.kind is kind]
        return sorted(found, key=lambda n: n.id)

    def by_name(self, name: str) -> GraphNode | None:
        for _, d in self._g.nodes(data=True):
            if d["data"].name == name:
                return d["data"]
        return None

    def update_node(self, node_id: str, **changes) -> GraphNode:
        """Replace fields of a node (``position=..., states=...``); the id and kind cannot change."""
        if "id" in changes or "kind" in changes:
            raise ValueError("a node's id and kind cannot change")
        updated = replace(self.node(node_id), **changes)
        self._g.nodes[node_id]["data"] = updated
        return updated

    def set_state(self, node_id: str, key: str, value: StateValue) -> None:
        node = self.node(node_id)
        self.update_node(node_id, states={**node.states, key: value})

    def remove_node(self, node_id: str) -> None:
        if node_id == HOUSE_ID:
            raise ValueError("the house root cannot be removed")
        self.node(node_id)
        self._g.remove_node(node_id)

    def __len__(self) -> int:
        return self._g.number_of_nodes()

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._g

    # ------------------------------------------------------------------ edges
    def _out_edges(self, node_id: str, relations: Iterable[Relation]) -> list[tuple[str, Relation]]:
        wanted = set(relations)
        return [(t, k) for _, t, k in self._g.out_edges(node_id, keys=True) if k in wanted]

    def set_placement(self, node_id: str, parent_id: str | None, relation: Relation | None) -> None:
        """Make ``parent_id`` the only placement of ``node_id`` (``None`` removes it: on the floor, unknown)."""
        node = self.node(node_id)
        for target, key in self._out_edges(node_id, PLACEMENT_RELATIONS):
            self._g.remove_edge(node_id, target, key=key)
        if parent_id is None:
            return
        if relation not in PLACEMENT_RELATIONS:
            raise ValueError(f"{relation!r} is not a placement relation ({', '.join(r.value for r in PLACEMENT_RELATIONS)})")
        parent = self.node(parent_id)
        if relation is Relation.HELD_BY and parent.kind is not NodeKind.AGENT:
            raise ValueError(f"{node_id!r} can only be held by an agent, not {parent.kind.value} {parent_id!r}")
        if relation in (Relation.ON, Relation.IN) and parent.kind is not NodeKind.FURNITURE:
            raise ValueError(f"{node.id!r} can only be {relation.value} furniture, not {parent.kind.value} {parent_id!r}")
        self._g.add_edge(node_id, parent_id, key=relation, relation=relation)

    def placement(self, node_id: str) -> tuple[str, Relation] | None:
        edges = self._out_edges(node_id, PLACEMENT_RELATIONS)
        return edges[0] if edges else None

    def set_room(self, node_id: str, room_id: str | None) -> None:
        for target, key in self._out_edges(node_id, (Relation.IN_ROOM,)):
            self._g.remove_edge(node_id, target, key=key)
        if room_id is None:
            return
        if self.node(room_id).kind is not NodeKind.ROOM:
            raise ValueError(f"{room_id!r} is not a room")
        self._g.add_edge(node_id, room_id, key=Relation.IN_ROOM, relation=Relation.IN_ROOM)

    def room_of(self, node_id: str) -> str | None:
        edges = self._out_edges(node_id, (Relation.IN_ROOM,))
        return edges[0][0] if edges else None

    def children(self, node_id: str, relations: Iterable[Relation] | None = None) -> list[GraphNode]:
        """Nodes with an edge into ``node_id`` (of the given relations), sorted by id."""
        wanted = set(relations) if relations is not None else set(Relation)
        sources = {s for s, _, k in self._g.in_edges(node_id, keys=True) if k in wanted}
        return sorted((self.node(s) for s in sources), key=lambda n: n.id)

    def edges(self) -> list[GraphEdge]:
        found = [GraphEdge(s, t, k) for s, t, k in self._g.edges(keys=True)]
        return sorted(found, key=lambda e: (e.source, e.relation.value, e.target))

    def held_by(self, agent_id: str = ROBOT_ID) -> list[GraphNode]:
        return self.children(agent_id, (Relation.HELD_BY,)) if agent_id in self._g else []

    @property
    def nx_graph(self) -> nx.MultiDiGraph:
        """A read-only view of the networkx graph (for analysis and drawing)."""
        return self._g.copy(as_view=True)

    # ------------------------------------------------------------------ export / import
    def to_export(self) -> WorldGraphExport:
        nodes = [
            ExportNode(
                id=n.id,
                kind=n.kind.value,
                category=n.category,
                name=n.name,
                aliases=list(n.aliases),
                position=n.position,
                bbox_min=n.bbox_min,
                bbox_max=n.bbox_max,
                states=dict(n.states),
                affordances=list(n.affordances),
                detections=n.detections,
                confidence=n.confidence,
            )
            for n in self.nodes()
        ]
        edges = [ExportEdge(e.source, e.target, e.relation.value) for e in self.edges()]
        return WorldGraphExport(SCHEMA_VERSION, self.scene, nodes, edges)

    @classmethod
    def from_export(cls, export: WorldGraphExport) -> WorldGraph:
        graph = cls(export.scene)
        try:
            for n in export.nodes:
                kind = NodeKind(n.kind)
                node = GraphNode(
                    id=n.id,
                    kind=kind,
                    category=n.category,
                    name=n.name,
                    aliases=tuple(n.aliases),
                    position=_vec(n.position),
                    bbox_min=_vec(n.bbox_min),
                    bbox_max=_vec(n.bbox_max),
                    states=dict(n.states),
                    affordances=tuple(n.affordances),
                    detections=n.detections,
                    confidence=n.confidence,
                )
                if kind is NodeKind.HOUSE:
                    graph._g.nodes[HOUSE_ID]["data"] = replace(node, id=HOUSE_ID)
                else:
                    graph.add_node(node)
            for e in export.edges:
                relation = Relation(e.relation)
                if relation is Relation.PART_OF:
                    continue  # implied by the room nodes
                if relation is Relation.IN_ROOM:
                    graph.set_room(e.source, e.target)
                else:
                    graph.set_placement(e.source, e.target, relation)
        except (ValueError, KeyError) as err:
            raise GraphSchemaError(f"world graph: {err}") from None
        return graph

    def to_dict(self) -> dict:
        return self.to_export().to_dict()

    @classmethod
    def from_dict(cls, data: object) -> WorldGraph:
        return cls.from_export(WorldGraphExport.from_dict(data))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> WorldGraph:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise GraphSchemaError(f"world graph: not valid JSON: {err}") from None
        return cls.from_dict(data)

    def save(self, path: str | Path) -> Path:
        """Write the JSON document atomically (temporary file + ``os.replace``): no partial file on failure."""
        return atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> WorldGraph:
        path = Path(path)
        if not path.exists():
            raise GraphSchemaError(f"world graph file not found: {path}")
        try:
            return cls.from_json(path.read_text())
        except GraphSchemaError as err:
            raise GraphSchemaError(f"{path}: {err}") from None

    def copy(self) -> WorldGraph:
        return WorldGraph.from_export(self.to_export())

    # ------------------------------------------------------------------ planner views
    def describe(self, agent_id: str = ROBOT_ID) -> str:
        """The text world description (PARTNR appendix A.16): rooms with their furniture, then the observed
        objects with where they are, then what the agent holds.

        Format (decided here; PARTNR's example lists ``room: furniture, ...`` lines then ``object: furniture``
        lines)::

            Furniture:
            kitchen: fridge (closed), kitchen_counter
            living_room: coffee_table, sofa
            Objects:
            apple: in fridge
            red_can: on kitchen_counter
            banana: held by robot
            Robot: in living_room, holding banana

        Objects not yet observed are absent (partial observability); "No objects found yet" when there are none.
        """
        lines = ["Furniture:"]
        rooms = self.nodes(NodeKind.ROOM)
        for room in rooms:
            furniture = [n for n in self.children(room.id, (Relation.IN_ROOM,)) if n.kind is NodeKind.FURNITURE]
            lines.append(f"{room.name}: " + (", ".join(_with_state(f) for f in sorted(furniture, key=lambda n: n.name)) or "(none)"))
        unroomed = [n for n in self.nodes(NodeKind.FURNITURE) if self.room_of(n.id) is None]
        if unroomed:
            lines.append("unknown room: " + ", ".join(_with_state(f) for f in sorted(unroomed, key=lambda n: n.name)))
        lines.append("Objects:")
        objects = sorted(self.nodes(NodeKind.OBJECT), key=lambda n: n.name)
        if not objects:
            lines.append("No objects found yet")
        for obj in objects:
            place = self.placement(obj.id)
            if place is None:
                room_id = self.room_of(obj.id)
                where = f"on the floor in {self.node(room_id).name}" if room_id else "location unknown"
            else:
                parent, relation = place
                verb = "held by" if relation is Relation.HELD_BY else relation.value
                where = f"{verb} {self.node(parent).name}"
            lines.append(f"{obj.name}: {where}")
        if agent_id in self._g:
            agent = self.node(agent_id)
            agent_room = self.room_of(agent_id)
            held = [n.name for n in self.held_by(agent_id)]
            parts = [f"in {self.node(agent_room).name}" if agent_room else "room unknown"]
            parts.append(f"holding {', '.join(held)}" if held else "hands empty")
            lines.append(f"{agent.name.capitalize()}: {', '.join(parts)}")
        return "\n".join(lines)

    def observed_targets(self) -> tuple[str, ...]:
        """Names a planner may target (rooms, furniture, observed objects), sorted: PARTNR builds its constrained
        decoding grammar from exactly these (appendix A.9, "valid tool calls on observed entities")."""
        kinds = (NodeKind.ROOM, NodeKind.FURNITURE, NodeKind.OBJECT)
        return tuple(sorted(n.name for n in self.nodes() if n.kind in kinds))

    def as_world_state(self, robot: Pose2D | None = None, robot_radius: float = 0.3) -> WorldState:
        """The graph seen as a :class:`WorldState` keyed by node *name*, so that any :class:`Grounder` grounds
        planner strings against what perception knows rather than against the simulator's ground truth."""
        if robot is None and ROBOT_ID in self._g:
            p = self.node(ROBOT_ID).position
            robot = Pose2D(p[0], p[1], float(self.node(ROBOT_ID).states.get("yaw", 0.0)))
        robot = robot or Pose2D(0.0, 0.0, 0.0)
        kinds = {NodeKind.ROOM: EntityKind.ROOM, NodeKind.FURNITURE: EntityKind.FURNITURE, NodeKind.OBJECT: EntityKind.OBJECT}
        entities: dict[str, EntityState] = {}
        held: str | None = None
        for n in self.nodes():
            if n.kind not in kinds:
                continue
            place = self.placement(n.id)
            room = self.room_of(n.id)
            is_held = place is not None and place[1] is Relation.HELD_BY
            if is_held:
                held = n.name
            is_open = n.states.get("is_open")
            entities[n.name] = EntityState(
                name=n.name,
                category=n.category,
                kind=kinds[n.kind],
                aliases=n.aliases,
                position=n.position,
                bbox_min=n.bbox_min,
                bbox_max=n.bbox_max,
                room=self.node(room).name if room else None,
                parent=self.node(place[0]).name if place and not is_held else None,
                relation=place[1].value if place and not is_held else None,
                articulated="openable" in n.affordances,
                interactive="openable" in n.affordances,
                is_open=bool(is_open) if isinstance(is_open, bool) else None,
                held=is_held,
            )
        room_id = self.room_of(ROBOT_ID) if ROBOT_ID in self._g else None
        return WorldState(
            robot=robot,
            robot_radius=robot_radius,
            held=held,
            entities=entities,
            scene=self.scene,
            robot_room=self.node(room_id).name if room_id else None,
        )


def _with_state(node: GraphNode) -> str:
    is_open = node.states.get("is_open")
    if isinstance(is_open, bool):
        return f"{node.name} ({'open' if is_open else 'closed'})"
    return node.name
