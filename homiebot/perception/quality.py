"""Perception quality against the simulator's ground truth.

An **exploration episode** drives the robot with the oracle ``go_to`` to every room and every piece of furniture of
a scene (rooms first, then furniture in the spec's order), and at the start and after every successful go_to the
four views are observed and fed to both builders. Then:

* **graph quality** (per builder): object recall over all ground-truth objects and over the *observable* ones (those
  the privileged graph, which adds an object exactly when a view shows it, saw: objects inside closed furniture
  are never observable), object precision, mean position error of matched objects, furniture recall/precision,
  relation accuracy (a matched object whose placement names the furniture matched to its true parent with the true
  relation; an object on the floor must have no placement) and room accuracy; matching rules in
  :mod:`homiebot.perception.matching`;
* **grounding accuracy** on EMMOE's name map (every EMMOE name of every object and furniture of the scene; right
  when the grounded entity is known by that name, counting EMMOE names: shared names such as "can" accept every
  entity that carries them) and on the paraphrase list (``data/paraphrases.yaml``: right when the category is one
  of the case's), plus the negatives that must not ground (F2). Grounding runs against the ground-truth
  ``WorldState`` (what the executor's F2 check sees) and against the image-built graph (what a non-privileged
  planner's targets resolve to; right when the node's matched entity is right).
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from homiebot.files import load_yaml
from homiebot.perception.conceptgraph import ConceptGraphBuilder, ConceptGraphConfig, PanopticStandInLabeler
from homiebot.perception.emmoe_names import emmoe_aliases
from homiebot.perception.grounding import Grounder, SemanticGrounder, normalize_name
from homiebot.perception.layout import SceneLayout, vocabulary_from_scene
from homiebot.perception.matching import match_furniture, match_objects
from homiebot.perception.privileged import PrivilegedGraphBuilder
from homiebot.perception.world_graph import NodeKind, Relation, WorldGraph
from homiebot.sim.scene import SceneSpec
from homiebot.types import EntityKind, EntityState, Observation, WorldState

log = logging.getLogger(__name__)

PARAPHRASES_PATH = Path(__file__).parent / "data" / "paraphrases.yaml"


# ------------------------------------------------------------------------------------------------ graph quality
@dataclass
class GraphQuality:
    objects_total: int
    objects_observable: int
    objects_predicted: int
    objects_matched: int
    objects_matched_observable: int
    object_recall: float
    observable_recall: float
    object_precision: float
    mean_position_error: float | None  # metres, over matched objects
    furniture_total: int
    furniture_predicted: int
    furniture_matched: int
    furniture_recall: float
    furniture_precision: float
    relation_accuracy: float | None  # over matched objects
    room_accuracy: float | None  # over matched objects and furniture
    relation_errors: list[str] = field(default_factory=list)


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def graph_quality(graph: WorldGraph, state: WorldState, observable: set[str] | None = None) -> GraphQuality:
    objects = {n: e for n, e in state.entities.items() if e.kind is EntityKind.OBJECT}
    furniture = {n: e for n, e in state.entities.items() if e.kind is EntityKind.FURNITURE}
    observable = set(objects) if observable is None else observable & set(objects)
    object_matches = match_objects(graph, state)
    furniture_matches = match_furniture(graph, state)
    node_to_entity = {m.node_id: m.entity for m in object_matches + furniture_matches}
    # A ground-truth room node keeps its name in both builders.
    node_to_entity.update({n.id: n.name for n in graph.nodes(NodeKind.ROOM)})

    errors = [m.score for m in object_matches]
    relation_ok = 0
    relation_errors = []
    room_checked = room_ok = 0
    for m in object_matches:
        truth = objects[m.entity]
        place = graph.placement(m.node_id)
        if truth.held:
            ok = place is not None and place[1] is Relation.HELD_BY
        elif truth.parent is None:
            ok = place is None
        else:
            ok = place is not None and node_to_entity.get(place[0]) == truth.parent and place[1].value == truth.relation
        relation_ok += ok
        if not ok:
            got = "none" if place is None else f"{place[1].value} {node_to_entity.get(place[0], graph.node(place[0]).name)}"
            relation_errors.append(f"{m.entity}: {truth.relation} {truth.parent} -> predicted {got}")
    for m in object_matches + furniture_matches:
        truth = state.entities[m.entity]
        if truth.room is None:
            continue
        room_checked += 1
        room = graph.room_of(m.node_id)
        room_ok += room is not None and node_to_entity.get(room) == truth.room
    matched_observable = sum(1 for m in object_matches if m.entity in observable)
    n_pred_objects = len(graph.nodes(NodeKind.OBJECT))
    n_pred_furniture = len(graph.nodes(NodeKind.FURNITURE))
    return GraphQuality(
        objects_total=len(objects),
        objects_observable=len(observable),
        objects_predicted=n_pred_objects,
        objects_matched=len(object_matches),
        objects_matched_observable=matched_observable,
        object_recall=_ratio(len(object_matches), len(objects)),
        observable_recall=_ratio(matched_observable, len(observable)),
        object_precision=_ratio(len(object_matches), n_pred_objects),
        mean_position_error=statistics.fmean(errors) if errors else None,
        furniture_total=len(furniture),
        furniture_predicted=n_pred_furniture,
        furniture_matched=len(furniture_matches),
        furniture_recall=_ratio(len(furniture_matches), len(furniture)),
        furniture_precision=_ratio(len(furniture_matches), n_pred_furniture),
        relation_accuracy=_ratio(relation_ok, len(object_matches)) if object_matches else None,
        room_accuracy=_ratio(room_ok, room_checked) if room_checked else None,
        relation_errors=relation_errors,
    )


# ------------------------------------------------------------------------------------------------ grounding cases
class _Paraphrase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    phrase: str
    categories: list[str]
    known_miss: str | None = None  # why the calibrated grounder is expected to miss it (counted as a failure)


class ParaphraseFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    paraphrases: list[_Paraphrase]
    negatives: list[str]


def load_paraphrases(path: str | Path = PARAPHRASES_PATH) -> ParaphraseFile:
    path = Path(path)
    try:
        return ParaphraseFile.model_validate(load_yaml(path.read_text()))
    except FileNotFoundError:
        raise ValueError(f"paraphrase file not found: {path}") from None
    except (yaml.YAMLError, ValidationError) as err:
        raise ValueError(f"invalid paraphrase file {path}: {err}") from None


@dataclass(frozen=True)
class GroundingCase:
    phrase: str
    source: str  # "emmoe" | "paraphrase" | "negative"
    acceptable: frozenset[str]  # entity names that are right; empty for a negative (must give None)
    about: str = ""  # the entity (emmoe) or categories (paraphrase) the case was made from
    known_miss: str | None = None  # a documented miss of the calibrated grounder (still counted as a failure)


def _known_names(entity: EntityState) -> set[str]:
    return {normalize_name(t) for t in (entity.name, entity.category, *entity.aliases, *emmoe_aliases(entity))}


def emmoe_alias_cases(state: WorldState, kinds: Sequence[EntityKind] = (EntityKind.OBJECT, EntityKind.FURNITURE)) -> list[GroundingCase]:
    """One case per (entity, EMMOE name) of the scene's objects and furniture (see the module docstring)."""
    known = {name: _known_names(e) for name, e in state.entities.items()}
    cases = []
    for entity in sorted(state.entities.values(), key=lambda e: e.name):
        if entity.kind not in kinds:
            continue
        for alias in emmoe_aliases(entity):
            key = normalize_name(alias)
            acceptable = frozenset(n for n, names in known.items() if key in names)
            cases.append(GroundingCase(alias, "emmoe", acceptable, entity.name))
    return cases


def paraphrase_cases(state: WorldState, paraphrases: ParaphraseFile | None = None) -> list[GroundingCase]:
    """The paraphrases that apply to this scene and the negatives it does not contain."""
    paraphrases = paraphrases or load_paraphrases()
    cases = []
    for p in paraphrases.paraphrases:
        acceptable = frozenset(n for n, e in state.entities.items() if e.category in p.categories)
        if acceptable:
            cases.append(GroundingCase(p.phrase, "paraphrase", acceptable, "/".join(p.categories), p.known_miss))
    words = {w for e in state.entities.values() for t in _known_names(e) for w in t.split("_")}
    for phrase in paraphrases.negatives:
        if not set(normalize_name(phrase).split("_")) & words:
            cases.append(GroundingCase(phrase, "negative", frozenset(), ""))
    return cases


@dataclass
class GroundingQuality:
    cases: int
    correct: int
    accuracy: float
    by_source: dict[str, tuple[int, int]]  # source -> (correct, total)
    failures: list[str] = field(default_factory=list)


def grounding_quality(
    grounder: Grounder,
    state: WorldState,
    cases: Sequence[GroundingCase],
    to_entity: Callable[[str], str | None] | None = None,
) -> GroundingQuality:
    """Ground each case's phrase in ``state``; ``to_entity`` maps a grounded name to a ground-truth entity (for
    grounding against an image-built graph; identity by default)."""
    correct = 0
    by_source: dict[str, list[int]] = {}
    failures = []
    for case in cases:
        result = grounder.ground(case.phrase, state)
        got = result.instance if result.instance is None or to_entity is None else to_entity(result.instance)
        ok = (result.instance is None) if case.source == "negative" else (got in case.acceptable)
        correct += ok
        tally = by_source.setdefault(case.source, [0, 0])
        tally[0] += ok
        tally[1] += 1
        if not ok:
            failures.append(f"{case.source}: {case.phrase!r} -> {result.instance} ({result.method} {result.score:.2f})"
                            + (f", want one of {sorted(case.acceptable)[:4]}" if case.acceptable else ", want None")
                            + (f" [known miss: {case.known_miss}]" if case.known_miss else ""))
    return GroundingQuality(len(cases), correct, _ratio(correct, len(cases)),
                            {k: (v[0], v[1]) for k, v in by_source.items()}, failures)


@dataclass
class Calibration:
    """Similarity of the semantic tier on the cases the exact tier cannot answer."""

    positives: int
    negatives: int
    min_positive: float  # lowest best-score of a right entity among positive cases
    max_negative: float  # highest best-score of any entity among negative cases
    suggested_threshold: float
    lowest_positives: list[tuple[str, float]]
    highest_negatives: list[tuple[str, float]]


def calibrate(grounder: SemanticGrounder, cases_by_state: Sequence[tuple[WorldState, Sequence[GroundingCase]]]) -> Calibration:
    positive_scores: list[tuple[str, float]] = []
    negative_scores: list[tuple[str, float]] = []
    for state, cases in cases_by_state:
        for case in cases:
            if case.known_miss:
                continue  # documented below-threshold positives are what the threshold gives up
            if case.source != "negative" and (grounder.exact.ground(case.phrase, state).instance is not None
                                              or grounder.name_map.ground(case.phrase, state).instance is not None):
                continue  # answered by an exact tier: says nothing about the threshold
            scores = grounder.scores(case.phrase, state)
            if case.source == "negative":
                negative_scores.append((case.phrase, max(scores.values(), default=0.0)))
            else:
                positive_scores.append((case.phrase, max((scores[n] for n in case.acceptable if n in scores), default=0.0)))
    positive_scores.sort(key=lambda p: p[1])
    negative_scores.sort(key=lambda p: -p[1])
    lo = positive_scores[0][1] if positive_scores else 1.0
    hi = negative_scores[0][1] if negative_scores else 0.0
    return Calibration(len(positive_scores), len(negative_scores), lo, hi, round((lo + hi) / 2, 3),
                       positive_scores[:5], negative_scores[:5])


# ------------------------------------------------------------------------------------------------ exploration
def exploration_targets(spec: SceneSpec) -> list[str]:
    """Where the exploration episode goes: every room, then every piece of furniture, in the spec's order."""
    return [r.name for r in spec.rooms] + [f.name for f in spec.furniture]


@dataclass
class UpdateTiming:
    privileged_ms: list[float] = field(default_factory=list)
    conceptgraph_ms: list[float] = field(default_factory=list)


@dataclass
class Exploration:
    privileged: PrivilegedGraphBuilder
    conceptgraph: ConceptGraphBuilder
    state: WorldState
    stops: int
    failed_targets: list[str]
    timing: UpdateTiming


def make_builders(spec: SceneSpec, state: WorldState, cg_config: ConceptGraphConfig | None = None,
                  label_confusion: float = 0.0, seed: int = 0) -> tuple[PrivilegedGraphBuilder, ConceptGraphBuilder]:
    layout = SceneLayout.from_scene(spec, state)
    # The detector's prompts are the categories and the scene's aliases of them. EMMOE's names are not added as
    # node aliases: its map is ambiguous ("kitchen drawer" and "sink" are names of its kitchen counter), so they
    # stay in the grounder's lower-priority name-map tier, which reads them from a node's category.
    vocabulary = vocabulary_from_scene(spec)
    labeler = PanopticStandInLabeler(vocabulary, {n: e.category for n, e in state.entities.items()},
                                     confusion=label_confusion, seed=seed)
    return PrivilegedGraphBuilder(layout), ConceptGraphBuilder(layout, labeler, cg_config)


def explore(sim, spec: SceneSpec, targets: Sequence[str] | None = None, *, cg_config: ConceptGraphConfig | None = None,
            label_confusion: float = 0.0, seed: int = 0,
            on_stop: Callable[[int, int, str], None] | None = None) -> Exploration:
    """Run the exploration episode on a reset simulator (see the module docstring)."""
    state = sim.state()
    privileged, conceptgraph = make_builders(spec, state, cg_config, label_confusion, seed)
    timing = UpdateTiming()

    def feed(observation: Observation, now: WorldState) -> None:
        t0 = time.perf_counter()
        privileged.update(observation, now)
        t1 = time.perf_counter()
        conceptgraph.update(observation)
        t2 = time.perf_counter()
        timing.privileged_ms.append((t1 - t0) * 1e3)
        timing.conceptgraph_ms.append((t2 - t1) * 1e3)

    feed(sim.observe(), state)
    targets = list(targets) if targets is not None else exploration_targets(spec)
    failed = []
    stops = 1
    for index, target in enumerate(targets):
        result = sim.go_to(target)
        if not result.success:
            failed.append(f"{target}: {result.status.value} {result.detail}".strip())
        else:
            feed(sim.observe(), sim.state())
            stops += 1
        if on_stop is not None:
            on_stop(index + 1, len(targets), target)
    return Exploration(privileged, conceptgraph, sim.state(), stops, failed, timing)


# ------------------------------------------------------------------------------------------------ the report
@dataclass
class PerceptionReport:
    scene: str
    seed: int
    stops: int
    failed_targets: list[str]
    conceptgraph: GraphQuality
    privileged: GraphQuality
    grounding_truth: GroundingQuality
    grounding_graph: GroundingQuality
    update_ms: dict[str, float]
    threshold: float | None  # the semantic tier's threshold; None when grounding ran without it

    def to_dict(self) -> dict:
        return asdict(self)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def evaluate(exploration: Exploration, spec: SceneSpec, grounder: Grounder, seed: int = 0) -> PerceptionReport:
    state = exploration.state
    observable = {n.name for n in exploration.privileged.graph.nodes(NodeKind.OBJECT)}
    cg_graph = exploration.conceptgraph.graph
    cg_quality = graph_quality(cg_graph, state, observable)
    privileged_quality = graph_quality(exploration.privileged.graph, state, observable)
    cases = emmoe_alias_cases(state) + paraphrase_cases(state)
    truth = grounding_quality(grounder, state, cases)
    node_entity = {m.node_id: m.entity for m in match_objects(cg_graph, state) + match_furniture(cg_graph, state)}
    name_entity = {cg_graph.node(k).name: v for k, v in node_entity.items()}
    name_entity.update({n.name: n.name for n in cg_graph.nodes(NodeKind.ROOM)})
    graph_state = cg_graph.as_world_state(state.robot)
    on_graph = grounding_quality(grounder, graph_state, cases, to_entity=name_entity.get)
    t = exploration.timing
    update_ms = {
        "privileged_mean": statistics.fmean(t.privileged_ms),
        "privileged_p95": _percentile(t.privileged_ms, 0.95),
        "conceptgraph_mean": statistics.fmean(t.conceptgraph_ms),
        "conceptgraph_p95": _percentile(t.conceptgraph_ms, 0.95),
    }
    return PerceptionReport(spec.name, seed, exploration.stops, exploration.failed_targets, cg_quality,
                            privileged_quality, truth, on_graph, update_ms, getattr(grounder, "threshold", None))
