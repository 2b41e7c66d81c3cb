"""``homie train ...``: planner training on trl and peft (docs/training.md).

* ``homie train base --model smollm2 --out DIR``: a bundled GGUF model as a trainable float folder;
* ``homie train sft --data DIR --model DIR --out ADAPTER``: stage one (LoRA SFT);
* ``homie train merge --model DIR --adapter ADAPTER --out DIR``: the SFT model for stage two;
* ``homie train dpo --data DIR --model DIR --out ADAPTER``: stage two (LoRA DPO, the model as its reference);
* ``homie train gguf --model DIR [--adapter ADAPTER] --out FILE``: a trained folder as GGUF for llama.cpp;
* ``homie train skill --data DIR --policy act --out DIR``: a LeRobot policy for a physical skill, from the data sets
  of ``homie data skills`` (docs/skill-data.md, "Training a skill policy").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, check_output, fail
from homiebot.cli.options import deprecated, hidden
from homiebot.config import MAX_ROUNDS


@dataclass(frozen=True)
class _Piece:
    """homie train sft's options for a run in pieces, with validation and several processes (None: the preset's)."""

    val: Path | None = None
    eval_steps: int | None = None
    val_limit: int | None = None
    stop_after_steps: int | None = None
    hours: float | None = None
    processes: int | None = None
    epochs: float | None = None
    max_memory_gb: float | None = None
    init_adapter: Path | None = None
    sft_weight: float | None = None  # DPO only


def _train(
    stage: Literal["sft", "dpo"],
    data: list[Path],
    model: Path,
    out: Path,
    preset: str,
    max_steps: int | None,
    resume: bool,
    learning_rate: float | None,
    batch_size: int | None,
    max_length: int | None,
    lora: bool,
    ref_model: Path | None,
    warmup_steps: int | None,
    piece: _Piece | None = None,
) -> None:
    # The output first: an unwritable --out is refused before the data set is read and the model loaded.
    check_output(out)
    from homiebot.training.episodes import TrainingDataError
    from homiebot.training.progress import StopRule
    from homiebot.training.trainer import TrainingError, check_data, preset_for, train

    piece = piece or _Piece()
    try:
        settings = preset_for(
            stage,
            preset,
            learning_rate=learning_rate,
            batch_size=batch_size,
            max_length=max_length,
            lora=None if lora else False,
            warmup_steps=warmup_steps,
            epochs=piece.epochs,
            processes=piece.processes,
            eval_steps=piece.eval_steps,
            val_limit=piece.val_limit,
            sft_weight=piece.sft_weight,
        )
        for one in data:
            check_data(one)
        if piece.val is not None:
            check_data(piece.val)
        result = train(
            stage,
            data,
            model,
            out,
            settings,
            max_steps=max_steps,
            resume=resume,
            ref_model=ref_model,
            val_data=piece.val,
            stop=StopRule(piece.stop_after_steps, piece.hours, piece.max_memory_gb),
            init_adapter=piece.init_adapter,
        )
    except (TrainingError, TrainingDataError) as err:
        fail(str(err))
    for line in result.lines():
        typer.echo(line)


def _check_piece_limits(hours: float | None, max_memory: float | None) -> None:
    """One line and exit 2 for a piece limit that could never be reached (before the data and model load)."""
    if hours is not None and hours <= 0:
        fail(f"--hours must be more than 0, got {hours}")
    if max_memory is not None and max_memory <= 0:
        fail(f"--max-memory must be more than 0 GB, got {max_memory}")


def register(app: typer.Typer) -> None:
    """Add ``homie train``."""
    train_app = typer.Typer(
        help="Train a planner (EMMOE's SFT then DPO, on trl + peft) or a skill policy (LeRobot's ACT).",
        no_args_is_help=True,
    )
    app.add_typer(train_app, name="train")

    data_option = typer.Option(
        ...,
        "--data",
        help="A data set folder from homie data build or homie data corrections (or its parquet file); repeatable: "
        "the sets are concatenated (one form: episodes or single rounds).",
    )
    model_option = typer.Option(..., "--model", help="A transformers model folder (homie train base writes one).")
    out_option = typer.Option(..., "--out", "-o", help="Output folder: the adapter, checkpoints/, training.json.")
    preset_option = typer.Option(
        "cpu-small",
        "--preset",
        help="cpu (SFT to convergence on 2 CPU cores: episode data, DDP, bf16), cpu-small (short runs, fp32) "
        "or emmoe (the paper's, GPUs).",
    )
    steps_option = typer.Option(
        None, "--max-steps", min=1, help="Stop after this many optimizer steps, at least 1 (default: one epoch)."
    )
    resume_option = typer.Option(False, "--resume", help="Continue the run in --out from its newest checkpoint.")
    lr_option = typer.Option(None, "--lr", help="Learning rate (default: the preset's).")
    batch_option = typer.Option(None, "--batch-size", help="Samples per device and step (default: the preset's).")
    length_option = typer.Option(None, "--max-length", help="Tokens per sample (default: the preset's).")
    lora_option = typer.Option(True, "--lora/--full", help="LoRA adapter (default) or all weights.")
    warmup_option = typer.Option(
        None,
        "--warmup-steps",
        help="Linear warm-up steps (the first trains at lr 0); default: the preset's (cpu-small 0, emmoe/emma 3%).",
    )

    hours_option = typer.Option(
        None, "--hours", help="End this piece after this many hours of wall time, with a checkpoint."
    )
    memory_option = typer.Option(
        None,
        "--max-memory",
        help="End this piece with a checkpoint once a training process holds this many GB resident (a fresh "
        "piece, --resume, starts small again).",
    )

    @train_app.command("sft")
    def sft_command(
        data: list[Path] = data_option,
        model: Path = model_option,
        out: Path = out_option,
        preset: str = preset_option,
        max_steps: int = steps_option,
        resume: bool = resume_option,
        lr: float = lr_option,
        batch_size: int = batch_option,
        max_length: int = length_option,
        lora: bool = lora_option,
        warmup_steps: int = warmup_option,
        val: Path = typer.Option(
            None,
            "--val",
            help="A held-out SFT data set (seeds never trained on): offline next-subtask accuracy and answer NLL "
            "per epoch (or --eval-steps) into OUT/metrics.jsonl and OUT/accuracy.png.",
        ),
        eval_steps: int = typer.Option(
            None, "--eval-steps", min=1, help="Validate every this many optimizer steps (default: each epoch)."
        ),
        val_limit: int = typer.Option(
            None, "--val-limit", min=1, help="Validation answers scored each time (default: the preset's, 200)."
        ),
        stop_after_steps: int = typer.Option(
            None,
            "--stop-after-steps",
            min=1,
            help="End this piece after this many steps with a checkpoint (--resume continues; the schedule is the "
            "whole run's).",
        ),
        hours: float = hours_option,
        processes: int = typer.Option(
            None,
            "--processes",
            min=1,
            help="Training processes (DDP over gloo on a CPU); default: the preset's (cpu: 2, others: 1).",
        ),
        epochs: float = typer.Option(None, "--epochs", help="Epochs (default: the preset's; --max-steps wins)."),
        max_memory: float = memory_option,
        init_adapter: Path = typer.Option(
            None,
            "--init-adapter",
            help="Continue this LoRA adapter of --model (e.g. the shipped one, on DAgger's corrections) instead of "
            "starting a new one.",
        ),
    ) -> None:
        """Stage one: supervised fine-tuning on the answers (completion-only loss); resumable in pieces."""
        _check_piece_limits(hours, max_memory)
        if epochs is not None and epochs <= 0:
            fail(f"--epochs must be more than 0, got {epochs}")
        piece = _Piece(
            val, eval_steps, val_limit, stop_after_steps, hours, processes, epochs, max_memory, init_adapter
        )
        _train(
            "sft", data, model, out, preset, max_steps, resume, lr, batch_size, max_length, lora, None, warmup_steps,
            piece,
        )

    @train_app.command("dpo")
    def dpo_command(
        data: list[Path] = data_option,
        model: Path = model_option,
        out: Path = out_option,
        preset: str = preset_option,
        max_steps: int = steps_option,
        resume: bool = resume_option,
        lr: float = lr_option,
        batch_size: int = batch_option,
        max_length: int = length_option,
        lora: bool = lora_option,
        ref_model: Path = typer.Option(None, "--ref-model", help="Reference model folder (default: --model itself)."),
        warmup_steps: int = warmup_option,
        init_adapter: Path = typer.Option(
            None,
            "--init-adapter",
            help="Continue this LoRA adapter of --model (the shipped SFT adapter) with DPO; a frozen copy of it is "
            "the reference (no merge needed).",
        ),
        hours: float = hours_option,
        max_memory: float = memory_option,
        sft_weight: float = typer.Option(
            None,
            "--sft-weight",
            help="Add the chosen answer's NLL with this weight to the DPO loss (RPO; 0: plain DPO, the default).",
        ),
    ) -> None:
        """Stage two: DPO (sigmoid loss, beta 0.1) on the merged SFT model, or on an SFT adapter continued
        (--init-adapter); resumable in pieces."""
        _check_piece_limits(hours, max_memory)
        if sft_weight is not None and sft_weight < 0:
            fail(f"--sft-weight must be 0 or more, got {sft_weight}")
        _train(
            "dpo",
            data,
            model,
            out,
            preset,
            max_steps,
            resume,
            lr,
            batch_size,
            max_length,
            lora,
            ref_model,
            warmup_steps,
            _Piece(hours=hours, max_memory_gb=max_memory, init_adapter=init_adapter, sft_weight=sft_weight),
        )

    @train_app.command("merge")
    def merge_command(
        model: Path = model_option,
        adapter: Path = typer.Option(..., "--adapter", help="The LoRA adapter folder to merge."),
        out: Path = typer.Option(..., "--out", "-o", help="New folder for the merged model."),
    ) -> None:
        """Merge a LoRA adapter into its base model (SFT -> DPO hand-over)."""
        check_output(out)  # before the model is loaded
        from homiebot.training.trainer import TrainingError, merge

        try:
            typer.echo(f"merged model: {merge(model, adapter, out)}")
        except TrainingError as err:
            fail(str(err))

    @train_app.command("gguf")
    def gguf_command(
        model: Path = model_option,
        adapter: Path = typer.Option(None, "--adapter", help="A LoRA adapter to merge in first."),
        out: Path = typer.Option(..., "--out", "-o", help="The GGUF file to write (float32 tensors)."),
    ) -> None:
        """Write a trained text folder as one GGUF file for llama.cpp (what -p runtime=llama_cpp does once)."""
        if out.exists():
            fail(f"{out} exists; choose another --out")
        from homiebot.planner.gguf_export import GGUFExportError, export_gguf

        try:
            summary = export_gguf(model, out, adapter=adapter)
        except GGUFExportError as err:
            fail(str(err))
        typer.echo(
            f"GGUF model: {summary.path} ({summary.tensors} tensors, {summary.parameters / 1e6:.1f} M parameters, "
            f"float32; tokenizer of {summary.template})"
        )

    @train_app.command("base")
    def base_command(
        model: str = typer.Option("smollm2", "--model", help="A bundled model name."),
        out: Path = typer.Option(..., "--out", "-o", help="New folder for the float model."),
    ) -> None:
        """Write a bundled (GGUF) model as a trainable transformers folder (float32)."""
        check_output(out)  # before the conversion (seconds, and progress bars) that an unwritable --out would waste
        from homiebot.training.trainer import TrainingError, materialize_base

        try:
            typer.echo(f"trainable model: {materialize_base(model, out)}")
        except TrainingError as err:
            fail(str(err))

    @train_app.command("pack")
    def pack_command(
        run: Path = typer.Option(..., "--from", help="A homie train output folder (its newest checkpoint is packed)."),
        out: Path = typer.Option(..., "--out", "-o", help="New folder: checkpoints/checkpoint-N to commit."),
    ) -> None:
        """Pack a run's newest checkpoint small enough to commit (optimizer moments in bfloat16); continue it
        elsewhere with `homie train sft --out DIR --resume`."""
        check_output(out)  # before the optimizer is read
        from homiebot.training.pack import pack_checkpoint
        from homiebot.training.trainer import TrainingError

        try:
            result = pack_checkpoint(run, out)
        except TrainingError as err:
            fail(str(err))
        for line in result.lines():
            typer.echo(line)

    @train_app.command("dagger")
    def dagger_command(
        model: Path = model_option,
        out: Path = typer.Option(..., "--out", "-o", help="New folder: iter<i>/ (data, adapter) and dagger.json."),
        tasks: str = typer.Option(..., "--tasks", help="Comma-separated EMMOE-100 task ids the student acts on."),
        eval_tasks: str = typer.Option(
            "", "--eval-tasks", help="Comma-separated task ids evaluated after each iteration."
        ),
        iterations: int = typer.Option(3, "--iterations", help="DAgger iterations (EMMA: 12 trials)."),
        max_rounds: int = typer.Option(MAX_ROUNDS, "--max-rounds", help=f"Rounds per episode (EMMOE: {MAX_ROUNDS})."),
        preset: str = typer.Option("cpu-small", "--preset", help="cpu-small or emma (EMMA's Table 2)."),
        steps: int = typer.Option(
            None,
            "--steps-per-iteration",
            min=0,
            help="DPO steps per iteration (default: the preset's epochs; 0: label and write the pairs, no training).",
        ),
        seed_offset: int | None = typer.Option(
            None,
            "--seed-offset",
            help="Student episodes of iteration i play scene seed task seed + offset + i (default 22: past the "
            "training data's offsets, docs/training.md); an evaluation's seeds are refused.",
        ),
        lr: float = typer.Option(None, "--lr", help="DPO learning rate (default: the preset's)."),
        warmup_steps: int = warmup_option,
        teacher_model: str = typer.Option(
            None,
            "--teacher-model",
            help="EMMA's LLM teacher on this model (a bundled name like smollm2, or a model folder): the hf "
            "planner as actor over the parallel text world, its model as critic, a memory of 3 plans. "
            "Default: the privileged expert (oracle).",
        ),
    ) -> None:
        """EMMA's DAgger loop with the DPO loss; the teacher is the privileged expert or an LLM (--teacher-model)."""
        from homiebot.training.dagger import DAGGER_SEED_OFFSET, run_dagger
        from homiebot.training.trainer import TrainingError, preset_for

        # Refused before run_dagger creates --out: a bad model folder or output path leaves nothing behind.
        try:
            settings = preset_for("dpo", preset, learning_rate=lr, warmup_steps=warmup_steps)
        except TrainingError as err:
            fail(str(err))
        check_output(out)
        if teacher_model is not None:  # a name or a folder, checked before the student's folder and any load
            from homiebot.planner.models import available_models, bundled_model

            if bundled_model(teacher_model) is None and not (Path(teacher_model) / "config.json").is_file():
                fail(
                    f"--teacher-model {teacher_model}: neither a bundled model ({', '.join(available_models())}) "
                    "nor a model folder (no config.json)"
                )
        if not (model / "config.json").is_file():
            fail(f"{model}: not a model folder (no config.json); homie train base --model smollm2 --out DIR writes one")
        teacher = None
        if teacher_model is not None:
            from homiebot.planner.hf_backend import HFPlanner
            from homiebot.training.teacher import LLMTeacher

            try:
                actor = HFPlanner(model=teacher_model, constrained=True, include_history=False, torch_threads=1)
            except ValueError as err:  # PlannerLoadError included: a bad folder or name, one line
                fail(f"--teacher-model: {err}")
            teacher = LLMTeacher(actor, critic=actor.engine)
        try:
            results = run_dagger(
                model,
                out,
                tasks=[t for t in tasks.split(",") if t],
                eval_tasks=[t for t in eval_tasks.split(",") if t],
                iterations=iterations,
                max_rounds=max_rounds,
                preset=settings,
                steps_per_iteration=steps,
                seed_offset=DAGGER_SEED_OFFSET if seed_offset is None else seed_offset,
                teacher=teacher,
            )
        except TrainingError as err:
            fail(str(err))
        finally:
            if teacher is not None:
                teacher.close()
        for r in results:
            typer.echo(
                f"iteration {r.iteration}: student solved {r.successes}/{r.episodes}, {r.new_pairs} new pairs "
                f"({r.pairs_total} in D), {r.train_steps} DPO steps, eval {r.eval_successes}/{r.eval_episodes}, "
                f"{r.seconds:.0f} s"
            )
            if r.teacher_states:
                typer.echo(
                    f"  teacher: {r.teacher_states - r.teacher_unparsed}/{r.teacher_states} states labelled; "
                    f"subtask equal to the expert's in {r.teacher_right}, action in {r.teacher_action_right} "
                    f"(the student's subtask in {r.student_right}); {len(r.reflections)} reflections"
                )

    @train_app.command("skill")
    def skill_command(
        data: list[Path] = typer.Option(
            ..., "--data", help="A skill data set from homie data skills (repeatable: e.g. open and close together)."
        ),
        out: Path = typer.Option(
            ..., "--out", "-o", help="New (or empty) folder: policy/, checkpoints/, metrics.jsonl, loss.png."
        ),
        policy: str = typer.Option("act", "--policy", help="LeRobot's policy type: act (the only one installed)."),
        skills: list[str] = typer.Option(
            None, "--skill", help="The policy's skill (repeatable); the data must be of it (default: the data's)."
        ),
        preset: str = typer.Option(
            "cpu", "--preset", help="ACT's size: cpu (chunk 20, 256 wide, 2 encoder layers) or tiny (a CI test's)."
        ),
        max_steps: int = typer.Option(2000, "--max-steps", help="Optimizer steps of the whole run."),
        batch_size: int = typer.Option(8, "--batch-size", help="Samples (frames with their action chunk) per step."),
        lr: float = typer.Option(1e-4, "--lr", help="Learning rate (AdamW, LeRobot's ACT preset otherwise)."),
        save_every: int = typer.Option(200, "--save-every", help="Checkpoint every this many steps (and at the end)."),
        seed: int = typer.Option(0, "--seed", help="Weights' initialisation and the order of the samples."),
        threads: int = typer.Option(1, "--threads", help="torch threads (1 or 2 on a 2-core machine)."),
        resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its newest checkpoint."),
        stop_after_steps: int = typer.Option(
            None,
            "--stop-after-steps",
            min=1,
            help="End this piece after this many steps with a checkpoint (--resume continues).",
        ),
        keep_failed: bool = typer.Option(
            False, "--keep-failed", help="Also train on failed episodes (default: successful ones only)."
        ),
        val: list[Path] = typer.Option(
            None,
            "--val",
            help="A held-out skill data set (homie data skills --split eval; repeatable): ACT's L1 on it at every "
            "checkpoint into OUT/metrics.jsonl and loss.png.",
        ),
    ) -> None:
        """Train a LeRobot policy (ACT, backbone from scratch, no download) for a physical skill on the CPU;
        resumable, with its loss curve (docs/skill-data.md)."""
        from homiebot.training.skills import (
            LeRobotMissing,
            SkillTrainingError,
            SkillTrainSettings,
            StepLog,
            check_out,
            check_skill_data,
            check_validation,
            require_lerobot,
            settings_problem,
            train_skill_policy,
        )

        settings = SkillTrainSettings(
            policy=policy, preset=preset, max_steps=max_steps, batch_size=batch_size, learning_rate=lr,
            save_every=save_every, seed=seed, threads=threads, keep_failed=keep_failed,
        )
        problem = settings_problem(settings)
        if problem is not None:
            fail(problem)
        # Everything is checked before --out is made (the output first, as every train command does): a refusal
        # leaves no folder and no partial checkpoint.
        check_output(out)
        try:
            checked = check_skill_data(data, skills or (), keep_failed)
            held_out = check_validation(val, checked) if val else None
        except SkillTrainingError as err:
            fail(str(err))
        try:
            target = check_out(out, resume)
            require_lerobot()
        except LeRobotMissing as err:
            fail(str(err), EXIT_ENVIRONMENT)
        except SkillTrainingError as err:
            fail(str(err))
        every = max(1, min(50, max_steps // 20))

        def progress(entry: StepLog) -> None:
            if entry.kind == "val":
                typer.echo(f"step {entry.step}/{entry.max_steps}: held-out L1 {entry.loss:.4f}", err=True)
            elif entry.step % every == 0 or entry.step == entry.max_steps or entry.step <= 1:
                typer.echo(f"step {entry.step}/{entry.max_steps}: loss {entry.loss:.4f}, {entry.seconds:.2f} s/step",
                           err=True)

        left_out = [f"{checked.dropped_failed} failed ones"] if checked.dropped_failed else []
        if checked.dropped_reserved:
            left_out.append(f"{checked.dropped_reserved} on scene seeds an evaluation plays")
        typer.echo(f"training on {sum(len(e) for e in checked.episodes)} episodes ({checked.frames} frames) of "
                   f"{'/'.join(checked.skills)}" + (f", {' and '.join(left_out)} left out" if left_out else ""),
                   err=True)
        try:
            result = train_skill_policy(checked, target, settings, resume=resume, stop_after_steps=stop_after_steps,
                                        progress=progress, val=held_out)
        except SkillTrainingError as err:
            fail(str(err))
        for line in result.lines():
            typer.echo(line)

    @train_app.command("eval")
    def eval_command(
        model: Path = model_option,
        adapter: Path = typer.Option(None, "--adapter", help="A LoRA adapter to merge first."),
        sft: Path = typer.Option(None, "--sft", help="An SFT data set (homie data build sft --split test)."),
        dpo: Path = typer.Option(None, "--dpo", help="A DPO data set (homie data build dpo --split test)."),
        limit: int = typer.Option(None, "--limit", help="Score this many samples of each (a fixed random sample)."),
        json_out: Path | None = typer.Option(None, "--out", "-o", help="Also write the scores here (JSON)."),
        json_old: Path | None = hidden("--json"),
    ) -> None:
        """Offline scores on held-out data: answer NLL per token and DPO pair accuracy (no simulator)."""
        json_out = deprecated("--json", "--out", json_old, json_out)
        if json_out is not None:
            check_output(json_out, directory=False)  # before the model is loaded
        from homiebot.training.offline_eval import evaluate_offline, write_scores
        from homiebot.training.trainer import TrainingError

        try:
            scores = evaluate_offline(model, adapter=adapter, sft_data=sft, dpo_data=dpo, limit=limit)
        except TrainingError as err:
            fail(str(err))
        for line in scores.lines():
            typer.echo(line)
        if json_out is not None:
            write_scores(scores, json_out)
