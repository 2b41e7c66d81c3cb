"""Building blocks of the report pages: escaping, embedded images, the page shell (CSS + the sort script), atomic writes.

The pages are plain HTML written with the standard library (``html.escape``) rather than a template engine:
they are a handful of fixed sections, and the core's dependencies stay as they are. Nothing in a page loads
from the network: styles and the table-sorting script are inline, images are ``data:`` URIs or files beside
the page (docs/reports.md).
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

#: Colours of the feedback badges: OK green, the error families of EMMOE appendix E.1 each their own.
CODE_COLOURS: dict[str, str] = {"OK": "#2e7d32", "L": "#8e24aa", "D": "#ef6c00", "F": "#c62828", "E": "#1565c0"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f4f5f7;color:#1d1f23}
header{background:#24292f;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px}header p{margin:4px 0 0;color:#c9d1d9;font-size:14px}
header nav{margin-top:6px;font-size:13px}header nav a{color:#9ecbff}
main{padding:16px 24px;max-width:1500px}
section{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:12px 16px;margin:0 0 16px}
h2{font-size:17px;margin:0 0 10px}h3{font-size:15px;margin:12px 0 6px}
table{border-collapse:collapse;font-size:13px;margin:4px 0 10px}
th,td{border:1px solid #d8dee4;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f2f4}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[data-dir=asc]::after{content:" \\25B2"}table.sortable th[data-dir=desc]::after{content:" \\25BC"}
.badge{display:inline-block;color:#fff;border-radius:3px;padding:1px 6px;font-weight:600;font-size:12px}
.ok{color:#2e7d32;font-weight:600}.fail{color:#c62828;font-weight:600}.muted{color:#6e7781}
.views{display:grid;grid-template-columns:repeat(4,minmax(0,200px));gap:6px}
.view{position:relative;width:200px;height:200px;background:#111;border-radius:4px;overflow:hidden}
.view img{width:200px;height:200px;display:block;image-rendering:pixelated}
.view span{position:absolute;left:4px;top:4px;background:rgba(0,0,0,.6);color:#fff;font-size:11px;padding:0 4px}
.view.missing{display:flex;align-items:center;justify-content:center;color:#aaa;font-size:12px}
.reaching{margin-top:6px;max-width:830px}.reaching .strip{display:flex;flex-wrap:wrap;gap:4px}
.reach{margin:0;width:150px;font-size:11px}.reach img{width:150px;display:block;border-radius:3px;margin-bottom:2px}
.reach figcaption{line-height:1.25;overflow-wrap:anywhere}
.round{display:grid;grid-template-columns:830px minmax(300px,1fr);gap:12px;border-top:1px solid #d8dee4;padding:10px 0}
.round:first-of-type{border-top:none}
pre{white-space:pre-wrap;background:#f6f8fa;border:1px solid #d8dee4;border-radius:4px;padding:6px;margin:4px 0;font-size:12px}
.pair{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}
.graph{max-height:640px;overflow:auto;border:1px solid #d8dee4;border-radius:4px}
img.map{max-width:512px;border:1px solid #d8dee4;border-radius:4px}
img.plot{max-width:100%;border:1px solid #d8dee4;margin:4px 0}
.kp{font-family:ui-monospace,monospace;font-size:12px}.kp .hit{background:#d7f5dd}.kp .miss{color:#6e7781}
"""

# Sorting: a click on a header sorts the rows by that column, numerically when both cells parse as numbers
# (a cell's data-sort attribute wins over its text), ascending on the first click, descending on the second.
# ``#sort=<column index>:<asc|desc>`` in the address applies a sort on load (a bookmark of a sorted view).
_SORT_JS = """
function homieSort(th, dir){
  const table = th.closest('table'), body = table.tBodies[0], col = th.cellIndex;
  if(!dir){ dir = th.dataset.dir === 'asc' ? 'desc' : 'asc'; }
  for(const other of th.parentNode.children){ delete other.dataset.dir; }
  th.dataset.dir = dir;
  const key = r => { const c = r.cells[col]; return c.dataset.sort !== undefined ? c.dataset.sort : c.textContent.trim(); };
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a), y = key(b), num = /^-?[0-9]+([.][0-9]+)?$/;
    const cmp = (num.test(x) && num.test(y)) ? parseFloat(x) - parseFloat(y)
      : x.localeCompare(y, undefined, {numeric: true});
    return dir === 'asc' ? cmp : -cmp;
  });
  for(const r of rows){ body.appendChild(r); }
}
document.addEventListener('click', e => {
  const th = e.target.closest('table.sortable th');
  if(th){ homieSort(th); }
});
window.addEventListener('load', () => {
  const m = location.hash.match(/^#sort=(\\d+):(asc|desc)$/);
  const table = document.querySelector('table.sortable');
  if(m && table){ homieSort(table.tHead.rows[0].cells[Number(m[1])], m[2]); }
});
"""


def esc(value: object) -> str:
    """HTML-escaped text of any value (``None`` shows as an em dash)."""
    return "\u2014" if value is None else html.escape(str(value), quote=True)


def png_data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def image_src(path: Path, page_dir: Path, embed: bool) -> str:
    """The ``src`` of an image file: embedded as a data URI, or its path relative to the page."""
    if embed:
        if path.suffix.lower() in (".jpg", ".jpeg"):
            return "data:image/jpeg;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        return png_data_uri(path.read_bytes())
    return html.escape(Path(os.path.relpath(path, page_dir)).as_posix(), quote=True)


def code_badge(code: str) -> str:
    colour = CODE_COLOURS.get(code, CODE_COLOURS.get(code[:1], "#555"))
    return f'<span class="badge" style="background:{colour}">{esc(code)}</span>'


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, css_class: str = "", escape: bool = True) -> str:
    """A table; cells are escaped unless ``escape`` is False (then they are trusted HTML built by this package)."""
    cls = f' class="{css_class}"' if css_class else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(c) if escape else c}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, subtitle: str, body: str, sections: Sequence[tuple[str, str]] = ()) -> str:
    """A whole HTML document around ``body`` (trusted HTML); ``sections``: (anchor, label) links under the title."""
    nav = " &middot; ".join(f'<a href="#{esc(anchor)}">{esc(label)}</a>' for anchor, label in sections)
    if nav:
        subtitle_html = f"<p>{esc(subtitle)}</p><nav>{nav}</nav>"
    else:
        subtitle_html = f"<p>{esc(subtitle)}</p>"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)}</title><meta name=\"viewport\" content=\"width=device-width\">"
        f"<style>{_CSS}</style></head><body><header><h1>{esc(title)}</h1>{subtitle_html}</header>"
        f"<main>{body}</main><script>{_SORT_JS}</script></body></html>\n"
    )

