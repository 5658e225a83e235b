"""Folded blocks (`??? "..."`: the follow-up answers, a proof's code, an evidence box's details) stay out of
the search index, so that search previews never print what a reader opens on purpose.

mkdocs-material's search leaves out any element with `data-search-exclude`. The body of each folded
`<details>` (not its `<summary>`, so a follow-up question is still found) is wrapped in a `<div>` that
carries it. Blocks written open (`???+`) are shown anyway and stay in the index.
"""

from __future__ import annotations

import re

TAG = re.compile(r"<details\b[^>]*>|</details>|</summary>")
OPEN = re.compile(r"\sopen(?:[\s=>]|$)")
WRAP = '<div class="folded" data-search-exclude>'


def hide_folded(html_text: str) -> str:
    out, last = [], 0
    stack: list[dict] = []  # one frame per <details> we are inside: is it folded, has its summary ended
    for match in TAG.finditer(html_text):
        tag = match.group(0)
        out.append(html_text[last:match.start()])
        last = match.end()
        if tag.startswith("<details"):
            stack.append({"folded": not OPEN.search(tag[len("<details"):]), "summary_done": False})
            out.append(tag)
        elif tag == "</summary>":
            out.append(tag)
            frame = stack[-1] if stack else None
            if frame and not frame["summary_done"]:
                frame["summary_done"] = True
                if frame["folded"]:
                    out.append(WRAP)
        else:  # </details>
            frame = stack.pop() if stack else None
            if frame and frame["folded"] and frame["summary_done"]:
                out.append("</div>")
            out.append(tag)
    out.append(html_text[last:])
    return "".join(out)
