"""``homie report`` on real records: what each page holds, that nothing loads from the network, and bad input."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from homiebot.data.record import read_episode, view_filename
from homiebot.eval.runner import compute_scores
from homiebot.report import REPORT_FILE, ReportError, write_report
from homiebot.types import VIEW_NAMES

pytestmark = pytest.mark.slow

HOMIE = [str(Path(sys.executable).with_name("homie"))]


class _Refs(HTMLParser):
    """Every src/href of a page, and the cells of its tables."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for key in ("src", "href"):
            if found.get(key):
                self.refs.append((tag, found[key] or "", found))


def _refs(html: str) -> list[tuple[str, str, dict[str, str | None]]]:
    parser = _Refs()
    parser.feed(html)
    return parser.refs


def _assert_offline(html: str) -> None:
    """No reference leaves the machine (no http(s), no protocol-relative URL); the page needs no network."""
    for tag, ref, _ in _refs(html):
        assert not re.match(r"^(https?:)?//", ref), f"<{tag}> loads {ref}"
    assert "@import" not in html


def _nav_targets(html: str) -> list[str]:
    """The anchors the header's section links point at, each checked to exist on the page."""
    nav = html.split("<nav>", 1)[1].split("</nav>", 1)[0]
    anchors = [ref[1:] for tag, ref, _ in _refs(nav) if tag == "a"]
    for anchor in anchors:
        assert html.count(f'id="{anchor}"') == 1, anchor
    return anchors


def test_episode_page_embeds_every_view_and_round(episode_record: Path) -> None:
    (page,) = write_report(episode_record)
    assert page == episode_record / REPORT_FILE
    html = page.read_text()
    _assert_offline(html)
    trajectory = read_episode(episode_record)
    images = [(attrs.get("alt") or "", ref) for tag, ref, attrs in _refs(html) if tag == "img"]
    for record in trajectory.rounds:
        for view in VIEW_NAMES:
            alt = f"{view} view, round {record.index}"
            (src,) = [ref for a, ref in images if a == alt]
            # The embedded bytes are the record's PNG itself.
            assert base64.b64decode(src.split(",", 1)[1]) == (episode_record / view_filename(record.index, view)).read_bytes()
        assert f'id="round{record.index}"' in html
        assert record.output.raw.splitlines()[-1] in html  # the whole answer, its Model line included
    assert html.count('class="round"') == len(trajectory.rounds) == 8
    assert "[Put, short_can, kitchen_drawer]" in html and "100.00% (1)" in html  # TP of a finished keypath
    assert 'alt="top-down map"' in html and "<svg" in html and 'class="world-graph"' in html
    # The graph draws the can where the episode left it.
    assert "short_can  (was on kitchen_counter)" in html
    video = ["video"] if (episode_record / "episode.mp4").is_file() else []
    assert _nav_targets(html) == ["outcome", "map", "timeline", *video]


def test_episode_page_can_link_images_instead(episode_record: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere" / "page.html"
    (page,) = write_report(episode_record, out, embed=False)
    srcs = [ref for tag, ref, _ in _refs(page.read_text()) if tag == "img"]
    assert srcs and not any(s.startswith("data:") for s in srcs)
    assert all((out.parent / s).resolve().is_file() for s in srcs)


def test_evaluation_page_tables_links_and_failures(random_evaluation: Path) -> None:
    pages = write_report(random_evaluation)
    index = pages[0]
    assert index == random_evaluation / REPORT_FILE
    scored = compute_scores(random_evaluation)
    assert len(pages) == 1 + len(scored.scores) == 5
    html = index.read_text()
    _assert_offline(html)
    for title in ("Table 2: overall", "Table 4: low-level execution per action", "Table H4", "Table H8"):
        assert title in html
    assert html.count('class="plot"') == 3
    assert _nav_targets(html) == ["tables", "plots", "tasks", "failures"]
    # Every run cell links to an existing episode page.
    per_task = html.split('<section id="tasks">', 1)[1].split("</section>", 1)[0]
    links = [ref for tag, ref, _ in _refs(per_task) if tag == "a"]
    assert len(links) == len(scored.scores)
    assert all((random_evaluation / link).is_file() for link in links)
    # Failures by code: one row per failed round, counts as the metrics count them.
    expected = {}
    for score in scored.scores:
        for code, n in score.errors.items():
            expected[code] = expected.get(code, 0) + n
    assert expected, "the random baseline should fail rounds"
    for code, n in expected.items():
        assert re.search(rf'id="code-{code}">.*?</span> {n} rounds in', html), code
    failed_links = [ref for tag, ref, _ in _refs(html) if tag == "a" and "#round" in ref]
    assert len(failed_links) == sum(expected.values())
    for link in failed_links:
        path, anchor = link.split("#")
        assert f'id="{anchor}"' in (random_evaluation / path).read_text()


def test_cli_writes_a_report_and_refuses_bad_input(episode_record: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy.html"
    done = subprocess.run([*HOMIE, "report", str(episode_record), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.is_file() and f"report: {out}" in done.stdout
    bad = subprocess.run([*HOMIE, "report", str(tmp_path / "missing")], capture_output=True, text=True)
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {tmp_path / 'missing'} is not a directory")
    plain = tmp_path / "plain"
    plain.mkdir()
    bad = subprocess.run([*HOMIE, "report", str(plain)], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert "neither an episode record" in bad.stderr and not any(plain.iterdir())


def test_corrupt_record_fails_without_a_partial_page(episode_record: Path, tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(episode_record, broken)
    (broken / REPORT_FILE).unlink(missing_ok=True)
    (broken / "rounds.jsonl").write_text('{"round": 1, "instruction": "x"\n')
    with pytest.raises(ReportError, match="not a readable episode record"):
        write_report(broken)
    assert not list(broken.glob("*.html")) and not list(broken.glob(".report.html*"))
    done = subprocess.run([*HOMIE, "report", str(broken)], capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_free_text_episode_has_no_tp(episode_record: Path, tmp_path: Path) -> None:
    import shutil

    free = tmp_path / "free"
    shutil.copytree(episode_record, free)
    summary = json.loads((free / "summary.json").read_text())
    summary.update(task=None, success=None, goal_satisfied=None)
    (free / "summary.json").write_text(json.dumps(summary))
    (page,) = write_report(free)
    assert "n/a (no task)" in page.read_text()


def test_planner_text_is_escaped(episode_record: Path, tmp_path: Path) -> None:
    import shutil

    hostile = tmp_path / "hostile"
    shutil.copytree(episode_record, hostile)
    lines = (hostile / "rounds.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["raw_output"] = "Analysis: <script>alert(1)</script> & <img src=x>\nSubtask: [Go to, kitchen_drawer]\nModel: NoMaD"
    (hostile / "rounds.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    html = write_report(hostile)[0].read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img src=x&gt;" in html
