"""Episode records: one directory per episode, written atomically, readable back into a Trajectory.

Layout (EMMOE appendix B/D names where the paper has them)::

    <episode>/
      subtask1_front.png subtask1_left.png subtask1_back.png subtask1_right.png   # views seen in round 1
      subtask2_front.png ...                                                        # ... every round
      conversation.json   # appendix D Conversations.save: ["USER:\\n{instruction}ASSISTANT:\\n{output}\\n", ...];
                          # for a model planner the chat its model was given (homiebot.planner.conversation.model_chat)
      rounds.jsonl        # one JSON object per round (_round_to_json; grounded_subtask only with a world graph;
                          # model_calls: what a model planner sent its model, message by message, and the answer)
      summary.json        # task, success, number of rounds, subtasks, error codes, ... (see finish())
      episode.mp4         # the four views of every round with the subtask and feedback written under them
      topdown.png         # the top-down map at the end (rooms, furniture, objects, the robot's path)
      subtask3_reach1_head.jpg subtask3_reach1_overview.jpg ...  # --skills physical with images: the arm reaching
      reaching.jsonl      # one JSON object per reaching moment: round, moment, stamp, label, files by camera

Atomicity: everything is written into a hidden sibling temp directory (``.<name>.tmp-XXXX``) and moved in
place with ``os.replace`` at :meth:`EpisodeRecorder.finish`. A crash or an abort leaves no episode
directory (the temp one is removed on abort, and a stale one never looks like an episode).
Re-recording onto an existing *episode* directory replaces it (moved aside, then deleted); an existing
non-empty directory that is not an episode record is refused.

Decision: ``summary.json``'s ``success`` is the episode's verdict (``verdict``: the suite's own evaluation,
the one ``homie metrics`` applies, :mod:`homiebot.eval.verdict`) when the recorder has a judge
(:meth:`EpisodeRecorder.judge_with`; every recorded task episode has one); without a judge it is
``ended and goal_satisfied`` for a task and ``null`` for a free-text instruction (no goal to check).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from homiebot.files import publish
from homiebot.types import (
    VIEW_NAMES,
    ErrorCode,
    Feedback,
    ModelCall,
    MotionFrame,
    Observation,
    PlannerOutput,
    RoundRecord,
    SentMessage,
    Subtask,
    Trajectory,
)

log = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"
ROUNDS_FILE = "rounds.jsonl"
CONVERSATION_FILE = "conversation.json"
VIDEO_FILE = "episode.mp4"
TOPDOWN_FILE = "topdown.png"
#: The reaching views of the physical skills (homiebot/sim/mujoco/motion_views.py): one line per moment.
MOTION_FILE = "reaching.jsonl"
#: Reaching moments kept per round at most (the last ones: a round of three tries keeps the last try's).
MAX_MOMENTS_PER_ROUND = 12
#: JPEG quality of a reaching frame (small frames; a report page embeds them).
MOTION_JPEG_QUALITY = 80
#: A played episode's own file (``homie play``: how it ended, the keys chosen; homiebot.play.episode).
PLAY_FILE = "play.json"
#: 2: rounds carry ``model_calls`` (a planner that asked no model has none); records of version 1 read back without.
FORMAT_VERSION = 2


class RecordError(RuntimeError):
    """An episode record cannot be written or read; the message names the path."""


def view_filename(round_index: int, view: str) -> str:
    """EMMOE's image name: ``subtask3_front.png``."""
    return f"subtask{round_index}_{view}.png"


def motion_filename(round_index: int, moment: int, camera: str) -> str:
    """A reaching frame's image: ``subtask3_reach2_overview.jpg`` (round 3, its second moment)."""
    return f"subtask{round_index}_reach{moment}_{camera}.jpg"


def read_motion_views(episode_dir: str | Path) -> dict[int, list[dict[str, Any]]]:
    """The reaching moments of a record by round (``reaching.jsonl``; empty without it), each
    ``{"round", "moment", "stamp", "label", "views": {camera: file}}``, in the order they were taken."""
    path = Path(episode_dir) / MOTION_FILE
    if not path.is_file():
        return {}
    moments: dict[int, list[dict[str, Any]]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            moments.setdefault(int(item["round"]), []).append(item)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise RecordError(f"{path}:{n}: invalid reaching moment: {err}") from None
    return moments


def check_output_dir(out_dir: str | Path) -> Path:
    """Validate an episode output path before running (so a bad path fails before the episode, not after).

    Raises :class:`RecordError` when the parent cannot be created or written, or when ``out_dir`` exists,
    is not empty and is not an episode record.
    """
    out = Path(out_dir).expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise RecordError(f"output path {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / SUMMARY_FILE).is_file():
        raise RecordError(f"output directory {out} is not empty and holds no episode record; refusing to overwrite it")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RecordError(f"cannot create {out.parent}: {err.strerror}") from None
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise RecordError(f"output directory {out.parent} is not writable")
    return out


def _round_to_json(record: RoundRecord, views: Sequence[str] = ()) -> dict[str, Any]:
    out = record.output
    sub = out.subtask
    return {
        "round": record.index,
        "instruction": record.instruction,
        "raw_output": out.raw,
        "analysis": out.analysis,
        "subtask": None if sub is None else {"action": sub.action, "target": sub.target, "place": sub.place},
        "subtask_text": record.subtask_text,
        "model": out.model,
        "parse_error": out.parse_error,
        "success": record.feedback.success,
        "signal": record.feedback.signal,
        "error_code": record.feedback.code.value,
        "feedback": record.feedback.message,
        "attempts": record.feedback.attempts,
        "inventory_before": list(record.inventory_before),
        "inventory": list(record.feedback.inventory),
        "path_length_m": record.path_length,
        "timings_s": dict(record.timings),
        **({} if record.grounded is None else {"grounded_subtask": {
            "action": record.grounded.action, "target": record.grounded.target, "place": record.grounded.place}}),
        # Every input of the round besides the instruction: the world description sent with it, and (with
        # images) the files of the four views it saw.
        **({} if record.world_description is None else {"world_description": record.world_description}),
        **({"views": list(views)} if views else {}),
        # The model input of the round: every call the planner made to its model, the messages exactly as sent.
        **({"model_calls": [_call_to_json(call, record.index, views) for call in record.model_calls]}
           if record.model_calls else {}),
    }


def _call_to_json(call: ModelCall, index: int, views: Sequence[str]) -> dict[str, Any]:
    """One model call: its messages (``role``, ``content``, and ``images`` by file name when the record holds the
    view, else by view name) and the answer."""
    messages = []
    for message in call.messages:
        item: dict[str, Any] = {"role": message.role, "content": message.text}
        if message.images:
            files = [view_filename(index, name) for name in message.images]
            item["images"] = [file if file in views else name for file, name in zip(files, message.images, strict=True)]
        messages.append(item)
    return {"messages": messages, "answer": call.answer}


def _call_from_json(data: dict[str, Any], index: int) -> ModelCall:
    by_file = {view_filename(index, view): view for view in VIEW_NAMES}
    return ModelCall(
        tuple(SentMessage(str(m["role"]), str(m["content"]), tuple(by_file.get(i, i) for i in m.get("images", ())))
              for m in data["messages"]),
        str(data["answer"]),
    )


def round_json(record: RoundRecord) -> dict[str, Any]:
    """One round as ``rounds.jsonl`` holds it (no view files), for a file that keeps other rounds beside the
    record's own (``play.json``'s partner rounds: the person's moves beside the robot, docs/play.md)."""
    return _round_to_json(record)


def _round_from_json(data: dict[str, Any]) -> RoundRecord:
    sub = data.get("subtask")
    output = PlannerOutput(
        raw=data["raw_output"],
        analysis=data.get("analysis", ""),
        subtask=None if sub is None else Subtask(sub["action"], sub.get("target"), sub.get("place")),
        model=data.get("model", ""),
        parse_error=data.get("parse_error"),
    )
    feedback = Feedback(
        code=ErrorCode(data["error_code"]),
        message=data["feedback"],
        inventory=tuple(data.get("inventory", ())),
        attempts=int(data.get("attempts", 0)),
    )
    grounded = data.get("grounded_subtask")
    return RoundRecord(
        grounded=None if grounded is None else Subtask(grounded["action"], grounded.get("target"), grounded.get("place")),
        index=int(data["round"]),
        instruction=data["instruction"],
        output=output,
        feedback=feedback,
        inventory_before=tuple(data.get("inventory_before", ())),
        path_length=float(data.get("path_length_m", 0.0)),
        timings=dict(data.get("timings_s", {})),
        world_description=data.get("world_description"),
        model_calls=tuple(_call_from_json(call, int(data["round"])) for call in data.get("model_calls", ())),
    )


def _caption_frame(views: Sequence[np.ndarray], names: Sequence[str], lines: Sequence[str], tile: int = 256) -> np.ndarray:
    """A 2x2 mosaic of the four views (front, left / back, right) with a caption band under it."""
    mosaic = Image.new("RGB", (2 * tile, 2 * tile + 48), (20, 20, 20))
    draw = ImageDraw.Draw(mosaic)
    for i, view in enumerate(views[:4]):
        img = Image.fromarray(np.asarray(view, dtype=np.uint8)).resize((tile, tile))
        x, y = (i % 2) * tile, (i // 2) * tile
        mosaic.paste(img, (x, y))
        label = names[i]
        draw.rectangle((x + 4, y + 4, x + 8 + 6 * len(label), y + 18), fill=(20, 20, 20))
        draw.text((x + 6, y + 5), label, fill=(235, 235, 235))
    for j, line in enumerate(lines[:3]):
        draw.text((6, 2 * tile + 3 + 15 * j), line[:90], fill=(235, 235, 235))
    return np.asarray(mosaic)


class EpisodeRecorder:
    """Writes one episode's record into ``out_dir`` atomically.

    ``images``: write the four PNGs per round; ``video``: write ``episode.mp4`` (needs imageio-ffmpeg);
    ``fps``: video frames per second (each round is shown ``frames_per_round`` frames).
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        images: bool = True,
        video: bool = True,
        fps: int = 2,
        frames_per_round: int = 2,
    ) -> None:
        self.out_dir = check_output_dir(out_dir)
        self.images = images
        self.video = video
        self.fps = fps
        self.frames_per_round = frames_per_round
        self._tmp: Path | None = None
        self._writer: Any = None
        self._rounds: list[RoundRecord] = []
        self._meta: dict[str, Any] = {}
        self._notes: dict[str, Any] = {}
        self._judge: Callable[[Trajectory], dict[str, Any]] | None = None
        self._moments: dict[int, list[dict[str, Any]]] = {}  # the reaching moments written, by round
        self._moment_count: dict[int, int] = {}
        #: The run configuration's JSON (homiebot.config.run.RunConfig.dump), kept in the summary as ``run`` so
        #: that ``homie run --config RECORD/summary.json`` repeats the episode's setting; None: not kept.
        self.run: Mapping[str, Any] | None = None

    # ------------------------------------------------------------------------------------ lifecycle

    def start(self, trajectory: Trajectory, scene_seed: int | None = None, config: Any = None) -> None:
        self._tmp = Path(tempfile.mkdtemp(prefix=f".{self.out_dir.name}.tmp-", dir=self.out_dir.parent))
        publish(self._tmp)  # mkdtemp makes it 0700; the record is renamed into place and keeps the umask's mode
        self._rounds = []
        self._notes = {}
        self._moments, self._moment_count = {}, {}
        self._meta = {
            "task": trajectory.task_id,
            "instruction": trajectory.instruction,
            "scene": trajectory.scene,
            "seed": trajectory.seed,
            "scene_seed": scene_seed,
            "planner": trajectory.planner,
            "config": _jsonable(config),
            **({} if self.run is None else {"run": dict(self.run)}),
        }

    def note(self, **fields: Any) -> None:
        """Extra episode facts for the summary and files (conversation, system prompt, opened furniture)."""
        self._notes.update(fields)

    def judge_with(self, judge: Callable[[Trajectory], dict[str, Any]]) -> None:
        """Who gives the episode's verdict when the summary is written (module docstring): ``judge(trajectory)``
        returns the verdict's JSON; its ``success`` is the summary's ``success``, the whole of it ``verdict``."""
        self._judge = judge

    def add_file(self, name: str, text: str, append: bool = False) -> None:
        """Write (or append to) one more file of the record before :meth:`finish` (an observer's
        ``states.jsonl``, docs/partnr.md); it moves into place with the rest, or is dropped with it on abort."""
        if self._tmp is None:
            raise RecordError("add_file() outside start() ... finish()")
        if not name or "/" in name or name.startswith(".") or name in (SUMMARY_FILE, ROUNDS_FILE, CONVERSATION_FILE):
            raise RecordError(f"{name!r} cannot be added to a record")
        with open(self._tmp / name, "a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)

    def add_round(self, record: RoundRecord, observation: Observation | None) -> None:
        """Store a round; its views are written at once (images are not kept in memory)."""
        if self._tmp is None:
            raise RecordError("add_round() before start()")
        self._rounds.append(record)
        if observation is None:
            return
        # A simulator built without rendering returns zero-size views: nothing to write then.
        present = [n for n in VIEW_NAMES if n in observation.views and observation.views[n].rgb.size > 0]
        views = [observation.views[n].rgb for n in present]
        if self.images:
            for name in present:
                Image.fromarray(observation.views[name].rgb).save(self._tmp / view_filename(record.index, name))
        if self.video and len(views) == 4:
            caption = [
                f"({record.index}) {record.subtask_text}  model: {record.output.model or '-'}",
                f"{record.feedback.code.value}: {record.feedback.message}",
                f"inventory: {' '.join(record.feedback.inventory) or 'None'}",
            ]
            frame = _caption_frame(views, present, caption)
            writer = self._video_writer()
            for _ in range(self.frames_per_round):
                writer.append_data(frame)

    def add_motion_frames(self, round_index: int, frames: Sequence[MotionFrame]) -> None:
        """Store the reaching views taken during round ``round_index`` (homiebot/sim/mujoco/motion_views.py) as
        JPEG images at once, only when the record keeps images; the round keeps its last
        :data:`MAX_MOMENTS_PER_ROUND` moments. ``reaching.jsonl`` is written by :meth:`finish`."""
        if self._tmp is None:
            raise RecordError("add_motion_frames() outside start() ... finish()")
        if not self.images:
            return
        kept = self._moments.setdefault(round_index, [])
        for frame in frames:
            present = [(name, view) for name, view in frame.views.items() if view.rgb.size > 0]
            if not present:
                continue
            moment = self._moment_count.get(round_index, 0) + 1
            self._moment_count[round_index] = moment
            files = {}
            for name, view in present:
                files[name] = motion_filename(round_index, moment, name)
                Image.fromarray(np.asarray(view.rgb, dtype=np.uint8)).save(
                    self._tmp / files[name], quality=MOTION_JPEG_QUALITY)
            kept.append({"round": round_index, "moment": moment, "stamp": round(float(frame.stamp), 3),
                         "label": frame.label, "views": files})
            while len(kept) > MAX_MOMENTS_PER_ROUND:
                for file in kept.pop(0)["views"].values():
                    (self._tmp / file).unlink(missing_ok=True)

    @staticmethod
    def _view_files(folder: Path, index: int) -> list[str]:
        """The view images stored for round ``index`` (the views the planner saw), by file name."""
        return [name for name in (view_filename(index, v) for v in VIEW_NAMES) if (folder / name).is_file()]

    def _video_writer(self) -> Any:
        if self._writer is None:
            import imageio.v2 as imageio

            assert self._tmp is not None
            self._writer = imageio.get_writer(
                str(self._tmp / VIDEO_FILE), fps=self.fps, codec="libx264", quality=7, macro_block_size=16,
                # ffmpeg's own log lines (e.g. on a full disk) would stand beside the command's one error line;
                # a failure still raises here and is reported by the command.
                ffmpeg_log_level="fatal",
            )
        return self._writer

    def abort(self) -> None:
        """Drop everything written so far."""
        self._close_video()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _close_video(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                self._writer = None

    def finish(self, trajectory: Trajectory, topdown: np.ndarray | None = None) -> Path:
        """Write the logs, summary and map, then move the episode into place. Returns its directory."""
        if self._tmp is None:
            raise RecordError("finish() before start()")
        tmp = self._tmp
        try:
            self._close_video()
            if topdown is not None:
                Image.fromarray(np.asarray(topdown, dtype=np.uint8)).save(tmp / TOPDOWN_FILE)
            with open(tmp / ROUNDS_FILE, "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(_round_to_json(record, self._view_files(tmp, record.index)), ensure_ascii=False) + "\n"
                              for record in self._rounds)
            conversation = self._notes.get("conversation")
            if conversation is None:
                conversation = [f"USER:\n{r.instruction}ASSISTANT:\n{r.output.raw}\n" for r in self._rounds]
            _write_json(tmp / CONVERSATION_FILE, conversation)
            if any(self._moments.values()):
                with open(tmp / MOTION_FILE, "w", encoding="utf-8") as fh:
                    fh.writelines(json.dumps(moment, ensure_ascii=False) + "\n"
                                  for index in sorted(self._moments) for moment in self._moments[index])
            _write_json(tmp / SUMMARY_FILE, self._summary(trajectory))
            self._move_into_place(tmp)
        except BaseException:
            self.abort()
            raise
        self._tmp = None
        return self.out_dir

    def _summary(self, trajectory: Trajectory) -> dict[str, Any]:
        success = None
        verdict = self._judge(trajectory) if self._judge is not None else None
        if verdict is not None:
            success = verdict["success"]
        elif trajectory.goal_satisfied is not None:
            success = bool(trajectory.ended and trajectory.goal_satisfied)
        return {
            "format_version": FORMAT_VERSION,
            **self._meta,
            "success": success,
            **({} if verdict is None else {"verdict": verdict}),
            "ended": trajectory.ended,
            "goal_satisfied": trajectory.goal_satisfied,
            "num_rounds": len(trajectory.rounds),
            "subtasks": [r.subtask_text for r in trajectory.rounds],
            "models": [r.output.model for r in trajectory.rounds],
            "error_codes": [r.feedback.code.value for r in trajectory.rounds],
            "feedback": [r.feedback.message for r in trajectory.rounds],
            "path_length_m": trajectory.path_length,
            "wall_time_s": trajectory.wall_time_s,
            "error": trajectory.error,
            "stopped": trajectory.stopped,
            "opened": self._notes.get("opened", []),
            "system_prompt": self._notes.get("system_prompt"),
            "files": {
                "views": [view_filename(r.index, v) for r in trajectory.rounds for v in VIEW_NAMES]
                if self.images
                else [],
                "rounds": ROUNDS_FILE,
                "conversation": CONVERSATION_FILE,
                "video": VIDEO_FILE if (tmp_has(self._tmp, VIDEO_FILE)) else None,
                "topdown": TOPDOWN_FILE if (tmp_has(self._tmp, TOPDOWN_FILE)) else None,
                "reaching": MOTION_FILE if any(self._moments.values()) else None,
            },
        }

    def _move_into_place(self, tmp: Path) -> None:
        out = self.out_dir
        if out.exists():
            if any(out.iterdir()) and not (out / SUMMARY_FILE).is_file():
                raise RecordError(f"{out} appeared and is not an episode record; the new record is not written")
            # Replace an earlier episode: move it aside (atomic rename), move the new one in, delete the old.
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / "episode")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
        log.info("episode record written to %s", out)


def tmp_has(directory: Path | None, name: str) -> bool:
    return directory is not None and (directory / name).is_file()


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "value"):  # enums
        return _jsonable(value.value)
    return repr(value)


def _write_json(path: Path, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
        fh.write("\n")


# ---------------------------------------------------------------------------------------------- reading


def read_summary(episode_dir: str | Path) -> dict[str, Any]:
    path = Path(episode_dir) / SUMMARY_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{episode_dir} is not an episode record (no {SUMMARY_FILE})") from None
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}: invalid JSON: {err}") from None


def read_episode(episode_dir: str | Path) -> Trajectory:
    """Rebuild the :class:`Trajectory` of a recorded episode from its files alone (for offline metrics)."""
    episode_dir = Path(episode_dir)
    summary = read_summary(episode_dir)
    rounds: list[RoundRecord] = []
    path = episode_dir / ROUNDS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise RecordError(f"{episode_dir}: missing {ROUNDS_FILE}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rounds.append(_round_from_json(json.loads(line)))
        except (json.JSONDecodeError, KeyError, ValueError) as err:
            raise RecordError(f"{path}:{n}: invalid round: {err}") from None
    return Trajectory(
        task_id=summary.get("task"),
        instruction=summary["instruction"],
        scene=summary["scene"],
        seed=int(summary.get("seed", 0)),
        planner=summary.get("planner", ""),
        rounds=rounds,
        ended=bool(summary.get("ended", False)),
        goal_satisfied=summary.get("goal_satisfied"),
        path_length=float(summary.get("path_length_m", 0.0)),
        wall_time_s=float(summary.get("wall_time_s", 0.0)),
        error=summary.get("error"),
        stopped=summary.get("stopped"),
    )

