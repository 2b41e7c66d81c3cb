"""``homie perception``: world-graph quality, graphs, grounding.

* ``homie perception eval --scene NAME|all [--seed N] [--json] [--out DIR] [--confusion P] [--no-semantic]``: the
  exploration episode (oracle go_to to every room and furniture, four views at each stop), then the
  ConceptGraphs-style and privileged graphs' recall, precision, position error, relation and room accuracy
  against the simulator's ground truth, grounding accuracy on EMMOE's names and the paraphrases, and the update
  times. A rich table, or JSON on stdout with ``--json``; ``--out`` also writes the report, both graphs (JSON,
  text description, top-down picture). ``--scene all`` runs every library scene and prints one row per scene.
* ``homie perception graph --scene NAME --out DIR [--builder conceptgraph|privileged|both]``: explore and write
  ``<builder>_graph.json``, ``<builder>_description.txt`` and ``<builder>_topdown.png``; prints the description.
* ``homie perception ground --scene NAME PHRASE...``: ground phrases against the scene's ground truth.
* ``homie perception calibrate [--scene NAME ...]``: the semantic tier's similarities on the cases the exact
  tier cannot answer, and the threshold between positives and negatives.

Exit codes: 0 success, 2 unknown or invalid scene, 3 the perception extra (MiniLM) is missing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from homiebot.cli.failures import check_output, fail

perception_app = typer.Typer(help="Perception: world graphs, their quality, grounding of target names.",
                             no_args_is_help=True)

EXIT_BAD_SCENE = 2
EXIT_NO_MODEL = 3


def _grounder(semantic: bool):
    """The grounder, loaded before any simulator exists (see homiebot.gl_safety)."""
    from homiebot.perception.grounding import ExactTiersGrounder, SemanticGrounder, perception_extra_missing

    if not semantic:
        return ExactTiersGrounder()
    reason = perception_extra_missing()
    if reason:
        fail(f"semantic grounding needs the MiniLM model: {reason}; or pass --no-semantic", EXIT_NO_MODEL)
    grounder = SemanticGrounder()
    grounder.embedder.encode(["warm up"])
    return grounder


def _check_scenes(scenes: list[str]) -> None:
    """Refuse a bad scene before anything slow (the MiniLM model, a renderer) is loaded."""
    from homiebot.sim.scene import SceneError, load_scene

    for scene in scenes:
        try:
            load_scene(scene)
        except SceneError as err:
            fail(str(err), EXIT_BAD_SCENE)


def _simulator(scene: str, seed: int):
    os.environ.setdefault("MUJOCO_GL", "egl")
    from homiebot.sim.base import make_simulator
    from homiebot.sim.scene import SceneError, load_scene

    try:
        load_scene(scene)
    except SceneError as err:
        fail(str(err), EXIT_BAD_SCENE)
    sim = make_simulator("mujoco")
    sim.reset(scene, seed=seed)
    return sim


def _explore(sim, confusion: float, seed: int):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from homiebot.perception.quality import exploration_targets, explore

    spec = sim.scene_spec()
    targets = exploration_targets(spec)
    with Progress(TextColumn("exploring {task.description}"), BarColumn(), MofNCompleteColumn(),
                  transient=True, console=Console(stderr=True)) as progress:
        task = progress.add_task(spec.name, total=len(targets))

        def on_stop(done: int, total: int, target: str) -> None:
            progress.update(task, completed=done, description=f"{spec.name}: {target}")

        return spec, explore(sim, spec, targets, label_confusion=confusion, seed=seed, on_stop=on_stop)


def _write_graph(out: Path, prefix: str, graph, layout, truth) -> None:
    from homiebot.files import atomic_write_text
    from homiebot.perception.render import render_topdown

    graph.save(out / f"{prefix}_graph.json")
    atomic_write_text(out / f"{prefix}_description.txt", graph.describe() + "\n")
    render_topdown(graph, layout, out / f"{prefix}_topdown.png", truth, title=f"{prefix} graph: {graph.scene}")


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _print_report(report) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"World graph vs ground truth: {report.scene} (seed {report.seed}, {report.stops} stops)")
    table.add_column("metric")
    table.add_column("ConceptGraphs-style", justify="right")
    table.add_column("privileged", justify="right")
    cg, pv = report.conceptgraph, report.privileged
    rows = [
        ("objects (matched / predicted / total)", f"{cg.objects_matched} / {cg.objects_predicted} / {cg.objects_total}",
         f"{pv.objects_matched} / {pv.objects_predicted} / {pv.objects_total}"),
        ("object recall (all objects)", _fmt(cg.object_recall), _fmt(pv.object_recall)),
        (f"object recall (observable: {cg.objects_observable})", _fmt(cg.observable_recall), _fmt(pv.observable_recall)),
        ("object precision", _fmt(cg.object_precision), _fmt(pv.object_precision)),
        ("mean position error (m)", _fmt(cg.mean_position_error), _fmt(pv.mean_position_error)),
        ("furniture recall", _fmt(cg.furniture_recall), _fmt(pv.furniture_recall)),
        ("furniture precision", _fmt(cg.furniture_precision), _fmt(pv.furniture_precision)),
        ("relation accuracy", _fmt(cg.relation_accuracy), _fmt(pv.relation_accuracy)),
        ("room accuracy", _fmt(cg.room_accuracy), _fmt(pv.room_accuracy)),
        ("update time mean / p95 (ms)", f"{report.update_ms['conceptgraph_mean']:.1f} / {report.update_ms['conceptgraph_p95']:.1f}",
         f"{report.update_ms['privileged_mean']:.1f} / {report.update_ms['privileged_p95']:.1f}"),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)

    tier = f"semantic threshold {report.threshold}" if report.threshold is not None else "exact tier only"
    grounding = Table(title=f"Grounding accuracy ({tier})")
    grounding.add_column("cases")
    grounding.add_column("against ground truth", justify="right")
    grounding.add_column("against the ConceptGraphs-style graph", justify="right")
    for source in ("emmoe", "paraphrase", "negative"):
        t = report.grounding_truth.by_source.get(source, (0, 0))
        g = report.grounding_graph.by_source.get(source, (0, 0))
        label = {"emmoe": "EMMOE names", "paraphrase": "paraphrases", "negative": "unknown names -> F2"}[source]
        grounding.add_row(label, f"{t[0]}/{t[1]}", f"{g[0]}/{g[1]}")
    grounding.add_row("all", f"{_fmt(report.grounding_truth.accuracy)}", f"{_fmt(report.grounding_graph.accuracy)}")
    console.print(grounding)
    for title, items in (("relation errors (ConceptGraphs-style)", cg.relation_errors),
                         ("grounding failures (ground truth)", report.grounding_truth.failures),
                         ("grounding failures (graph)", report.grounding_graph.failures),
                         ("failed exploration targets", report.failed_targets)):
        if items:
            console.print(f"[bold]{title}[/bold]")
            for item in items:
                console.print(f"  {item}", markup=False)


def _print_summary(reports) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="ConceptGraphs-style graph vs ground truth, library scenes (privileged graph: relation accuracy)")
    for column in ("scene", "stops", "objects m/p/t", "observable recall", "precision", "pos. error m",
                   "furniture m/p/t", "relation acc.", "room acc.", "privileged rel. acc.", "grounding (truth)",
                   "grounding (graph)", "update ms mean/p95"):
        table.add_column(column, justify="left" if column == "scene" else "right")
    for r in reports:
        c = r.conceptgraph
        table.add_row(r.scene, str(r.stops), f"{c.objects_matched}/{c.objects_predicted}/{c.objects_total}",
                      _fmt(c.observable_recall, 2), _fmt(c.object_precision, 2), _fmt(c.mean_position_error),
                      f"{c.furniture_matched}/{c.furniture_predicted}/{c.furniture_total}", _fmt(c.relation_accuracy, 2),
                      _fmt(c.room_accuracy, 2), _fmt(r.privileged.relation_accuracy, 2),
                      _fmt(r.grounding_truth.accuracy), _fmt(r.grounding_graph.accuracy),
                      f"{r.update_ms['conceptgraph_mean']:.1f}/{r.update_ms['conceptgraph_p95']:.1f}")
    Console(width=200).print(table)


@perception_app.command("eval")
def eval_command(
    scene: str = typer.Option(..., "--scene", "-s", help="Library scene name or scene file; 'all' for the whole library."),
    seed: int = typer.Option(0, help="Reset seed (object placement)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout instead of tables."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write report.json, graphs, descriptions and pictures here."),
    confusion: float = typer.Option(0.0, min=0.0, max=1.0, help="Label confusion rate of the stand-in detector."),
    semantic: bool = typer.Option(True, "--semantic/--no-semantic", help="Use the MiniLM tier of grounding."),
) -> None:
    """Explore a scene and report the world graphs' and the grounding's quality against ground truth."""
    from homiebot.files import atomic_write_text
    from homiebot.perception.layout import SceneLayout
    from homiebot.perception.quality import evaluate
    from homiebot.sim.scene import list_scenes

    scenes = list_scenes() if scene == "all" else [scene]
    _check_scenes(scenes)
    if out is not None:
        check_output(out)
    grounder = _grounder(semantic)
    reports = []
    for name in scenes:
        sim = _simulator(name, seed)
        try:
            spec, exploration = _explore(sim, confusion, seed)
            report = evaluate(exploration, spec, grounder, seed)
            if out is not None:
                folder = out / spec.name if len(scenes) > 1 else out
                folder.mkdir(parents=True, exist_ok=True)
                layout = SceneLayout.from_scene(spec, exploration.state)
                _write_graph(folder, "conceptgraph", exploration.conceptgraph.graph, layout, exploration.state)
                _write_graph(folder, "privileged", exploration.privileged.graph, layout, exploration.state)
                atomic_write_text(folder / "report.json", json.dumps(report.to_dict(), indent=2) + "\n")
        finally:
            sim.shutdown()
        reports.append(report)
    if as_json:
        data = [r.to_dict() for r in reports]
        typer.echo(json.dumps(data if len(scenes) > 1 else data[0], indent=2))
    elif len(reports) == 1:
        _print_report(reports[0])
    else:
        _print_summary(reports)


@perception_app.command("graph")
def graph_command(
    scene: str = typer.Option(..., "--scene", "-s", help="Library scene name or scene file."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder."),
    seed: int = typer.Option(0, help="Reset seed."),
    builder: str = typer.Option("both", help="conceptgraph, privileged or both."),
    confusion: float = typer.Option(0.0, min=0.0, max=1.0, help="Label confusion rate of the stand-in detector."),
) -> None:
    """Explore a scene and write the world graph(s): JSON, text description, top-down picture."""
    from homiebot.perception.layout import SceneLayout

    if builder not in ("conceptgraph", "privileged", "both"):
        fail(f"unknown builder {builder!r}; choose conceptgraph, privileged or both", EXIT_BAD_SCENE)
    check_output(out)
    sim = _simulator(scene, seed)
    try:
        spec, exploration = _explore(sim, confusion, seed)
    finally:
        sim.shutdown()
    out.mkdir(parents=True, exist_ok=True)
    layout = SceneLayout.from_scene(spec, exploration.state)
    chosen = ("conceptgraph", "privileged") if builder == "both" else (builder,)
    for name in chosen:
        graph = getattr(exploration, name).graph
        _write_graph(out, name, graph, layout, exploration.state)
        typer.echo(f"# {name} graph ({out / (name + '_graph.json')})")
        typer.echo(graph.describe())


@perception_app.command("ground")
def ground_command(
    phrases: list[str] = typer.Argument(..., help="Target strings as a planner writes them."),
    scene: str = typer.Option(..., "--scene", "-s", help="Library scene name or scene file."),
    seed: int = typer.Option(0, help="Reset seed."),
) -> None:
    """Ground target strings against a scene's ground truth (exact tier, then MiniLM)."""
    from rich.console import Console
    from rich.table import Table

    _check_scenes([scene])
    grounder = _grounder(True)
    sim = _simulator(scene, seed)
    try:
        state = sim.state()
    finally:
        sim.shutdown()
    table = Table(title=f"Grounding in {scene} (threshold {grounder.threshold})")
    for column in ("phrase", "instance", "method", "score", "candidates"):
        table.add_column(column)
    for phrase in phrases:
        r = grounder.ground(phrase, state)
        table.add_row(phrase, r.instance or "None (F2)", r.method, f"{r.score:.3f}", ", ".join(r.candidates[:4]))
    Console().print(table)


@perception_app.command("calibrate")
def calibrate_command(
    scene: list[str] = typer.Option(None, "--scene", "-s", help="Scenes to use (default: the whole library)."),
    seed: int = typer.Option(0, help="Reset seed."),
) -> None:
    """Similarities of the semantic tier on positives the exact tier misses and on negatives; the threshold between."""
    from homiebot.perception.quality import calibrate, emmoe_alias_cases, paraphrase_cases
    from homiebot.sim.scene import list_scenes

    scenes = scene or list_scenes()
    _check_scenes(scenes)
    grounder = _grounder(True)
    pairs = []
    for name in scenes:
        sim = _simulator(name, seed)
        try:
            state = sim.state()
        finally:
            sim.shutdown()
        pairs.append((state, emmoe_alias_cases(state) + paraphrase_cases(state)))
    result = calibrate(grounder, pairs)
    typer.echo(f"positives needing the semantic tier: {result.positives}; negatives: {result.negatives}")
    typer.echo(f"lowest positive similarity {result.min_positive:.3f}: {result.lowest_positives}")
    typer.echo(f"highest negative similarity {result.max_negative:.3f}: {result.highest_negatives}")
    typer.echo(f"threshold midway: {result.suggested_threshold:.3f} (in use: {grounder.threshold})")


def register(app: typer.Typer) -> None:
    """Add ``homie perception ...`` to the ``homie`` app."""
    app.add_typer(perception_app, name="perception")
