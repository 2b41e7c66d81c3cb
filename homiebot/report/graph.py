"""The world graph of an episode's scene as an SVG tree: house > rooms > furniture > objects (PARTNR's hierarchy,
"PARTNR: A Benchmark for Planning and Reasoning in Embodied Multi-agent Tasks", section 3 and appendix A.7.1).

An episode record keeps no graph of its own, so the page draws the scene file's graph at the start of the
episode and marks on it what the episode did: the entities its subtasks named are highlighted, and an object
that a successful Pick or Put moved is drawn where the episode left it (held by the robot, or on/in its new
receptacle), with its starting place written beside it. Placement edges (on / in / held) are drawn dashed, the
room hierarchy solid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from homiebot.perception.geometry import FloorPlan
from homiebot.report.html import esc
from homiebot.sim.scene import SceneSpec

ROW_HEIGHT = 18
INDENT = 26
_COLOURS = {"house": "#24292f", "room": "#0969da", "furniture": "#8250df", "object": "#bf3989", "agent": "#1a7f37"}


@dataclass(frozen=True)
class Placement:
    """Where the episode left an object: ``relation`` is "on", "in" or "held"."""

    relation: str
    parent: str | None


@dataclass
class _Node:
    name: str
    kind: str
    label: str
    edge: str = ""  # relation to the parent, written on the edge ("" for the room hierarchy)
    children: list[_Node] = field(default_factory=list)


def final_placements(steps: Iterable[tuple[str, str | None, str | None, bool]]) -> dict[str, Placement]:
    """Object placements after the episode from its rounds ``(action, target, place, success)``: a successful
    Pick holds the target, a successful Put leaves it on/in the place (the receptacle decides which)."""
    placements: dict[str, Placement] = {}
    for action, target, place, success in steps:
        if not success or target is None:
            continue
        if action == "Pick":
            placements[target] = Placement("held", None)
        elif action == "Put" and place is not None:
            placements[target] = Placement("", place)  # relation resolved against the scene below
    return placements


def _tree(spec: SceneSpec, placements: Mapping[str, Placement]) -> _Node:
    plan = FloorPlan({r.name: [(p[0], p[1]) for p in r.polygon] for r in spec.rooms}, {r.name: r.level for r in spec.rooms})
    house = _Node(spec.name, "house", f"house ({spec.name})")
    rooms = {r.name: _Node(r.name, "room", r.name) for r in spec.rooms}
    house.children.extend(rooms.values())
    furniture: dict[str, _Node] = {}
    for f in spec.furniture:
        room = f.room or plan.room_at(f.pose.x, f.pose.y, f.level)
        node = _Node(f.name, "furniture", f.name)
        furniture[f.name] = node
        (rooms[room] if room in rooms else house).children.append(node)
    robot = _Node("robot", "agent", "robot")
    house.children.append(robot)
    for o in spec.objects:
        moved = placements.get(o.name)
        start = f"{o.relation} {o.parent}" if o.parent else "on the floor"
        if moved is None:
            parent, relation, label = o.parent, o.relation or "", o.name
        elif moved.relation == "held":
            parent, relation, label = "robot", "held", f"{o.name}  (was {start})"
        else:
            target = spec.furniture_by_name(moved.parent) if moved.parent in furniture else None
            # Into an interior when the receptacle is one that opens or has no top to put on; else on it.
            inside = target is not None and target.interior is not None and (target.articulation is not None or not target.surfaces)
            relation = "in" if inside else "on"
            parent, label = moved.parent, f"{o.name}  (was {start})"
        holder = robot if parent == "robot" else furniture.get(parent or "")
        if holder is None:  # on the floor: under its room
            room = plan.room_at(o.position[0], o.position[1]) if o.position is not None else None
            holder = rooms.get(room or "", house)
        holder.children.append(_Node(o.name, "object", label, relation))
    return house


def world_graph_svg(spec: SceneSpec, highlight: Iterable[str] = (), placements: Mapping[str, Placement] | None = None) -> str:
    """The SVG (trusted markup) of the scene's graph with ``highlight`` names in bold on a yellow band."""
    marked = set(highlight)
    rows: list[tuple[int, _Node, int | None]] = []  # depth, node, parent row

    def walk(node: _Node, depth: int, parent_row: int | None) -> None:
        row = len(rows)
        rows.append((depth, node, parent_row))
        for child in node.children:
            walk(child, depth + 1, row)

    walk(_tree(spec, placements or {}), 0, None)
    width = 120 + INDENT * max(d for d, _, _ in rows) + 9 * max(len(n.label) + len(n.edge) for _, n, _ in rows)
    height = ROW_HEIGHT * len(rows) + 8
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="world-graph" width="{width}" height="{height}" '
        f'font-family="ui-monospace,monospace" font-size="12">'
    ]
    for row, (depth, node, parent_row) in enumerate(rows):
        x = 8 + INDENT * depth
        y = 4 + ROW_HEIGHT * row + ROW_HEIGHT // 2
        if parent_row is not None:
            px = 8 + INDENT * (depth - 1) + 4
            py = 4 + ROW_HEIGHT * parent_row + ROW_HEIGHT // 2
            dash = ' stroke-dasharray="3,2"' if node.edge else ""
            parts.append(f'<path d="M{px},{py + 5} V{y} H{x - 2}" fill="none" stroke="#8c959f"{dash}/>')
        if node.name in marked:
            parts.append(f'<rect x="{x - 2}" y="{y - 8}" width="{9 * len(node.label) + 40}" height="16" fill="#fff3b0"/>')
        colour = _COLOURS[node.kind]
        parts.append(f'<circle cx="{x + 4}" cy="{y}" r="4" fill="{colour}"><title>{esc(node.kind)}</title></circle>')
        edge = f'<tspan fill="#6e7781">{esc(node.edge)} </tspan>' if node.edge else ""
        weight = ' font-weight="bold"' if node.name in marked else ""
        parts.append(f'<text x="{x + 12}" y="{y + 4}"{weight}>{edge}<tspan fill="{colour}">{esc(node.label)}</tspan></text>')
    parts.append("</svg>")
    return "".join(parts)
