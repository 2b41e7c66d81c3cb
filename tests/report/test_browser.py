"""The report pages in a real headless Chromium (Debian's package) over the DevTools protocol: every view slot
shows a decoded image with non-blank pixels in the screenshot, nothing is fetched from the network, and the
per-task table sorts when its headers are clicked.

Set ``HOMIE_SCREENSHOT_DIR`` to keep the screenshots (docs/reports.md says how the docs' ones were made).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from homiebot.report import write_report
from homiebot.report.browser import Browser, browser_missing

pytestmark = [pytest.mark.slow, pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))]

#: A view slot counts as showing an image when its pixels vary this much (a blank or single-colour slot: 0).
MIN_PIXEL_STD = 8.0


def _keep(name: str, png: bytes, tmp_path: Path) -> Image.Image:
    (tmp_path / name).write_bytes(png)
    if os.environ.get("HOMIE_SCREENSHOT_DIR"):
        Path(os.environ["HOMIE_SCREENSHOT_DIR"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["HOMIE_SCREENSHOT_DIR"]) / name).write_bytes(png)
    return Image.open(io.BytesIO(png)).convert("RGB")


def _offline(urls: list[str]) -> None:
    assert urls, "the browser recorded no request at all"
    assert all(u.startswith(("file:", "data:", "about:")) for u in urls), [u for u in urls if not u.startswith("file:")]


def test_episode_page_shows_every_view(episode_record: Path, tmp_path: Path) -> None:
    (page,) = write_report(episode_record)
    with Browser(width=1400) as browser:
        browser.open(page.as_uri())
        slots = browser.evaluate(
            """Array.from(document.querySelectorAll('.view')).map(v => {
                 const r = v.getBoundingClientRect(), img = v.querySelector('img');
                 return {view: v.dataset.view, x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height,
                         loaded: !!img && img.complete && img.naturalWidth > 0};
               })"""
        )
        shot = _keep("report_episode.png", browser.screenshot(), tmp_path)
        _offline(browser.requested_urls)
    assert len(slots) == 8 * 4 and all(s["loaded"] for s in slots)
    pixels = np.asarray(shot, dtype=np.float32)
    for slot in slots:
        x, y, w, h = (int(round(slot[k])) for k in ("x", "y", "w", "h"))
        crop = pixels[y + 20 : y + h, x : x + w]  # below the view's name label
        assert crop.size and crop.std(axis=(0, 1)).max() > MIN_PIXEL_STD, f"blank {slot['view']} slot at {x},{y}"
    # The page background around the slots is not what made them pass: an empty area of the header is flat.
    assert pixels[5:15, -200:-100].std(axis=(0, 1)).max() < 1.0


def test_evaluation_table_sorts_on_click(random_evaluation: Path, tmp_path: Path) -> None:
    write_report(random_evaluation)
    column = """(i => Array.from(document.querySelectorAll('table.per-task tbody tr')).map(r => r.cells[i].textContent.trim()))"""
    with Browser(width=1400) as browser:
        browser.open((random_evaluation / "report.html").as_uri())
        header = browser.evaluate("Array.from(document.querySelectorAll('table.per-task thead th')).map(h => h.textContent)")
        task_col, tp_col = header.index("task"), header.index("mean TP")
        before = browser.evaluate(f"{column}({task_col})")
        assert before == sorted(before) and len(before) == 2
        click = "document.querySelectorAll('table.per-task thead th')[{}].click()"
        browser.evaluate(click.format(task_col))
        browser.evaluate(click.format(task_col))  # second click: descending
        assert browser.evaluate(f"{column}({task_col})") == sorted(before, reverse=True)
        browser.evaluate(click.format(tp_col))
        tps = [float(v) for v in browser.evaluate(f"{column}({tp_col})")]
        assert tps == sorted(tps)
        browser.evaluate(click.format(tp_col))
        assert [float(v) for v in browser.evaluate(f"{column}({tp_col})")] == sorted(tps, reverse=True)
        plots = browser.evaluate("Array.from(document.querySelectorAll('img.plot')).map(i => i.naturalWidth)")
        assert len(plots) == 3 and all(w > 100 for w in plots)
        _keep("report_evaluation.png", browser.screenshot(), tmp_path)
        # An episode page of the evaluation links its images beside it: they load too.
        browser.evaluate("document.querySelector('table.per-task tbody a').click()")
        browser.wait_for_load()
        views = browser.evaluate(
            "Array.from(document.querySelectorAll('.view img')).map(i => i.complete && i.naturalWidth === 256)"
        )
        assert views and all(views)
        _offline(browser.requested_urls)
