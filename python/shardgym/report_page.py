"""The HTML page of `shardgym report` and `python -m shardgym.suite_report`: one stylesheet,
a table of contents built from the section headings, figures side by side where the window is
wide enough (two columns from about 1,200 px), every figure linked to its PDF and SVG.
"""
import html
import re

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
       max-width: 1500px; margin: 1.2em auto; padding: 0 1.2em; line-height: 1.4; }
h1 { margin-bottom: 0.2em; }
h2 { border-top: 2px solid #ddd; padding-top: 0.6em; margin-top: 1.6em; }
h3 { margin-top: 1.2em; }
nav.toc { background: #f5f5f5; border-radius: 6px; padding: 0.4em 1.2em; margin: 1em 0; }
nav.toc ul { margin: 0.2em 0; padding-left: 1.2em; }
nav.toc > ul { columns: 2 360px; }
nav.toc li { break-inside: avoid; }
.row { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr));
       gap: 1.2em 1.6em; align-items: start; }
figure { margin: 0 0 1em 0; }
figure.wide { grid-column: 1 / -1; }
figure img { width: 100%; height: auto; display: block; }
figcaption, .caption { font-size: 0.86em; color: #444; margin-top: 0.3em; }
.files { white-space: nowrap; }
.tablebox { overflow-x: auto; }
figure.wide + .tablebox { grid-column: 1 / -1; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.4em 0; }
td, th { border: 1px solid #ccc; padding: 2px 7px; }
th { background: #f5f5f5; }
td { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td small { color: #555; }
details { margin: 0.5em 0; } summary { cursor: pointer; color: #225; }
td:first-child { text-align: left; }
.note { color: #a00; font-size: 0.9em; }
.swatch { display: inline-block; width: 0.85em; height: 0.85em; border-radius: 2px;
          margin-right: 0.35em; vertical-align: -0.08em; }
.nowrap { white-space: nowrap; margin-right: 0.8em; }
a.top { float: right; font-size: 0.7em; font-weight: normal; }
"""

_HEADING = re.compile(r"<h([23]) id=[\"']([^\"']+)[\"']>(.*?)</h\1>", re.S)


class Anchors:
    """Unique, readable ids for headings."""

    def __init__(self):
        self.used = set()

    def __call__(self, text):
        base = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "section"
        slug, k = base, 2
        while slug in self.used:
            slug, k = f"{base}-{k}", k + 1
        self.used.add(slug)
        return slug


def toc(body):
    """A nested list of links to the h2 and h3 headings (with an id) of body."""
    items, open_sub = [], False
    for level, anchor, title in _HEADING.findall(body):
        title = re.sub(r"<[^>]+>", "", title).strip()
        link = f'<a href="#{html.escape(anchor)}">{title}</a>'
        if level == "2":
            if open_sub:
                items.append("</ul></li>")
            elif items:
                items.append("</li>")
            items.append(f"<li>{link}")
            open_sub = False
        else:
            if not open_sub:
                items.append("<ul>")
                open_sub = True
            items.append(f"<li>{link}</li>")
    if items:
        items.append("</ul></li>" if open_sub else "</li>")
    return f'<nav class="toc"><b>Contents</b><ul>{"".join(items)}</ul></nav>' if items else ""


def page(title, intro, body):
    """The whole document: title, intro, table of contents, body."""
    contents = toc(body)
    body = _HEADING.sub(lambda m: f'<h{m.group(1)} id="{m.group(2)}">{m.group(3)}'
                        + ('<a class="top" href="#top">contents</a>' if m.group(1) == "2"
                           else "") + f"</h{m.group(1)}>", body)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n"
            f'<body><h1 id="top">{html.escape(title)}</h1>\n{intro}\n{contents}\n{body}\n'
            f"</body></html>\n")
