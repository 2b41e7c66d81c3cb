"""Declarative scene description: rooms, walls, doorways, furniture/receptacles, small objects, robot.

Scenes are YAML files validated by the pydantic models below (``extra="forbid"``, so a misspelt field
is reported by name). The library lives in ``homiebot/sim/scenes/*.yaml``; ``docs/scenes.md`` documents
the format with an example.

Coordinates are metres in the ``map`` frame (x east, y north, z up). ``yaw`` is radians,
counter-clockwise from +x. Furniture ``size`` is the full extent (x, y, z) of its axis-aligned box in its
own frame before ``yaw`` is applied; its ``pose`` is the centre of the footprint on the floor.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from homiebot.files import load_yaml

SCENE_DIR = Path(__file__).parent / "scenes"

Vec2 = tuple[float, float]
Vec3 = tuple[float, float, float]

#: Named colours usable anywhere a colour is expected (RGBA in 0..1).
NAMED_COLORS: dict[str, tuple[float, float, float, float]] = {
    "red": (0.80, 0.12, 0.10, 1.0),
    "green": (0.15, 0.60, 0.20, 1.0),
    "blue": (0.15, 0.30, 0.80, 1.0),
    "yellow": (0.95, 0.80, 0.15, 1.0),
    "orange": (0.95, 0.50, 0.10, 1.0),
    "purple": (0.50, 0.20, 0.60, 1.0),
    "pink": (0.95, 0.55, 0.65, 1.0),
    "brown": (0.45, 0.28, 0.14, 1.0),
    "beige": (0.85, 0.78, 0.62, 1.0),
    "white": (0.93, 0.93, 0.93, 1.0),
    "grey": (0.55, 0.55, 0.55, 1.0),
    "gray": (0.55, 0.55, 0.55, 1.0),
    "black": (0.08, 0.08, 0.08, 1.0),
    "silver": (0.75, 0.75, 0.78, 1.0),
    "wood": (0.60, 0.42, 0.25, 1.0),
    "dark": (0.20, 0.15, 0.12, 1.0),
    "cream": (0.96, 0.93, 0.82, 1.0),
    "lime": (0.65, 0.85, 0.20, 1.0),
}

Color = str | tuple[float, float, float, float]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_color(value: Color) -> Color:
    if isinstance(value, str) and value not in NAMED_COLORS:
        raise ValueError(f"unknown colour {value!r}; named colours: {', '.join(sorted(NAMED_COLORS))}")
    if not isinstance(value, str) and not all(0.0 <= c <= 1.0 for c in value):
        raise ValueError("RGBA components must lie in 0..1")
    return value


def rgba(color: Color) -> tuple[float, float, float, float]:
    return NAMED_COLORS[color] if isinstance(color, str) else tuple(color)  # type: ignore[return-value]


class Pose(_Model):
    x: float
    y: float
    yaw: float = 0.0


class RoomSpec(_Model):
    name: str
    category: str = Field(description="kitchen, living_room, bedroom, bathroom, hallway, dining_room, ...")
    aliases: list[str] = []
    polygon: list[Vec2] = Field(min_length=3, description="floor polygon, counter-clockwise")
    level: int = Field(0, description="storey: 0 ground floor, 1 second floor (reached by stairs)")
    floor_color: Color = "beige"

    _c = field_validator("floor_color")(_check_color)


class WallSpec(_Model):
    start: Vec2
    end: Vec2
    thickness: float = Field(0.1, gt=0)
    height: float = Field(2.5, gt=0)
    color: Color = "white"

    _c = field_validator("color")(_check_color)


class DoorwaySpec(_Model):
    """A gap cut into every wall segment that passes through ``center``."""

    between: tuple[str, str]
    center: Vec2
    width: float = Field(1.0, gt=0.5, description="must let the robot base through")


class SurfaceSpec(_Model):
    """A horizontal surface objects can be put "on", in the furniture's frame."""

    name: str = "top"
    height: float = Field(gt=0, description="z of the surface above the floor")
    min: Vec2 | None = Field(None, description="usable area corner (local x, y); default: whole top inset by 5 cm")
    max: Vec2 | None = None


class InteriorSpec(_Model):
    """A box objects can be put "in" (fridge, drawer, cabinet, sink basin), in the furniture's frame."""

    min: Vec3
    max: Vec3

    @model_validator(mode="after")
    def _ordered(self) -> InteriorSpec:
        if not all(a < b for a, b in zip(self.min, self.max, strict=False)):
            raise ValueError("interior min must be below max on every axis")
        return self


class ArticulationSpec(_Model):
    kind: Literal["hinged", "sliding"] = Field(description="hinged door (fridge, cabinet) or sliding drawer")
    open: bool = Field(False, description="initial state")
    hinge_side: Literal["left", "right"] = "left"
    range: float = Field(1.6, gt=0, description="radians for a hinge, metres for a slide")


#: What a furniture of a category does to what is held at it when the scene does not say (``functions``):
#: ALFWorld heats in a microwave, cools in a fridge and cleans in a sink basin (ALFWorld's PDDL domain,
#: ``alfred.pddl``); an oven heats as well, and a lamp lights what is looked at under it. docs/textworld.md.
DEFAULT_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "microwave": ("heat",),
    "oven": ("heat",),
    "fridge": ("cool",),
    "sink": ("clean",),
    "sink_basin": ("clean",),
    "desk_lamp": ("light",),
    "floor_lamp": ("light",),
}

FurnitureFunction = Literal["heat", "cool", "clean", "light"]


class FurnitureSpec(_Model):
    name: str
    category: str
    aliases: list[str] = []
    room: str | None = Field(None, description="room name; derived from the pose when omitted")
    pose: Pose
    size: Vec3
    color: Color = "wood"
    surfaces: list[SurfaceSpec] = []
    interior: InteriorSpec | None = None
    articulation: ArticulationSpec | None = None
    interactive: bool = Field(False, description="whether Open/Close can act on it (EMMOE L4 otherwise)")
    appliance: bool = Field(False, description="has an on/off state (tasks such as 'turn off all appliances')")
    powered_on: bool = False
    level: int = 0
    functions: list[FurnitureFunction] | None = Field(
        None, description="heat / cool / clean / light; default by category (DEFAULT_FUNCTIONS)"
    )

    _c = field_validator("color")(_check_color)

    @property
    def effective_functions(self) -> tuple[str, ...]:
        """The declared ``functions``, else the category's default."""
        if self.functions is not None:
            return tuple(self.functions)
        return DEFAULT_FUNCTIONS.get(self.category, ())

    @model_validator(mode="after")
    def _consistent(self) -> FurnitureSpec:
        if self.articulation is not None and self.interior is None:
            raise ValueError("an articulated furniture needs an interior (what it opens onto)")
        if any(s <= 0 for s in self.size):
            raise ValueError("size components must be positive")
        if "light" in self.effective_functions and not self.appliance:
            raise ValueError("a light must be an appliance (it is switched on and off)")
        return self


class ObjectSpec(_Model):
    """A small object. Exactly one of ``on``, ``in`` or ``position`` places it; with ``on``/``in`` the spot on
    the receptacle is drawn from the scene seed."""

    name: str
    category: str
    aliases: list[str] = []
    color: Color = "red"
    shape: Literal["box", "cylinder", "sphere"] = "box"
    size: Vec3 = Field((0.08, 0.08, 0.12), description="full extents; a sphere uses size[0] as diameter")
    # An open, hollow object (a bowl): the thickness of its side wall and of its floor; the cylinder is then open at
    # the top. None: solid. A declared property rather than a category list, so a grasp planner can take such an
    # object by its rim (homiebot/skills/physical/grasp.py) without guessing from its name.
    wall_thickness: float | None = Field(None, gt=0, description="open hollow cylinder: wall and floor thickness (m)")
    on: str | None = None
    in_: str | None = Field(None, alias="in")
    position: Vec3 | None = None
    cold: bool = False
    washed: bool = False
    hot: bool = False

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    _c = field_validator("color")(_check_color)

    @model_validator(mode="after")
    def _one_placement(self) -> ObjectSpec:
        given = [k for k, v in (("on", self.on), ("in", self.in_), ("position", self.position)) if v is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of on / in / position (got {given or 'none'})")
        return self

    @model_validator(mode="after")
    def _hollow_cylinder(self) -> ObjectSpec:
        if self.wall_thickness is not None:
            if self.shape != "cylinder":
                raise ValueError(f"wall_thickness makes an open hollow cylinder, not a {self.shape}")
            if 2 * self.wall_thickness >= min(self.size[0], self.size[2]):
                raise ValueError(f"wall_thickness {self.wall_thickness} leaves no hollow in a {self.size[0]} x "
                                 f"{self.size[2]} m cylinder")
        return self

    @property
    def parent(self) -> str | None:
        return self.on or self.in_

    @property
    def relation(self) -> str | None:
        return "on" if self.on else ("in" if self.in_ else None)


class RobotSpec(_Model):
    model: Literal["fetch"] = "fetch"
    start: Pose


class SceneSpec(_Model):
    name: str
    description: str = ""
    rooms: list[RoomSpec] = Field(min_length=1)
    walls: list[WallSpec] = []
    doorways: list[DoorwaySpec] = []
    furniture: list[FurnitureSpec] = []
    objects: list[ObjectSpec] = []
    robot: RobotSpec

    @model_validator(mode="after")
    def _references(self) -> SceneSpec:
        names = [r.name for r in self.rooms] + [f.name for f in self.furniture] + [o.name for o in self.objects]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"instance names must be unique; repeated: {', '.join(dupes)}")
        rooms = {r.name for r in self.rooms}
        furniture = {f.name: f for f in self.furniture}
        for f in self.furniture:
            if f.room is not None and f.room not in rooms:
                raise ValueError(f"furniture {f.name!r}: unknown room {f.room!r}")
        for d in self.doorways:
            for r in d.between:
                if r not in rooms:
                    raise ValueError(f"doorway at {d.center}: unknown room {r!r}")
        for o in self.objects:
            if o.on is not None:
                if o.on not in furniture:
                    raise ValueError(f"object {o.name!r}: 'on' names unknown furniture {o.on!r}")
                if not furniture[o.on].surfaces:
                    raise ValueError(f"object {o.name!r}: furniture {o.on!r} has no surface to be 'on'")
            if o.in_ is not None:
                if o.in_ not in furniture:
                    raise ValueError(f"object {o.name!r}: 'in' names unknown furniture {o.in_!r}")
                if furniture[o.in_].interior is None:
                    raise ValueError(f"object {o.name!r}: furniture {o.in_!r} has no interior to be 'in'")
        return self

    def all_names(self) -> list[str]:
        return [r.name for r in self.rooms] + [f.name for f in self.furniture] + [o.name for o in self.objects]

    def furniture_by_name(self, name: str) -> FurnitureSpec:
        for f in self.furniture:
            if f.name == name:
                return f
        raise KeyError(name)

    def object_by_name(self, name: str) -> ObjectSpec:
        for o in self.objects:
            if o.name == name:
                return o
        raise KeyError(name)


class SceneError(ValueError):
    """A scene could not be loaded; the message names the file and the field at fault."""


def list_scenes() -> list[str]:
    """Names of the scenes in the library, sorted."""
    return sorted(p.stem for p in SCENE_DIR.glob("*.yaml"))


def _format_validation_error(source: str, err: ValidationError) -> str:
    lines = [f"invalid scene {source}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"  {loc}: {e['msg']}")
    return "\n".join(lines)


def parse_scene(data: dict, source: str = "<dict>") -> SceneSpec:
    try:
        return SceneSpec.model_validate(data)
    except ValidationError as err:
        raise SceneError(_format_validation_error(source, err)) from None


def load_scene(name_or_path: str | Path) -> SceneSpec:
    """Load a library scene by name, or a scene file by path.

    Parsed specs are cached per file version (path, modification time, size): a simulator resets the same
    scene for every episode of an evaluation, and the YAML parse was half of an imageless episode. Specs are
    frozen, so sharing one is safe; an edited file is parsed again.
    """
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml", ".json"):
        path = SCENE_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            raise SceneError(f"unknown scene {str(name_or_path)!r}; available: {', '.join(list_scenes())}")
    if not path.exists():
        raise SceneError(f"scene file not found: {path}")
    stat = path.stat()
    return _load_scene_file(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def _yaml_error_line(err: yaml.YAMLError) -> str:
    """A YAML error on one line, with the line and column in the file (PyYAML's marks count from 0)."""
    if not isinstance(err, yaml.MarkedYAMLError):
        return " ".join(str(err).split())
    where = f"line {err.problem_mark.line + 1}, column {err.problem_mark.column + 1}: " if err.problem_mark else ""
    text = f"{where}{err.problem or 'syntax error'}"
    if err.context:
        start = f" at line {err.context_mark.line + 1}, column {err.context_mark.column + 1}" if err.context_mark else ""
        text += f" ({err.context}{start})"
    return text


@lru_cache(maxsize=64)
def _load_scene_file(path_text: str, mtime_ns: int, size: int) -> SceneSpec:
    path = Path(path_text)
    try:
        data = load_yaml(path.read_text())
    except yaml.YAMLError as err:
        raise SceneError(f"invalid scene {path}: not valid YAML: {_yaml_error_line(err)}") from None
    if not isinstance(data, dict):
        raise SceneError(f"invalid scene {path}: expected a mapping at the top level")
    return parse_scene(data, str(path))
