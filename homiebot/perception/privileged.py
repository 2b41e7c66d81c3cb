"""Privileged world graph under partial observability (PARTNR A.7.1).

* **Start**: the house, its rooms and all furniture (with room assignment, affordances and open/closed state) come
  from the scene layout, exactly as PARTNR's planners start with the room and furniture tiers. The robot is an
  agent node.
* **Observation**: an object enters the graph only when a view's instance segmentation shows at least
  :attr:`PrivilegedConfig.min_pixels` pixels of it. Its identity, category, aliases and the furniture or agent that
  houses it come from the simulator (the privileged panoptic sensor); its position and box come from depth: the
  mask is back-projected with the view's intrinsics and pose, the position is the centroid of those points (the
  visible surface, so it sits a few centimetres towards the camera from the true centre), the box is their extent.
  Furniture seen with enough pixels gets its open/closed state refreshed the same way.
* **Actions**: after a successful pick, put, open or close the graph is updated from the action's arguments
  (:func:`homiebot.perception.actions.apply_action`), because the next images may not show the result.

Why 12 pixels: at 256x256 with a 90 degree field of view (focal length 128 px) a 6 cm fruit covers about
3.8 x 3.8 pixels at 2 m, the distance from which the oracle skills act; smaller masks are slivers at an image border
or behind an occluder, with fewer than three depth samples at stride 2. With 30 pixels, the first choice, small
fruit on a sofa or a chair seen from their stop (15-21 pixels) never entered the graph.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from homiebot.perception.actions import apply_action
from homiebot.perception.geometry import backproject
from homiebot.perception.layout import SceneLayout
from homiebot.perception.world_graph import ROBOT_ID, GraphNode, NodeKind, Relation, StateValue, WorldGraph
from homiebot.types import Action, EntityKind, Observation, WorldState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrivilegedConfig:
    min_pixels: int = 12  # see the module docstring
    stride: int = 2  # depth sub-sampling for back-projection (positions are means: 1/4 of the pixels suffice)
    max_depth: float = 8.0


def polygon_box(polygon: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    xs = [p[0] for p in polygon]
    ys = [p[1] for p in polygon]
    return (min(xs), min(ys), 0.0), (max(xs), max(ys), 2.5)


def layout_graph(layout: SceneLayout, *, with_furniture: bool = True) -> WorldGraph:
    """House, rooms (and furniture) of a scene layout, plus the robot agent node."""
    graph = WorldGraph(layout.scene)
    for room in layout.rooms:
        lo, hi = polygon_box(room.polygon)
        centroid = np.asarray(room.polygon, dtype=float).mean(axis=0)
        graph.add_node(
            GraphNode(
                room.name, NodeKind.ROOM, room.category, room.name, room.aliases,
                (float(centroid[0]), float(centroid[1]), 0.0), lo, hi, {"level": room.level},
            )
        )
    if with_furniture:
        for f in layout.furniture:
            states: dict[str, StateValue] = {"is_open": f.is_open} if f.is_open is not None else {}
            graph.add_node(
                GraphNode(f.name, NodeKind.FURNITURE, f.category, f.name, f.aliases, f.position, f.bbox_min, f.bbox_max,
                          states, f.affordances)
            )
            if f.room is not None and graph.has(f.room):
                graph.set_room(f.name, f.room)
    graph.add_node(GraphNode(ROBOT_ID, NodeKind.AGENT, "robot", ROBOT_ID))
    return graph


def group_points_by_segment(points: np.ndarray, segment_ids: np.ndarray) -> dict[int, np.ndarray]:
    """Split back-projected points by segment id with one sort (no per-segment boolean masks over the image)."""
    if len(segment_ids) == 0:
        return {}
    order = np.argsort(segment_ids, kind="stable")
    sorted_ids = segment_ids[order]
    ids, starts = np.unique(sorted_ids, return_index=True)
    chunks = np.split(points[order], starts[1:])
    return {int(i): c for i, c in zip(ids, chunks, strict=False)}


class PrivilegedGraphBuilder:
    """PARTNR's privileged, partially observed world graph (see the module docstring)."""

    def __init__(self, layout: SceneLayout, config: PrivilegedConfig = PrivilegedConfig()):
        self.layout = layout
        self.config = config
        self.graph = layout_graph(layout)
        self._plan = layout.floor_plan()

    def update(self, observation: Observation, state: WorldState) -> list[str]:
        """Fuse one observation (four views); returns the ids of object nodes added or moved."""
        cfg = self.config
        robot = observation.robot_pose
        robot_room = state.robot_room or self._plan.room_at(robot.x, robot.y)
        self.graph.update_node(ROBOT_ID, position=(robot.x, robot.y, 0.0), states={"yaw": robot.yaw})
        self.graph.set_room(ROBOT_ID, robot_room if robot_room and self.graph.has(robot_room) else None)

        seen: dict[str, list[np.ndarray]] = {}
        for view in observation.views.values():
            counts = np.bincount(view.segmentation.ravel().clip(min=0))
            visible = [int(i) for i in np.flatnonzero(counts >= cfg.min_pixels) if i != 0]
            names = {i: observation.instance_names.get(i) for i in visible}
            wanted = {i for i, n in names.items() if n is not None and n in state.entities}
            if not wanted:
                continue
            points, seg, _ = backproject(view, cfg.stride, max_depth=cfg.max_depth)
            keep = np.isin(seg, list(wanted))
            for seg_id, pts in group_points_by_segment(points[keep], seg[keep]).items():
                name = names[seg_id]
                if name is not None:  # only named instances were kept (``wanted``)
                    seen.setdefault(name, []).append(pts)

        changed: list[str] = []
        for name, chunks in seen.items():
            entity = state.entities[name]
            pts = np.concatenate(chunks)
            if entity.kind is EntityKind.FURNITURE:
                if entity.is_open is not None and self.graph.has(name):
                    self.graph.set_state(name, "is_open", entity.is_open)
                continue
            if entity.kind is not EntityKind.OBJECT or len(pts) == 0:
                continue
            position = tuple(float(v) for v in pts.mean(axis=0))
            lo = tuple(float(v) for v in pts.min(axis=0))
            hi = tuple(float(v) for v in pts.max(axis=0))
            if self.graph.has(name):
                node = self.graph.node(name)
                self.graph.update_node(name, position=position, bbox_min=lo, bbox_max=hi, detections=node.detections + 1)
            else:
                self.graph.add_node(
                    GraphNode(name, NodeKind.OBJECT, entity.category, name, entity.aliases, position, lo, hi,  # type: ignore[arg-type]
                              {"held": entity.held}, detections=1)
                )
                log.debug("privileged graph: new object %s at %s", name, position)
            self._place_from_state(name, state)
            changed.append(name)

        # The held object is known from proprioception even when no camera shows it.
        held = observation.held_object
        if held is not None and self.graph.has(held):
            if held not in changed:
                self.graph.update_node(held, position=(robot.x, robot.y, 0.0))  # travels with the robot
            self.graph.set_placement(held, ROBOT_ID, Relation.HELD_BY)
            self.graph.set_state(held, "held", True)
            self.graph.set_room(held, self.graph.room_of(ROBOT_ID))
        return changed

    def _place_from_state(self, name: str, state: WorldState) -> None:
        """The housing furniture or agent of an observed object, read from the simulator (PARTNR A.7.1)."""
        entity = state.entities[name]
        if entity.held or state.held == name:
            self.graph.set_placement(name, ROBOT_ID, Relation.HELD_BY)
            self.graph.set_room(name, self.graph.room_of(ROBOT_ID))
            self.graph.set_state(name, "held", True)
            return
        self.graph.set_state(name, "held", False)
        if entity.parent is not None and self.graph.has(entity.parent) and entity.relation in ("on", "in"):
            self.graph.set_placement(name, entity.parent, Relation(entity.relation))
            self.graph.set_room(name, self.graph.room_of(entity.parent))
        else:
            self.graph.set_placement(name, None, None)
            room = entity.room or self._plan.room_at(entity.position[0], entity.position[1], entity.level)
            self.graph.set_room(name, room if room and self.graph.has(room) else None)

    def apply_action(self, action: Action | str, target: str | None, place: str | None = None,
                     relation: Relation | None = None) -> list[str]:
        """Deterministic update after a successful action (names are scene instance names)."""
        return apply_action(self.graph, action, target, place, relation=relation)
