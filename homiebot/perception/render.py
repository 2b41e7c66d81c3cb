"""Pictures of a world graph: a top-down plan with rooms, furniture boxes, objects and their placement edges, and
(optionally) the ground truth underneath for comparison."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from homiebot.files import publish
from homiebot.perception.layout import SceneLayout
from homiebot.perception.world_graph import ROBOT_ID, NodeKind, Relation, WorldGraph
from homiebot.types import EntityKind, WorldState


def render_topdown(graph: WorldGraph, layout: SceneLayout, path: str | Path, truth: WorldState | None = None,
                   title: str | None = None, dpi: int = 120) -> Path:
    """Write a PNG (atomically) of ``graph`` seen from above; ground-truth boxes and objects dashed/grey."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Polygon, Rectangle

    fig, ax = plt.subplots(figsize=(10, 6))
    for room in layout.rooms:
        ax.add_patch(Polygon(room.polygon, closed=True, facecolor="#f4f1ea", edgecolor="#888", lw=1.2, zorder=0))
        xs = [p[0] for p in room.polygon]
        ys = [p[1] for p in room.polygon]
        ax.text(sum(xs) / len(xs), sum(ys) / len(ys), room.name, ha="center", va="center", fontsize=16,
                color="#555", alpha=0.3, zorder=0.5)
    if truth is not None:
        for e in truth.entities.values():
            if e.kind is EntityKind.FURNITURE:
                ax.add_patch(Rectangle(e.bbox_min[:2], e.bbox_max[0] - e.bbox_min[0], e.bbox_max[1] - e.bbox_min[1],
                                       fill=False, ls="--", ec="#999", lw=1.0))
            elif e.kind is EntityKind.OBJECT:
                ax.plot(e.position[0], e.position[1], "x", color="#666", ms=7, mew=1.5)
    cmap = plt.get_cmap("tab20")
    for k, f in enumerate(graph.nodes(NodeKind.FURNITURE)):
        colour = cmap(k % 20)
        ax.add_patch(Rectangle(f.bbox_min[:2], f.bbox_max[0] - f.bbox_min[0], f.bbox_max[1] - f.bbox_min[1],
                               facecolor=(*colour[:3], 0.35), ec=colour, lw=1.5))
        state = f.states.get("is_open")
        label = f.name + ("" if not isinstance(state, bool) else (" (open)" if state else " (closed)"))
        ax.text(f.position[0], f.position[1], label, ha="center", va="center", fontsize=7)
    for obj in graph.nodes(NodeKind.OBJECT):
        ax.plot(obj.position[0], obj.position[1], "o", color="#c0392b", ms=6)
        ax.annotate(obj.name, obj.position[:2], textcoords="offset points", xytext=(4, 4), fontsize=7, color="#c0392b")
        place = graph.placement(obj.id)
        if place is not None and place[1] is not Relation.HELD_BY:
            parent = graph.node(place[0])
            ax.plot([obj.position[0], parent.position[0]], [obj.position[1], parent.position[1]], "-",
                    color="#c0392b", lw=0.6, alpha=0.6)
    if graph.has(ROBOT_ID):
        robot = graph.node(ROBOT_ID)
        ax.plot(robot.position[0], robot.position[1], "^", color="#2c3e50", ms=9)
    ax.set_aspect("equal")
    ax.autoscale_view()
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(title or f"world graph: {graph.scene}", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi)
        publish(tmp)  # mkstemp makes 0600; the file gets the mode the user's umask gives
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
    return path
