"""``homie data ...``: training data from episode records (docs/training.md).

* ``homie data collect --out DIR``: expert (or perturbed-expert) episodes of a suite's split, recorded;
* ``homie data export --from RUNS --out RAW``: EMMOE's raw per-task layout (``info.txt`` + views);
* ``homie data build sft|dpo --from RUNS --out DIR``: the SFT or DPO data set, with counts per kind;
* ``homie data check --from DIR``: a built SFT data set's ambiguous prompts, prompt tokens and mix;
* ``homie data corrections --out DIR``: DAgger's rows: a trained student plays, the expert labels its states;
* ``homie data skills --skill pick --episodes N --out DIR``: the physical skills' executions as a LeRobot data set
  (docs/skill-data.md).
"""

from __future__ import annotations

from pathlib import Path

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, check_output, fail


def register(app: typer.Typer) -> None:
    """Add ``homie data``."""
    data_app = typer.Typer(
        help="Training data from episode records: collect, export, build sft|dpo.", no_args_is_help=True
    )
    app.add_typer(data_app, name="data")

    @data_app.command("build")
    def build_command(
        kind: str = typer.Argument(..., help="sft or dpo."),
        runs: list[Path] = typer.Option(
            ..., "--from", help="Episode records: an evaluation directory, a record, or a folder of them (repeatable)."
        ),
        out: Path = typer.Option(..., "--out", "-o", help="New (or empty) output folder."),
        prompt_format: str = typer.Option(
            "runtime", "--prompt-format", help="runtime (the prompt the loop sends) or paper (EMMOE appendix F.1)."
        ),
        rewrites: int = typer.Option(
            3, "--rewrites", help="Rewritten versions of every trajectory besides the original (EMMOE: 3)."
        ),
        split: str = typer.Option("train", "--split", help="train, test, validation or all."),
        system_prompt: bool = typer.Option(
            True, "--system-prompt/--no-system-prompt", help="runtime format: the system information as a system turn."
        ),
        text_observation: bool = typer.Option(
            False,
            "--text-observation",
            help="runtime format: the text planning mode's prompt (text-only models): its system information and "
            "the world description before each instruction, as homie run --planner hf -p include_history=false sends.",
        ),
        recorded_input: bool = typer.Option(
            True,
            "--recorded-input/--no-recorded-input",
            help="runtime format: a round whose record holds its model input (a model planner's episode) is trained "
            "on exactly the chat its model was sent; --no-recorded-input rebuilds the prompt from the instruction.",
        ),
        images: bool = typer.Option(True, "--images/--no-images", help="Link the recorded views into OUT/images."),
        replan_exec: bool = typer.Option(
            False, "--replan-from-execution-errors", help="Also pair E1/E2 failures with their re-plans."
        ),
        thoughtless: bool = typer.Option(
            False, "--thoughtless", help="SFT answers without the Analysis line (PARTNR's action-only samples)."
        ),
        episodes: bool = typer.Option(
            False,
            "--episodes/--no-episodes",
            help="SFT: one sample per episode, the text planner's growing chat with an answer after every round "
            "(the form homie run --planner hf plans in; the trainer learns the answers of the rounds that succeeded). "
            "DPO: each pair's prompt is that chat up to its round.",
        ),
        compact_turns: bool = typer.Option(
            False,
            "--compact-turns",
            help="--episodes: later user turns in the compact form (only what changed since the previous turn); "
            "plan with -p compact_turns=true (docs/training.md).",
        ),
        rewriter: str = typer.Option(
            "template", "--rewriter", help="template (offline) or server (an OpenAI-compatible chat server)."
        ),
        rewrite_model: str = typer.Option("gpt-4o", "--rewrite-model", help="--rewriter server: the model name."),
        rewrite_url: str = typer.Option(None, "--rewrite-base-url", help="--rewriter server: the server's base URL."),
        rewrite_cache: Path = typer.Option(
            None, "--rewrite-cache", help="--rewriter server: the JSON cache (default OUT/../rewrites.json)."
        ),
        tokenizer: str = typer.Option(
            None,
            "--tokenizer",
            help="sft: count the prompts' tokens with this tokenizer (smollm2, or a model folder) into stats.json.",
        ),
        min_replans: int = typer.Option(
            0,
            "--min-replans",
            help="sft: repeat the re-plans after each error code that has fewer samples until it has this many.",
        ),
        exclude_seen: Path = typer.Option(
            None,
            "--exclude-prompts-of",
            help="sft: leave out samples whose prompt this built SFT set holds (a validation set of unseen prompts).",
        ),
        pair_kinds: str = typer.Option(
            "",
            "--pair-kinds",
            help="dpo: keep only these pair kinds, comma-separated (replan, model_change, order_change, "
            "action_change; default: all).",
        ),
        max_pairs_per_kind: int = typer.Option(
            0,
            "--max-pairs-per-kind",
            help="dpo: at most this many pairs of each kind, a fixed-seed uniform sample (0: all).",
        ),
    ) -> None:
        """Build EMMOE's SFT set or its DPO pairs (re-plan, model change, order change, action change)."""
        from homiebot.training.build import BuildOptions, build, check_out_dir
        from homiebot.training.episodes import TrainingDataError
        from homiebot.training.rewrite import Rewriter, ServerRewriter, TemplateRewriter

        if kind not in ("sft", "dpo"):
            fail(f"unknown data kind {kind!r}; use sft or dpo")
        if prompt_format not in ("runtime", "paper"):
            fail(f"unknown --prompt-format {prompt_format!r}; use runtime or paper")
        if rewriter not in ("template", "server"):
            fail(f"unknown --rewriter {rewriter!r}; use template or server")
        if min_replans < 0:
            fail(f"--min-replans must be >= 0, got {min_replans}")
        if max_pairs_per_kind < 0:
            fail(f"--max-pairs-per-kind must be >= 0, got {max_pairs_per_kind}")
        check_output(out)  # before the records are read: an output that cannot be written costs no work
        try:
            check_out_dir(out)
            chosen: Rewriter = TemplateRewriter()
            server: ServerRewriter | None = None
            if rewriter == "server":
                cache = rewrite_cache or out.expanduser().absolute().parent / "rewrites.json"
                chosen = server = ServerRewriter(rewrite_model, cache, base_url=rewrite_url)
            options = BuildOptions(
                prompt_format=prompt_format,  # type: ignore[arg-type]
                rewrites=rewrites,
                split=split,
                system_prompt=system_prompt,
                text_observation=text_observation,
                recorded_input=recorded_input,
                images=images,
                replan_from_execution_errors=replan_exec,
                thoughtless=thoughtless,
                episodes=episodes,
                compact_turns=compact_turns,
                tokenizer=tokenizer,
                min_replans=min_replans,
                exclude_seen=str(exclude_seen) if exclude_seen is not None else None,
                pair_kinds=tuple(k.strip() for k in pair_kinds.split(",") if k.strip()),
                max_pairs_per_kind=max_pairs_per_kind,
            )
            stats = build(runs, out, kind, options, chosen)  # type: ignore[arg-type]
            if server is not None:
                server.save()
        except (TrainingDataError, ValueError) as err:
            fail(str(err))
        for line in stats.lines():
            typer.echo(line)
        typer.echo(f"written to {out} in {stats.seconds:.1f} s")

    @data_app.command("check")
    def check_command(
        data: Path = typer.Option(..., "--from", help="A built SFT data set (the --out of homie data build sft)."),
        tokenizer: str = typer.Option(
            "smollm2", "--tokenizer", help="Count the prompts' tokens with this tokenizer (smollm2, or a model folder)."
        ),
        tokens: bool = typer.Option(True, "--tokens/--no-tokens", help="Count the prompts' tokens."),
        examples: int = typer.Option(5, "--examples", help="Ambiguous prompts to show."),
        against: Path = typer.Option(
            None, "--against", help="A training set: how many of these prompts it holds, and with another decision."
        ),
    ) -> None:
        """Prompts whose answers differ (ambiguity), prompt tokens (median, p95) and the mix of actions and re-plans."""
        from homiebot.training.data_check import (
            find_ambiguities,
            load_tokenizer,
            overlap,
            read_sft_dataset,
            sample_mix,
            token_lengths,
        )
        from homiebot.training.episodes import TrainingDataError

        if examples < 0:
            fail(f"--examples must be >= 0, got {examples}")
        try:
            samples, replans = read_sft_dataset(data.expanduser())
            report = find_ambiguities(samples, max_examples=examples)
            mix = sample_mix(samples, replans)
            shared = overlap(samples, read_sft_dataset(against.expanduser())[0]) if against is not None else None
            counted = token_lengths(samples, load_tokenizer(tokenizer), tokenizer) if tokens else None
        except TrainingDataError as err:
            fail(str(err))
        typer.echo(f"{data}: {report.samples} samples")
        for line in report.lines():
            typer.echo(line)
        typer.echo("  actions: " + ", ".join(f"{k} {v}" for k, v in mix["actions"].items()))
        typer.echo("  re-plans after: " + (", ".join(f"{k} {v}" for k, v in mix["replans_after"].items()) or "none"))
        if shared is not None:
            typer.echo(
                f"  prompts also in {against}: {shared.seen} of {shared.samples} samples; "
                f"with another decision there: {shared.seen_with_other_decision}"
            )
        if counted is not None:
            typer.echo(
                f"  prompt tokens ({counted.tokenizer}): median {counted.median:.0f}, p95 {counted.p95:.0f}, "
                f"max {counted.max}, mean {counted.mean}"
            )

    @data_app.command("export")
    def export_command(
        runs: list[Path] = typer.Option(..., "--from", help="Episode records (repeatable)."),
        out: Path = typer.Option(..., "--out", "-o", help="New (or empty) output folder."),
        split: str = typer.Option("train", "--split", help="train, test, validation or all."),
    ) -> None:
        """Write EMMOE's raw layout: OUT/<split>/<task>_run<r>/info.txt and the views (appendix B.3)."""
        from homiebot.training.episodes import TrainingDataError
        from homiebot.training.export import export_raw

        check_output(out)  # before the records are read
        try:
            count = export_raw(runs, out, split=split)
        except TrainingDataError as err:
            fail(str(err))
        typer.echo(f"{count} episodes exported to {out}")

    @data_app.command("collect")
    def collect_command(
        out: Path = typer.Option(..., "--out", "-o", help="New (or empty) output folder: OUT/episodes/<task>/run<r>/."),
        planner: str | None = typer.Option(
            None,
            "--planner",
            help="expert or perturbed-expert (decision errors injected, then re-planned); on muep, expert or "
            "searching-expert (it looks for what it has not seen). Default: the suite's, perturbed-expert for emmoe, "
            "expert for partnr and muep.",
            show_default=False,
        ),
        suite: str = typer.Option(
            "emmoe", "--suite",
            help="Task suite: emmoe (EMMOE-100's goal expert), partnr (the PARTNR expert) or muep (the text expert).",
        ),
        split: str = typer.Option("train", "--split", help="train, validation, test or all."),
        runs: int = typer.Option(
            1, "--runs", help="Episodes per task (run r uses seed task.seed + r + --seed-offset)."
        ),
        seed_offset: int | None = typer.Option(
            None, "--seed-offset",
            help="Added to every seed (new seeds for training data). Default: the first that meets no evaluation's "
            "seed (runs 0-9 of every suite's tasks are reserved), which the summary states.", show_default=False,
        ),
        inject: float = typer.Option(
            0.04, "--inject", help="perturbed-expert: probability of a decision error per round."
        ),
        tasks: str = typer.Option(None, "--tasks", help="Comma-separated task ids (default: the whole split)."),
        images: bool = typer.Option(False, "--images/--no-images", help="Render and store the four views per round (slower)."),
        noise: str = typer.Option(
            "off", "--noise", help="Skill execution noise: off or emmoe (EMMOE table 4; E1/E2 failures and re-plans)."
        ),
        equally_good: bool = typer.Option(
            False, "--equally-good/--no-equally-good",
            help="Also record, per round, the subtasks the expert holds equally good (equally_good.jsonl), which "
            "benchmarks/offline_accuracy.py accepts beside the exact answer.",
        ),
    ) -> None:
        """Record expert episodes of EMMOE-100, the PARTNR-style suite or the MuEP-style suite as training data."""
        from homiebot.tasks.suite import MUEP_SUITE, TaskError, resolve_suite
        from homiebot.training.collect import collect_episodes, default_planner
        from homiebot.training.episodes import TrainingDataError

        try:
            if planner is None:
                planner = default_planner(suite)
            if resolve_suite(suite) == MUEP_SUITE:  # the text expert in the text world (homiebot.eval.muep_collect)
                from homiebot.eval.muep_collect import CollectionError, collect_muep

                emmoe_only = {f"--planner {planner}": planner not in ("expert", "searching-expert"),
                              "--inject": inject != 0.04, "--images": images, "--noise": noise != "off",
                              "--equally-good": equally_good}
                refused = [name for name, given in emmoe_only.items() if given]
                if refused:
                    fail(f"--suite muep records the text expert's episodes (--planner expert or searching-expert); "
                         f"{', '.join(refused)} {'is' if len(refused) == 1 else 'are'} not for it")
                try:
                    muep = collect_muep(out, split=split, runs=runs, seed_offset=seed_offset,
                                        task_ids=tasks.split(",") if tasks else None, planner=planner)
                except CollectionError as err:
                    fail(str(err))
                for line in muep.lines():
                    typer.echo(line)
                return
        except (TaskError, TrainingDataError) as err:
            fail(str(err))
        try:
            summary = collect_episodes(
                out,
                planner=planner,
                split=split,
                runs=runs,
                seed_offset=seed_offset,
                inject=inject,
                task_ids=tasks.split(",") if tasks else None,
                images=images,
                noise=noise,
                suite=suite,
                equally_good=equally_good,
            )
        except (TrainingDataError, ValueError) as err:
            fail(str(err))
        for line in summary.lines():
            typer.echo(line)

    @data_app.command("corrections")
    def corrections_command(
        out: Path = typer.Option(
            ..., "--out", "-o", help="New (or same-settings) folder: episodes/<task>/run<r>/, data/train.parquet."
        ),
        model: str = typer.Option("homiebot-smollm2", "--model", help="The student: a shipped model's name."),
        split: str = typer.Option("train", "--split", help="train, test or all."),
        tasks: str = typer.Option(None, "--tasks", help="Comma-separated task ids (default: the whole split)."),
        runs: int = typer.Option(1, "--runs", help="Episodes per task (run r: seed task.seed + --seed-offset + r)."),
        seed_offset: int = typer.Option(22, "--seed-offset", help="Added to every seed (an evaluation's are refused)."),
        noise: str = typer.Option("emmoe", "--noise", help="Skill execution noise: emmoe (EMMOE table 4) or off."),
        max_per_episode: int = typer.Option(3, "--max-per-episode", help="Correction rows per episode, at most."),
        max_rounds: int = typer.Option(20, "--max-rounds", help="Rounds per episode (EMMOE: 20)."),
        replay: Path = typer.Option(None, "--replay", help="An SFT episode data set to mix in (what the student learned)."),
        replay_episodes: int = typer.Option(0, "--replay-episodes", help="How many of its episodes to mix in."),
        takeover: int = typer.Option(
            None, "--takeover",
            help="Execute the student's first K mistakes, then the expert's answers from its next disagreement on: one "
                 "row per solved episode, the recovery played through (--max-per-episode then does not apply).",
        ),
    ) -> None:
        """DAgger's data for the shipped student: it plays (with noise), the expert labels every state it visits."""
        check_output(out)
        from homiebot.training.corrections import collect_corrections
        from homiebot.training.episodes import TrainingDataError

        try:
            summary = collect_corrections(
                out,
                model=model,
                split=split,
                task_ids=tasks.split(",") if tasks else None,
                runs=runs,
                seed_offset=seed_offset,
                noise=noise,
                max_per_episode=max_per_episode,
                max_rounds=max_rounds,
                replay=replay,
                replay_episodes=replay_episodes,
                takeover=takeover,
            )
        except (TrainingDataError, ValueError) as err:
            fail(str(err))
        for line in summary.lines():
            typer.echo(line)

    @data_app.command("skills")
    def skills_command(
        skill: str = typer.Option(
            ..., "--skill", help="The physical skill: pick, open, close (the arm moves the door) or go_to (base velocity)."
        ),
        # Not --episodes: that is a switch of homie data build and homie report (one flag, one meaning).
        episodes: int = typer.Option(..., "--count", "-n", help="Episodes to record (one skill execution each)."),
        out: Path = typer.Option(..., "--out", "-o", help="New (or empty) folder: the LeRobot data set's root."),
        split: str = typer.Option(
            "train",
            "--split",
            help="train (seeds from 0) or eval (held-out placements: seeds from 1000000, never in training data); "
                 "either skips the scene seeds an evaluation plays.",
        ),
        first_seed: int = typer.Option(
            None, "--first-seed",
            help="The first seed (default: the split's first); the seeds an evaluation plays are skipped.",
        ),
        size: int = typer.Option(96, "--size", help="Camera images' side in pixels (head and wrist, or head and goal)."),
        video: bool = typer.Option(
            False, "--video/--no-video", help="Store the cameras as MP4 video (AV1) instead of PNG images (the default)."
        ),
        cameras: str = typer.Option(
            None, "--cameras",
            help="The arm skills' cameras, comma-separated: head, wrist (default both), e.g. --cameras wrist.",
        ),
        mark_target: bool = typer.Option(
            False, "--mark-target/--no-mark-target",
            help="Tint the skill's target in each camera's image (from the simulator's segmentation; the images are "
                 "then <camera>_marked).",
        ),
    ) -> None:
        """Run a physical skill over varied placements, objects and scenes; write a LeRobot data set (one episode per
        execution: camera images, joint states, joint targets, task text, success; failures marked)."""
        from homiebot.data.skill_datasets import (
            SKILLS,
            EpisodeRecord,
            SkillDataError,
            check_out,
            first_seed_of,
            image_names,
            record_skill_dataset,
            require_lerobot,
            seed_problem,
        )

        if skill not in SKILLS:
            fail(f"unknown --skill {skill!r}; use one of {', '.join(SKILLS)}")
        if episodes <= 0:
            fail(f"--count must be positive, got {episodes}")
        try:
            first_seed_of(split)
        except SkillDataError as err:
            fail(str(err))
        chosen = None if cameras is None else tuple(c.strip() for c in cameras.split(",") if c.strip())
        try:
            image_names(skill, chosen, mark_target)
        except SkillDataError as err:
            fail(str(err))
        problem = seed_problem(first_seed, split) if first_seed is not None else None
        if problem is not None:
            fail(f"--first-seed: {problem}")
        check_output(out)
        try:
            check_out(out)
        except SkillDataError as err:
            fail(str(err))
        try:
            require_lerobot()
        except SkillDataError as err:
            fail(str(err), EXIT_ENVIRONMENT)

        def progress(record: EpisodeRecord) -> None:
            if record.skipped:
                typer.echo(f"seed {record.seed}: skipped ({record.skipped})", err=True)
            else:
                outcome = "success" if record.success else f"failed, {record.emmoe_code}: {record.detail}"
                typer.echo(f"episode {record.episode_index} (seed {record.seed}, {record.scene}): {record.task}: "
                           f"{outcome} ({record.frames} frames)", err=True)

        try:
            summary = record_skill_dataset(skill, episodes, out, split=split, first_seed=first_seed, size=size,
                                           video=video, progress=progress, cameras=chosen, mark_target=mark_target)
        except SkillDataError as err:
            fail(str(err))
        for line in summary.lines():
            typer.echo(line)
