"""``homie sim``: list, validate and render the scenes of the embedded simulator.

* ``homie sim scenes``: one library scene name per line.
* ``homie sim validate FILE``: parse a scene file; an invalid one names the field at fault (exit 2).
* ``homie sim render --scene NAME --out DIR [--seed N] [--size PX]``: the four first-person views as
  ``{view}_rgb.png``, ``{view}_depth.png`` (colourised, near = bright) plus ``{view}_depth.npy`` (metres),
  ``{view}_seg.png`` (one colour per instance, same colour for the same instance in every view),
  ``topdown.png`` and ``instances.json`` (segmentation id -> instance name). Every file is written to a
  temporary name in DIR and renamed into place, so an interrupted run leaves no half-written image.
* ``homie sim urdf [-o FILE]``: the robot's URDF, generated from the simulator's MJCF
  (:mod:`homiebot.sim.mujoco.urdf`; what the sim bridge latches on ``/robot_description``), to stdout or
  written atomically to FILE (temporary file in FILE's folder, renamed into place).

Exit codes: 0 success; 2 invalid or unknown scene (the message names the field or lists the available
scenes) or a bad option; 1 no offscreen OpenGL (the message says which packages to install), or a file that
cannot be written (``urdf -o``: the message names the path and the reason).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, check_output, fail
from homiebot.files import publish

sim_app = typer.Typer(help="Embedded MuJoCo simulator: scenes, validation, rendering.", no_args_is_help=True)


def _atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` on a temporary file next to ``path``, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(Path(tmp))
        publish(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _id_image(segmentation):
    """The instance-id image as 16-bit greyscale (lossless; ids above 65535 do not occur in a scene)."""
    import numpy as np

    ids = np.asarray(segmentation)
    if ids.size and (ids.min() < 0 or ids.max() > np.iinfo(np.uint16).max):
        raise ValueError(f"instance ids {ids.min()}..{ids.max()} do not fit a 16-bit image")
    return ids.astype(np.uint16)


def _instance_colours(count: int):
    """A fixed colour per instance id (0 = black), well separated for neighbouring ids."""
    import numpy as np

    ids = np.arange(count + 1)
    golden = 0.618033988749895
    hue = (ids * golden) % 1.0
    import matplotlib.colors as mcolors

    rgb = mcolors.hsv_to_rgb(np.stack([hue, np.full_like(hue, 0.65), np.full_like(hue, 0.95)], axis=1))
    colours = (rgb * 255).astype(np.uint8)
    colours[0] = 0
    return colours


def _colour_depth(depth):
    import numpy as np
    from matplotlib import colormaps

    valid = depth > 0
    far = float(np.percentile(depth[valid], 99)) if valid.any() else 1.0
    scaled = 1.0 - np.clip(depth / max(far, 1e-6), 0.0, 1.0)
    image = (colormaps["magma"](scaled)[..., :3] * 255).astype(np.uint8)
    image[~valid] = 0
    return image


@sim_app.command("scenes")
def scenes_command() -> None:
    """List the library scenes, one name per line."""
    from homiebot.sim.scene import list_scenes

    for name in list_scenes():
        typer.echo(name)


@sim_app.command("validate")
def validate_command(file: Path = typer.Argument(..., help="Scene file (.yaml, .yml or .json).")) -> None:
    """Validate a scene file: its schema, and that the simulator can compile it and place every object."""
    from homiebot.sim.scene import SceneError, load_scene

    try:
        spec = load_scene(file)
        from homiebot.sim.mujoco.backend import MujocoSimulator

        sim = MujocoSimulator(render=False)
        try:
            sim.reset(spec, seed=0)
        finally:
            sim.shutdown()
    except SceneError as err:
        fail(str(err))
    except ValueError as err:  # MuJoCo compile errors
        fail(f"invalid scene {file}: the simulator cannot build it: {err}")
    typer.echo(f"{file}: ok ({len(spec.rooms)} rooms, {len(spec.furniture)} furniture, {len(spec.objects)} objects)")


@sim_app.command("render")
def render_command(
    scene: str = typer.Option(..., "--scene", "-s", help="Library scene name or scene file."),
    out: Path = typer.Option(..., "--out", "-o", help="Output directory (created)."),
    seed: int = typer.Option(0, "--seed", help="Placement seed."),
    size: int = typer.Option(256, "--size", help="View size in pixels."),
    map_size: int = typer.Option(768, "--map-size", help="Top-down map size in pixels."),
) -> None:
    """Render the four first-person views (RGB, depth, segmentation) and the top-down map."""
    import numpy as np
    from PIL import Image

    from homiebot.sim.scene import SceneError, load_scene

    if size <= 0 or map_size <= 0:
        fail("--size and --map-size must be positive")
    try:
        spec = load_scene(scene)
    except SceneError as err:
        fail(str(err))
    check_output(out)
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.sim.mujoco.rendering import RendererUnavailable

    sim = MujocoSimulator(width=size, height=size)
    try:
        try:
            obs = sim.reset(spec, seed=seed)
        except SceneError as err:
            fail(str(err))
        except RendererUnavailable as err:
            fail(str(err), EXIT_ENVIRONMENT)
        out.mkdir(parents=True, exist_ok=True)
        colours = _instance_colours(max(obs.instance_names, default=0))

        def png(array):
            return lambda p: Image.fromarray(array).save(p, format="PNG")

        for name, view in obs.views.items():
            _atomic_write(out / f"{name}_rgb.png", png(view.rgb))
            _atomic_write(out / f"{name}_depth.png", png(_colour_depth(view.depth)))
            _atomic_write(out / f"{name}_depth.npy", lambda p, d=view.depth: np.save(p, d))
            _atomic_write(out / f"{name}_seg.png", png(colours[view.segmentation]))
            # The raw instance ids (instances.json names them): colours are for people, ids for programs.
            _atomic_write(out / f"{name}_seg_ids.png", png(_id_image(view.segmentation)))
        _atomic_write(out / "topdown.png", png(sim.render_topdown(map_size)))
        legend = {str(i): n for i, n in sorted(obs.instance_names.items())}
        _atomic_write(out / "instances.json", lambda p: p.write_text(json.dumps(legend, indent=2) + "\n"))
    finally:
        sim.shutdown()
    typer.echo(f"wrote {len(obs.views) * 5 + 2} files to {out}")


def _write_text(tmp: Path, text: str, target: Path) -> None:
    """Write ``text`` to ``tmp`` with the mode ``target`` has, or a new file's (mkstemp's 0600 is not meant)."""
    tmp.write_text(text, encoding="utf-8")
    if target.exists():
        mode = target.stat().st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)


@sim_app.command("urdf")
def urdf_command(
    out: Path = typer.Option(None, "--out", "-o", help="Write the URDF to this file (default: stdout)."),
) -> None:
    """Print or write the robot's URDF, generated from the simulator's own robot model."""
    from homiebot.sim.mujoco.urdf import robot_urdf

    text = robot_urdf()
    if out is None:
        typer.echo(text, nl=False)
        return
    check_output(out, directory=False)
    if not out.parent.is_dir():  # name the user's path, not the temporary file the write would fail on
        fail(f"cannot write the URDF to {out}: the folder {out.parent} does not exist")
    _atomic_write(out, lambda p: _write_text(p, text, out))
    typer.echo(f"wrote {out}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``homie sim ...`` to the ``homie`` app."""
    app.add_typer(sim_app, name="sim")
