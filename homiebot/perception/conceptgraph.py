"""A ConceptGraphs-style world graph from RGB-D and class-agnostic instance masks (PARTNR A.7.2, after Gu et al.
2024, "ConceptGraphs: open-vocabulary 3D scene graphs").

Pipeline per observation (four views):

1. **Segments.** Every id in a view's segmentation with at least ``min_pixels`` pixels is one class-agnostic
   segment. The ids are *only* used to cut the image into masks within that view: they are never compared across
   views or rounds, and no node is keyed by them.
2. **Labels.** A :class:`Labeler` names each segment with a category of a closed vocabulary. In PARTNR that is
   Meta-CLIP over YOLO/SAM crops; no such model runs here, so :class:`PanopticStandInLabeler` stands in for it: it
   reads the category (never the instance) behind the segment from the simulator. It is the one privileged part of
   this builder, it is named as a stand-in, and it can be given a confusion rate to model a detector's mistakes.
3. **Back-projection.** Each mask's depth pixels (every ``stride``-th) go through the intrinsics and the view pose
   into ``map``-frame points, then into a voxel set (2 cm for objects, 5 cm for furniture).
4. **Association.** A detection joins an existing node of the same kind when geometric similarity plus semantic
   similarity reaches ``match_threshold`` (ConceptGraphs sums the two). Geometric similarity is the larger of the
   two directed neighbour ratios: the share of one voxel set that has a voxel of the other within one voxel (26-
   neighbourhood), so a second view of another face of the same object still overlaps. The four views of a stop
   barely overlap (90 degree fields of view, 90 degrees apart), so a counter that spans two views comes as two
   masks whose voxels only meet along the seam: for a mask cut off by the image border, the share of its border
   points lying against the node's box (within two voxels) also counts as geometric similarity, and so does the
   overlap of the two boxes (intersection over the smaller, each grown by half a voxel): views from two stops
   often see different faces whose voxels do not meet but whose boxes are parts of one true box; for objects,
   also 1 - centroid distance / object size (a far, sparse view of an orange and a near one from another side
   have centroids within its radius; two oranges side by side are a diameter apart). Semantic
   similarity is 1 for the same label, else ``label_similarity`` (0 by default). A detection whose geometric
   similarity alone reaches ``geometric_override`` joins the node whatever its label (a misclassification of the
   same voxels; for furniture, which stands side by side, the voxels alone count, not the boxes or the border
   rule). Otherwise it starts a new node.
5. **Fusion.** The node's voxel set becomes the union, its label the vote over its detections, its position the
   mean of its voxel centres and its box the extent of the observed points. After each update, nodes that grew
   into each other are merged by the same similarity (ConceptGraphs' periodic merge); the node with more
   detections survives.
6. **Relations and rooms.** On/in from support geometry (:mod:`homiebot.perception.relations`) against the
   furniture nodes' boxes and voxel centres (the surface under the object, and whether the furniture encloses it); furniture is assigned the room whose floor polygon holds its footprint centre, objects the room
   of their furniture (else the polygon under them). The floor plan (room names and polygons) is known a priori, as
   a map is to a real robot.
7. **Actions.** Successful pick/put/open/close update the graph deterministically, as in the privileged graph; a
   moved object's stale voxels are dropped and the next same-label detection over its new place is fused with it.

A detection of the held object's label within ``held_radius`` of the robot is the object in the gripper
(PARTNR's "whether object-is-being-held-by-agent" check) and is not turned into a new node.

8. **Let go.** When the hand has let go of the object the graph says it holds without a Put that placed it (a Put
   that dropped it: EMMOE's E2, "the object is missing"), :meth:`ConceptGraphBuilder.let_go` makes it held by no one,
   on nothing: where it fell only a view can tell, so until one shows it the node is :attr:`~ConceptGraphBuilder.
   unplaced` and a detection of its label within ``held_radius`` of where the hand let go takes its geometry. Left
   held, its label was taken for the object in the gripper near the robot, and the fallen object was never seen.

Besides the voxel set, an object node keeps the points of the latest observation that showed it and where the camera
stood then (:meth:`ConceptGraphBuilder.seen_points`): a grasp completes the object from them with its model
(:mod:`homiebot.perception.object_fit`). The latest view, not the union: a nudged object's old voxels stay in the
union, and the last view before a grasp is the nearest.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np

from homiebot.perception.actions import apply_action, moved_box
from homiebot.perception.geometry import (
    DEFAULT_MIN_DEPTH,
    Box3,
    backproject,
    backproject_where,
    voxel_centers,
    voxel_keys,
)
from homiebot.perception.layout import SceneLayout, VocabularyEntry
from homiebot.perception.object_fit import SeenPoints
from homiebot.perception.privileged import group_points_by_segment, layout_graph
from homiebot.perception.relations import Furniture, SupportTolerances, infer_placement
from homiebot.perception.world_graph import ROBOT_ID, GraphNode, NodeKind, Relation
from homiebot.types import Action, CameraView, EntityKind, Observation

log = logging.getLogger(__name__)

# Packed offsets of the 27 voxels of a 3x3x3 neighbourhood (same packing as geometry.voxel_keys: adding a packed
# delta to a packed key moves each coordinate independently as long as none leaves its 21-bit field).
_BITS = 21
_NEIGHBOURS = np.array(
    [(dx << (2 * _BITS)) + (dy << _BITS) + dz for dx in (-1, 0, 1) for dy in (-1, 0, 1) for dz in (-1, 0, 1)],
    dtype=np.int64,
)


@dataclass(frozen=True)
class Label:
    category: str
    kind: EntityKind
    confidence: float = 1.0
    prompts: tuple[str, ...] = ()


class Labeler(Protocol):
    """Names class-agnostic segments of one view with vocabulary categories (None: not in the vocabulary)."""

    def label(self, view: CameraView, segment_ids: list[int], observation: Observation) -> dict[int, Label | None]: ...


class PanopticStandInLabeler:
    """Stand-in for an open-vocabulary detector (see the module docstring, step 2).

    ``category_of`` maps scene instance names to categories; only the category leaves this class. With
    ``confusion > 0`` a segment is given a wrong category of the same kind with that probability (seeded, and
    stable per segment id within a view so that a view does not flicker), to study the graph under label noise.
    """

    def __init__(self, vocabulary: dict[str, VocabularyEntry], category_of: dict[str, str],
                 confusion: float = 0.0, seed: int = 0):
        if not 0.0 <= confusion <= 1.0:
            raise ValueError(f"confusion must lie in [0, 1], got {confusion}")
        self.vocabulary = vocabulary
        self._category_of = dict(category_of)
        self.confusion = confusion
        self._rng = np.random.default_rng(seed)
        self._by_kind: dict[EntityKind, list[str]] = {}
        for entry in vocabulary.values():
            self._by_kind.setdefault(entry.kind, []).append(entry.category)

    def label(self, view: CameraView, segment_ids: list[int], observation: Observation) -> dict[int, Label | None]:
        out: dict[int, Label | None] = {}
        for seg_id in segment_ids:
            name = observation.instance_names.get(seg_id)
            category = self._category_of.get(name) if name is not None else None
            entry = self.vocabulary.get(category) if category is not None else None
            if entry is None:
                out[seg_id] = None
                continue
            if self.confusion > 0 and self._rng.random() < self.confusion:
                others = [c for c in self._by_kind[entry.kind] if c != entry.category]
                if others:
                    entry = self.vocabulary[others[int(self._rng.integers(len(others)))]]
                    out[seg_id] = Label(entry.category, entry.kind, 0.5, entry.prompts)
                    continue
            out[seg_id] = Label(entry.category, entry.kind, 1.0, entry.prompts)
        return out


@dataclass(frozen=True)
class ConceptGraphConfig:
    min_pixels: int = 12  # same visibility rule as the privileged graph
    stride: int = 2  # depth sub-sampling: 1/4 of the pixels, still >= 7 points for a 30-pixel mask
    object_voxel: float = 0.02
    furniture_voxel: float = 0.05
    max_depth: float = 6.0  # farther depth is too coarse to place a small object on the right furniture
    match_threshold: float = 1.3  # geometric + semantic; with the same label the voxel sets must share 30 %
    min_geometric: float = 0.05  # never fuse detections that do not touch at all
    # Fuse whatever the labels when the geometry alone is this similar: the same voxels seen again under another
    # label are the same thing misclassified (ConceptGraphs' visual similarity would still be high); the label
    # vote of the node then settles its class. Two different things side by side stay below it (about 0.3).
    geometric_override: float = 0.75
    overlap_samples: int = 128  # voxels sampled per direction for the neighbour ratio (speed bound)
    # Smallest object size (m) the centroid similarity assumes: two faces of a 7 cm orange seen from two stops have
    # centroids up to 4.5 cm apart (similarity 0.5); two oranges side by side about 7 cm (0.22, kept apart).
    min_object_size: float = 0.09
    moved_radius: float = 0.15  # margin (m) around a put's furniture box where the placed object is looked for
    held_radius: float = 1.2  # see the module docstring
    # Most points an object node keeps of its latest observation (every k-th beyond it): a 7 cm apple at 1 m has
    # about 60 after the stride; a box near the camera some thousands, more than a footprint needs.
    seen_points_kept: int = 600
    # An object whose outline has more than this share of its pixels against something nearer is partly hidden
    # (occluded_share): its points do not replace those of a clear view of it unless it moved since.
    occluded_share: float = 0.2
    # Something in front of an object's lower outline, nearer by this share of the object's depth and by
    # ``hidden_below_m``, hides its near part (hidden_below): a sink's front wall before a bowl in the basin, seen
    # from above. The surface an object stands on lies below its outline too, a few centimetres nearer per pixel
    # at a grazing angle (a counter 3 m away): a relative step tells the two apart.
    hidden_below_share: float = 0.15
    hidden_below_m: float = 0.05
    # A partly hidden view shows the object where the clear one did when all its points lie within this (m) of the
    # clear view's box: then the clear view stands.
    unmoved_margin: float = 0.015
    tolerances: SupportTolerances = field(default_factory=SupportTolerances)


@dataclass
class _Track:
    node_id: str
    kind: EntityKind
    voxel: float
    keys: np.ndarray
    votes: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))  # category -> confidence sum
    prompts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    box_min: np.ndarray = field(default_factory=lambda: np.zeros(3))
    box_max: np.ndarray = field(default_factory=lambda: np.zeros(3))
    centroid: np.ndarray = field(default_factory=lambda: np.zeros(3))  # mean voxel centre
    detections: int = 0
    # The latest observation's points of an object (module docstring) and the camera positions they were seen from
    seen: np.ndarray = field(default_factory=lambda: np.empty((0, 3)))
    seen_from: np.ndarray = field(default_factory=lambda: np.empty((0, 3)))  # one per point
    seen_in: int = -1  # the observation they come from
    seen_occluded: bool = False  # whether some view of it in that observation was partly hidden
    seen_hidden: np.ndarray = field(default_factory=lambda: np.empty((0, 3)))  # its points a nearer thing borders below
    # The latest observation with a clear view of the object (none of its views partly hidden), kept while later
    # partly hidden ones show it where it was: (points, camera positions, observation, hidden-below points)
    clear: tuple[np.ndarray, np.ndarray, int, np.ndarray] | None = None

    @property
    def label(self) -> str:
        return max(self.votes.items(), key=lambda vote: vote[1])[0]  # the first of equal sums, as Counter.most_common


class _Similarity(NamedTuple):
    voxels: float  # the two directed 26-neighbour voxel ratios, the larger
    shape: float  # also box overlap and the image-border rule
    geo: float  # also, for objects, centroid distance
    sem: float  # label similarity


@dataclass
class _Detection:
    label: Label
    keys: np.ndarray
    box_min: np.ndarray
    box_max: np.ndarray
    centroid: np.ndarray
    voxel: float
    edge_points: np.ndarray | None = None  # points on the image border: the mask is cut off by the field of view
    points: np.ndarray | None = None  # objects: the points themselves (thinned), for seen_points
    camera: np.ndarray | None = None  # where the camera stood
    occluded: bool = False  # something nearer hides part of the object (occluded_share)
    hidden: np.ndarray | None = None  # objects: its points whose lower neighbour is much nearer (hidden_below)


def neighbour_ratio(a: np.ndarray, b: np.ndarray, samples: int) -> float:
    """Share of (up to ``samples`` evenly picked) voxels of sorted key set ``a`` with a voxel of sorted ``b`` in
    their 26-neighbourhood."""
    if len(a) == 0 or len(b) == 0:
        return 0.0
    step = max(1, len(a) // samples)
    probe = a[::step][:, None] + _NEIGHBOURS[None, :]
    pos = np.searchsorted(b, probe)
    np.minimum(pos, len(b) - 1, out=pos)
    return float((b[pos] == probe).any(axis=1).mean())


def _box_overlap(a_min: np.ndarray, a_max: np.ndarray, b_min: np.ndarray, b_max: np.ndarray, pad: float) -> float:
    """Intersection volume over the smaller volume of two boxes, each grown by ``pad`` (so a single visible face,
    a box of zero thickness, still has a volume). Partial views of one thing are parts of the same true box and
    overlap a lot; two things side by side only share the padding."""
    lo = np.maximum(a_min, b_min) - pad
    hi = np.minimum(a_max, b_max) + pad
    inter = float(np.prod(np.clip(hi - lo, 0.0, None)))
    smaller = min(float(np.prod(a_max - a_min + 2 * pad)), float(np.prod(b_max - b_min + 2 * pad)))
    return inter / smaller if smaller > 0 else 0.0


def _centroid_similarity(det: _Detection, track: _Track, min_size: float) -> float:
    """1 - centroid distance / object size, clipped to [0, 1]; the size is the longest side of the two boxes (at
    least ``min_size``). Two views of one small object from different sides see different faces whose voxels and boxes
    barely meet, but their centroids lie within the object's radius; two objects side by side lie about one object
    size apart."""
    size = max(float(np.max(det.box_max - det.box_min)), float(np.max(track.box_max - track.box_min)), min_size)
    return float(np.clip(1.0 - np.linalg.norm(det.centroid - track.centroid) / size, 0.0, 1.0))


def occluded_share(view: CameraView, seg_id: int, nearer: float = 0.03) -> float:
    """The share of a mask's outline pixels (its pixels with a neighbour above, left or right outside it) that
    border something at least ``nearer`` metres nearer the camera: the object is partly hidden there (an occlusion boundary: the depth
    steps towards the camera across the outline). A free-standing object's outline borders what lies behind it.
    An outline on the image's edge does not count as hidden here: a mask cut by the field of view is handled by
    association (module docstring, step 4)."""
    rows, cols = np.nonzero(view.segmentation == seg_id)
    if len(rows) == 0:
        return 0.0
    r0, r1 = max(int(rows.min()) - 1, 0), min(int(rows.max()) + 2, view.segmentation.shape[0])
    c0, c1 = max(int(cols.min()) - 1, 0), min(int(cols.max()) + 2, view.segmentation.shape[1])
    mask = view.segmentation[r0:r1, c0:c1] == seg_id
    crop = view.depth[r0:r1, c0:c1]
    depth = np.where(np.isfinite(crop) & (crop >= DEFAULT_MIN_DEPTH), crop, np.inf)  # no return: nothing there
    outline = np.zeros_like(mask)
    hidden = np.zeros_like(mask)
    # The neighbour above (roll down by one row), left and right; not the one below: under an object's bottom
    # edge lies the surface it stands on, in front of it, and seen at a grazing angle one pixel lower is
    # centimetres nearer (the counter under a can seen from 1.2 m, 0.2 m above it: 4 cm).
    for axis, shift in ((0, 1), (1, 1), (1, -1)):
        other = np.roll(mask, shift, axis=axis)
        other_depth = np.roll(depth, shift, axis=axis)
        valid = np.ones_like(mask)  # np.roll wraps round: the wrapped row or column is no neighbour
        if axis == 0:
            valid[0 if shift == 1 else -1, :] = False
        else:
            valid[:, 0 if shift == 1 else -1] = False
        edge = mask & ~other & valid
        outline |= edge
        hidden |= edge & (other_depth < depth - nearer)
    count = int(outline.sum())
    return float(hidden.sum()) / count if count else 0.0


def hidden_below(view: CameraView, seg_id: int, share: float = 0.15, margin: float = 0.05) -> np.ndarray:
    """The pixels of a mask (full-image boolean) whose neighbour below, outside the mask, is nearer the camera by
    ``share`` of their depth and by ``margin`` metres at least: there something in front hides the object's lower,
    near part (a sink's front wall before a bowl in the basin seen from above; a drawer's front panel). The
    surface an object stands on, which also lies below its outline, is nearer by a small share only. The image's
    bottom row has no neighbour below."""
    mask = view.segmentation == seg_id
    depth = np.where(np.isfinite(view.depth) & (view.depth >= DEFAULT_MIN_DEPTH), view.depth, np.inf)
    below_mask = np.zeros_like(mask)
    below_mask[:-1] = mask[1:]
    below_depth = np.full_like(depth, np.inf)
    below_depth[:-1] = depth[1:]
    return mask & ~below_mask & (below_depth < depth * (1 - share)) & (below_depth < depth - margin)


def exact_label_similarity(a: str, b: str) -> float:
    return 1.0 if a == b else 0.0


class ConceptGraphBuilder:
    """ConceptGraphs-style world graph from RGB-D and instance masks (see the module docstring)."""

    def __init__(
        self,
        layout: SceneLayout,
        labeler: Labeler,
        config: ConceptGraphConfig | None = None,
        label_similarity: Callable[[str, str], float] = exact_label_similarity,
    ):
        self.config = config if config is not None else ConceptGraphConfig()
        self.labeler = labeler
        self.label_similarity = label_similarity
        self.graph = layout_graph(layout, with_furniture=False)
        self._plan = layout.floor_plan()
        self._tracks: dict[str, _Track] = {}
        # node id -> (min, max) corner of the region an action moved the node into, until it is detected again
        self._moved: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._unplaced: set[str] = set()  # let go of, not seen since (let_go)
        self._next_id = 0
        self._name_counts: Counter = Counter()
        self._centres: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._observations = 0

    # ------------------------------------------------------------------ observation
    def update(self, observation: Observation, objects_only: bool = False) -> list[str]:
        """Fuse one observation; returns the ids of the nodes created or updated (after merges). ``objects_only``:
        fuse its object detections alone (a skill's look at the objects it handles; the furniture nodes stay as
        the episode's views built them)."""
        robot = observation.robot_pose
        self._observations += 1
        self.graph.update_node(ROBOT_ID, position=(robot.x, robot.y, 0.0), states={"yaw": robot.yaw})
        self.graph.set_room(ROBOT_ID, self._plan.room_at(robot.x, robot.y))
        detections = [d for view in observation.views.values() for d in self._detect(view, observation)
                      if not objects_only or d.label.kind is EntityKind.OBJECT]
        touched: set[str] = set()
        held = {n.id for n in self.graph.held_by(ROBOT_ID)}
        robot_xy = np.array([robot.x, robot.y])
        for det in detections:
            if held and self._is_held_object(det, held, robot_xy):
                continue
            track = self._associate(det)
            if track is None:
                track = self._new_track(det)
            else:
                self._fuse(track, det)
            touched.add(track.node_id)
        alive = self._merge_pass(touched)
        for node_id in sorted(alive):
            self._refresh_node(self._tracks[node_id])
        self._infer_relations()
        return sorted(alive)

    def _detect(self, view: CameraView, observation: Observation) -> list[_Detection]:
        cfg = self.config
        counts = np.bincount(view.segmentation.ravel().clip(min=0))
        visible = [int(i) for i in np.flatnonzero(counts >= cfg.min_pixels) if i != 0]
        if not visible:
            return []
        labels = {i: lab for i, lab in self.labeler.label(view, visible, observation).items() if lab is not None}
        if not labels:
            return []
        points, seg, on_border = backproject(view, cfg.stride, max_depth=cfg.max_depth, border=1)
        keep = np.isin(seg, list(labels))
        # Carry the border flag through the grouping as a fourth coordinate (one sort for both).
        tagged = np.concatenate((points[keep], on_border[keep, None].astype(np.float32)), axis=1)
        # Objects' own points at every pixel (the stride's quarter is a handful of points on a fruit two metres away),
        # for their completion (seen_points); their voxels come from the strided points like everything else's.
        objects = [i for i, lab in labels.items() if lab.kind is EntityKind.OBJECT]
        dense: dict[int, np.ndarray] = {}
        if objects:
            full, full_seg = backproject_where(view, np.isin(view.segmentation, objects), max_depth=cfg.max_depth)
            dense = group_points_by_segment(full, full_seg)
        out = []
        for seg_id, rows in group_points_by_segment(tagged, seg[keep]).items():
            if len(rows) < 3:
                continue
            pts = rows[:, :3]
            edge = pts[rows[:, 3] > 0.5]
            label = labels[seg_id]
            voxel = cfg.furniture_voxel if label.kind is EntityKind.FURNITURE else cfg.object_voxel
            det = _Detection(label, voxel_keys(pts, voxel), pts.min(axis=0), pts.max(axis=0), pts.mean(axis=0),
                             voxel, edge if len(edge) else None)
            if label.kind is EntityKind.OBJECT:
                own = dense.get(seg_id, pts)
                step = max(1, len(own) // cfg.seen_points_kept)
                det.points = np.asarray(own[::step], dtype=float)
                det.camera = np.asarray(view.camera_to_world, dtype=float)[:3, 3]
                det.occluded = occluded_share(view, seg_id) > cfg.occluded_share
                hidden = hidden_below(view, seg_id, cfg.hidden_below_share, cfg.hidden_below_m)
                if hidden.any():
                    det.hidden = backproject_where(view, hidden, max_depth=cfg.max_depth)[0]
            out.append(det)
        return out

    def _is_held_object(self, det: _Detection, held: set[str], robot_xy: np.ndarray) -> bool:
        if det.label.kind is not EntityKind.OBJECT:
            return False
        near = float(np.hypot(*(det.centroid[:2] - robot_xy))) <= self.config.held_radius
        return near and any(self._tracks[h].label == det.label.category for h in held if h in self._tracks)

    def _similarity(self, det: _Detection, track: _Track) -> _Similarity:
        """The similarities of step 4 between a detection (or a node, in the merge pass) and a node."""
        cfg = self.config
        margin = 2 * det.voxel
        voxels = max(
            neighbour_ratio(det.keys, track.keys, cfg.overlap_samples),
            neighbour_ratio(track.keys, det.keys, cfg.overlap_samples),
        )
        shape = max(voxels, _box_overlap(det.box_min, det.box_max, track.box_min, track.box_max, det.voxel / 2))
        if det.edge_points is not None:
            # A mask cut off by the image edge continues beyond it, in the neighbouring view: its cut lies
            # against the node's box when the node is the other part of the same thing.
            lo, hi = track.box_min - margin, track.box_max + margin
            shape = max(shape, float(np.all((det.edge_points >= lo) & (det.edge_points <= hi), axis=1).mean()))
        geo = shape
        if det.label.kind is EntityKind.OBJECT:
            geo = max(geo, _centroid_similarity(det, track, cfg.min_object_size))
        return _Similarity(voxels, shape, geo, self.label_similarity(det.label.category, track.label))

    def _fuses(self, sim: _Similarity, merge: bool = False, furniture: bool = False) -> bool:
        cfg = self.config
        if sim.geo < cfg.min_geometric:
            return False
        # The label-blind override needs the shapes themselves to coincide: centroids alone (a can on a plate)
        # must not merge two differently labelled things. Between two nodes (the merge pass), each with its own
        # label vote, only coinciding voxels count: boxes are a poor witness there (an opened fridge's box, grown
        # by its swung door, holds the whole fruit-bowl stand beside it, and the stand's node would swallow it).
        # So too for a furniture detection: furniture stands side by side, and a kitchen counter's view cut by the
        # image's edge lies against the fridge it abuts (the edge rule and the boxes say 1.0, its voxels 0.02):
        # fused label-blind, the counter was lost in the fridge's node and the expert, finding no counter, ended.
        blind = sim.voxels if merge or furniture else sim.shape
        return sim.geo + sim.sem >= cfg.match_threshold or blind >= cfg.geometric_override

    def _near(self, det: _Detection, tracks: list[_Track]) -> list[_Track]:
        """Box pre-filter for all candidate nodes at once (one numpy call instead of one per node)."""
        if not tracks:
            return []
        margin = 2 * det.voxel
        mins = np.stack([t.box_min for t in tracks])
        maxs = np.stack([t.box_max for t in tracks])
        near = ~(np.any(det.box_min - margin > maxs, axis=1) | np.any(mins - margin > det.box_max, axis=1))
        return [t for t, keep in zip(tracks, near, strict=False) if keep]

    def _associate(self, det: _Detection) -> _Track | None:
        """The best-scoring node for ``det``, or None. Nodes with fused geometry are preferred; a node an action
        moved (no geometry yet) takes the detection only when no other node does and the detection lies in the
        region the action put it in (over the furniture of a put)."""
        cfg = self.config
        best: tuple[float, _Track] | None = None
        best_moved: tuple[float, _Track] | None = None
        same_kind = [t for t in self._tracks.values() if t.kind is det.label.kind]
        for track in same_kind:
            region = self._moved.get(track.node_id)
            if region is None:
                continue
            sem = self.label_similarity(det.label.category, track.label)
            inside = bool(np.all(det.centroid >= region[0]) and np.all(det.centroid <= region[1]))
            if inside and 1.0 + sem >= cfg.match_threshold and (best_moved is None or sem > best_moved[0]):
                best_moved = (sem, track)
        for track in self._near(det, [t for t in same_kind if t.node_id not in self._moved]):
            sim = self._similarity(det, track)
            furniture = det.label.kind is EntityKind.FURNITURE
            if self._fuses(sim, furniture=furniture) and (best is None or sim.geo + sim.sem > best[0]):
                best = (sim.geo + sim.sem, track)
        if best is not None:
            return best[1]
        return best_moved[1] if best_moved else None

    def _merge_pass(self, touched: set[str]) -> set[str]:
        """Merge nodes that grew into each other (ConceptGraphs' periodic merge): a far, sparse first view of an
        object can start a node that a later, fuller view of it does not reach, until the fuller node has grown.
        The node with more detections absorbs the other (ties: the older); the absorbed node leaves the graph.
        Returns the ids of the surviving touched nodes."""
        alive = set(touched)
        for node_id in sorted(touched):
            if node_id not in self._tracks or node_id in self._moved:
                continue
            track = self._tracks[node_id]
            probe = _Detection(Label(track.label, track.kind), track.keys, track.box_min, track.box_max,
                               track.centroid, track.voxel)
            others = [t for t in self._tracks.values()
                      if t.kind is track.kind and t.node_id != node_id and t.node_id not in self._moved]
            for other in self._near(probe, others):
                if not self._fuses(self._similarity(probe, other), merge=True):
                    continue
                keep, drop = sorted((track, other), key=lambda t: (-t.detections, t.node_id))
                self._absorb(keep, drop)
                alive.discard(drop.node_id)
                alive.add(keep.node_id)
                if drop is track:
                    break
                probe = _Detection(Label(track.label, track.kind), track.keys, track.box_min, track.box_max,
                                   track.centroid, track.voxel)
        return alive

    def _absorb(self, keep: _Track, drop: _Track) -> None:
        keep.keys = np.union1d(keep.keys, drop.keys)
        keep.box_min = np.minimum(keep.box_min, drop.box_min)
        keep.box_max = np.maximum(keep.box_max, drop.box_max)
        keep.centroid = voxel_centers(keep.keys, keep.voxel).mean(axis=0)
        for category, weight in drop.votes.items():
            keep.votes[category] += weight
        for category, prompts in drop.prompts.items():
            keep.prompts.setdefault(category, prompts)
        keep.detections += drop.detections
        if drop.seen_in > keep.seen_in:
            keep.seen, keep.seen_from, keep.seen_in = drop.seen, drop.seen_from, drop.seen_in
            keep.seen_occluded, keep.seen_hidden = drop.seen_occluded, drop.seen_hidden
        elif drop.seen_in == keep.seen_in and len(drop.seen):
            keep.seen = np.concatenate((keep.seen, drop.seen))
            keep.seen_from = np.concatenate((keep.seen_from, drop.seen_from))
            keep.seen_occluded = keep.seen_occluded or drop.seen_occluded
            keep.seen_hidden = np.concatenate((keep.seen_hidden, drop.seen_hidden))
        if drop.clear is not None and (keep.clear is None or drop.clear[2] > keep.clear[2]):
            keep.clear = drop.clear
        del self._tracks[drop.node_id]
        self._centres.pop(drop.node_id, None)
        self.graph.remove_node(drop.node_id)
        log.debug("concept graph: merged %s into %s", drop.node_id, keep.node_id)

    def _new_track(self, det: _Detection) -> _Track:
        self._next_id += 1
        node_id = f"cg_{self._next_id:04d}"
        track = _Track(node_id, det.label.kind, det.voxel, det.keys.copy())
        track.votes[det.label.category] += det.label.confidence
        track.prompts[det.label.category] = det.label.prompts
        track.box_min, track.box_max = det.box_min.copy(), det.box_max.copy()
        track.centroid = voxel_centers(track.keys, track.voxel).mean(axis=0)
        track.detections = 1
        self._keep_seen(track, det)
        self._tracks[node_id] = track
        kind = NodeKind.FURNITURE if det.label.kind is EntityKind.FURNITURE else NodeKind.OBJECT
        self.graph.add_node(GraphNode(node_id, kind, det.label.category, self._fresh_name(det.label.category)))
        return track

    def _fuse(self, track: _Track, det: _Detection) -> None:
        if track.node_id in self._moved:
            # The first sight after an action replaces the stale geometry.
            del self._moved[track.node_id]
            self._unplaced.discard(track.node_id)
            track.keys = det.keys.copy()
            track.box_min, track.box_max = det.box_min.copy(), det.box_max.copy()
        else:
            track.keys = np.union1d(track.keys, det.keys)
            track.box_min = np.minimum(track.box_min, det.box_min)
            track.box_max = np.maximum(track.box_max, det.box_max)
        track.centroid = voxel_centers(track.keys, track.voxel).mean(axis=0)
        track.votes[det.label.category] += det.label.confidence
        track.prompts.setdefault(det.label.category, det.label.prompts)
        track.detections += 1
        self._keep_seen(track, det)

    def _keep_seen(self, track: _Track, det: _Detection) -> None:
        """Add a detection's points to the node's latest-observation points (a new observation replaces them)."""
        if det.points is None or det.camera is None:
            return
        cameras = np.repeat(det.camera[None, :], len(det.points), axis=0)
        hidden = det.hidden if det.hidden is not None else np.empty((0, 3))
        if track.seen_in != self._observations:
            self._settle_clear(track)
            track.seen, track.seen_from, track.seen_in = det.points, cameras, self._observations
            track.seen_occluded, track.seen_hidden = det.occluded, hidden
        else:
            track.seen = np.concatenate((track.seen, det.points))
            track.seen_from = np.concatenate((track.seen_from, cameras))
            track.seen_occluded = track.seen_occluded or det.occluded
            track.seen_hidden = np.concatenate((track.seen_hidden, hidden))

    @staticmethod
    def _settle_clear(track: _Track) -> None:
        """Remember the node's latest observation as its clear view when no view of it was partly hidden."""
        if len(track.seen) and not track.seen_occluded:
            track.clear = (track.seen, track.seen_from, track.seen_in, track.seen_hidden)

    def seen_points(self, node_id: str) -> SeenPoints | None:
        """The points of an object node from the latest observation that showed it, and the camera position they
        were seen from (the mean over its views: the head's four views of a stop share it); None when the node has
        none (furniture, a node only an action placed, or an object moved since it was last seen).

        When that observation saw it partly hidden (the arm reaching in front of it, :func:`occluded_share`) and
        its points lie where an earlier clear view put them, the clear view's points: a hidden top or side would
        shrink or shift the completed object (an orange's hidden top put its centre 3.5 cm low, and the fingers
        came down on the counter). With them, the points a nearer thing borders from below (:func:`hidden_below`):
        where the object's near part is hidden, so that its completion runs back from the far side."""
        track = self._tracks.get(node_id)
        if track is None or len(track.seen) == 0 or node_id in self._moved:
            return None
        points, cameras, hidden = track.seen, track.seen_from, track.seen_hidden
        if track.seen_occluded and track.clear is not None and track.clear[2] < track.seen_in:
            lo = track.clear[0].min(axis=0) - self.config.unmoved_margin
            hi = track.clear[0].max(axis=0) + self.config.unmoved_margin
            if np.all((points >= lo) & (points <= hi)):
                points, cameras, hidden = track.clear[0], track.clear[1], track.clear[3]
        viewer = cameras.mean(axis=0)
        return SeenPoints(points, (float(viewer[0]), float(viewer[1]), float(viewer[2])), hidden if len(hidden) else None)

    def _fresh_name(self, category: str) -> str:
        self._name_counts[category] += 1
        return f"{category}_{self._name_counts[category]}"

    def _refresh_node(self, track: _Track) -> None:
        node = self.graph.node(track.node_id)
        label = track.label
        # Position: mean of the voxel centres (each surface patch counts once however many pixels saw it);
        # box: the extent of the observed points themselves (voxel centres would round a table top up by 2.5 cm).
        centers = voxel_centers(track.keys, track.voxel)
        position = tuple(float(v) for v in centers.mean(axis=0))
        lo = tuple(float(v) for v in track.box_min)
        hi = tuple(float(v) for v in track.box_max)
        total = sum(track.votes.values())
        changes: dict = {
            "position": position, "bbox_min": lo, "bbox_max": hi, "detections": track.detections,
            "confidence": float(track.votes[label] / total) if total else 0.0,
            "aliases": track.prompts.get(label, ()),
        }
        if label != node.category:
            changes.update(category=label, name=self._fresh_name(label))
        self.graph.update_node(track.node_id, **changes)

    # ------------------------------------------------------------------ relations and rooms
    def _infer_relations(self) -> None:
        furniture = self.graph.nodes(NodeKind.FURNITURE)
        boxes = [Furniture(f.id, Box3(f.bbox_min, f.bbox_max), self._points(f.id)) for f in furniture]
        for f in furniture:
            self.graph.set_room(f.id, self._plan.room_at(f.position[0], f.position[1]))
        for obj in self.graph.nodes(NodeKind.OBJECT):
            place = self.graph.placement(obj.id)
            if place is not None and place[1] is Relation.HELD_BY:
                # the object travels with the robot: its position (and its box) the robot's until it is put down
                robot = self.graph.node(ROBOT_ID).position
                low, high = moved_box(obj, robot)
                self.graph.update_node(obj.id, position=robot, bbox_min=low, bbox_max=high)
                self.graph.set_room(obj.id, self.graph.room_of(ROBOT_ID))
                continue
            if obj.id in self._moved:
                continue  # keep the action's placement until the object is seen again
            found = infer_placement(Box3(obj.bbox_min, obj.bbox_max), boxes, self.config.tolerances)
            if found is None:
                self.graph.set_placement(obj.id, None, None)
                self.graph.set_room(obj.id, self._plan.room_at(obj.position[0], obj.position[1]))
            else:
                self.graph.set_placement(obj.id, found[0], found[1])
                self.graph.set_room(obj.id, self.graph.room_of(found[0]))

    def _points(self, node_id: str) -> np.ndarray | None:
        """Voxel centres of a node (cached until its voxel set changes)."""
        track = self._tracks.get(node_id)
        if track is None or len(track.keys) == 0:
            return None
        cached = self._centres.get(node_id)
        if cached is None or cached[0] is not track.keys:
            cached = (track.keys, voxel_centers(track.keys, track.voxel))
            self._centres[node_id] = cached
        return cached[1]

    # ------------------------------------------------------------------ actions
    def apply_action(self, action: Action | str, target: str | None, place: str | None = None,
                     released_at: tuple[float, float, float] | None = None) -> list[str]:
        """Deterministic update after a successful action; ``target`` / ``place`` are graph node names or ids;
        ``released_at`` as :func:`homiebot.perception.actions.apply_action`'s."""
        changed = apply_action(self.graph, action, target, place, released_at=released_at)
        act = action if isinstance(action, Action) else Action.parse(action)
        if act in (Action.PICK, Action.PUT):
            for node_id in changed:
                placement = self.graph.placement(node_id)
                if placement is not None and placement[1] is not Relation.HELD_BY:
                    where = self.graph.node(placement[0])
                    grow = self.config.moved_radius
                    region = (np.asarray(where.bbox_min) - grow, np.asarray(where.bbox_max) + grow)
                else:
                    # Held: the gripper check keeps detections from creating a duplicate; nothing to fuse with.
                    region = (np.full(3, np.inf), np.full(3, -np.inf))
                self._moved_to(node_id, region)
        return changed

    def _moved_to(self, node_id: str, region: tuple[np.ndarray, np.ndarray]) -> None:
        """Forget ``node_id``'s stale geometry; its next detection of its label inside ``region`` replaces it."""
        self._moved[node_id] = region
        self._unplaced.discard(node_id)
        track = self._tracks.get(node_id)
        if track is not None:
            track.keys = np.empty(0, dtype=np.int64)
            track.seen, track.seen_from, track.seen_in = np.empty((0, 3)), np.empty((0, 3)), -1
            track.seen_occluded, track.clear = False, None

    def let_go(self, node_id: str) -> None:
        """The hand let go of ``node_id`` without a Put that placed it (module docstring, "Let go"): held by no one,
        on nothing, its box centred on the robot's position, and :attr:`unplaced` until a detection of its label
        within ``held_radius`` of there takes its geometry."""
        node = self.graph.node(node_id)
        robot = self.graph.node(ROBOT_ID).position
        self.graph.set_placement(node_id, None, None)
        low, high = moved_box(node, robot)
        self.graph.update_node(node_id, position=robot, bbox_min=low, bbox_max=high,
                               states={**node.states, "held": False})
        self.graph.set_room(node_id, self.graph.room_of(ROBOT_ID))
        reach = self.config.held_radius
        self._moved_to(node_id, (np.array([robot[0] - reach, robot[1] - reach, -np.inf]),
                                 np.array([robot[0] + reach, robot[1] + reach, np.inf])))
        self._unplaced.add(node_id)

    @property
    def unplaced(self) -> frozenset[str]:
        """Nodes the hand let go of (:meth:`let_go`) that no view has shown since: where they are is not known."""
        return frozenset(self._unplaced)

    @property
    def track_count(self) -> int:
        return len(self._tracks)
