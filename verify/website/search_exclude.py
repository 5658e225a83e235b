"""What the search plugin is given to index: a page's HTML without its `data-search-exclude` elements.

mkdocs-material's search plugin parses every page with Python's HTMLParser, tag by tag, only to skip
those elements: the proof's highlighted code (a span per token), the evidence box and the 30-second
answer were half of a build's time. Cut out here with one regular expression, they cost nothing. The cut
is also what the attribute promises: the plugin ends an exclusion at the first nested closing tag of
the same name (it compares elements by tag), so the rest of an evidence box was indexed after all.

hooks.py gives the plugin this text just before it runs and puts the page back just after.
"""

from __future__ import annotations

import functools
import re

OPENING = re.compile(r"<([a-zA-Z][a-zA-Z0-9-]*)(?=[\s>])[^>]*?\sdata-search-exclude(?=[\s=>/])[^>]*>")
# What the plugin itself removes from the page after indexing it (material/plugins/search/plugin.py).
PLUGIN_ATTRIBUTES = re.compile(r"\s?data-search-\w+=\"[^\"]+\"")


@functools.lru_cache(maxsize=32)
def same_tag(tag: str) -> re.Pattern:
    return re.compile(rf"<(/?){tag}(?=[\s>/])[^>]*>", re.I)


def without_excluded(html: str) -> str:
    """The HTML with every element that carries `data-search-exclude` (and all inside it) removed: from its
    opening tag to the closing tag that balances it (the elements we mark hold no raw '<' of that tag)."""
    if "data-search-exclude" not in html:
        return html
    kept, position = [], 0
    while True:
        opening = OPENING.search(html, position)
        if opening is None:
            break
        kept.append(html[position:opening.start()])
        depth, end = 1, len(html)
        for match in same_tag(opening.group(1).lower()).finditer(html, opening.end()):
            depth += -1 if match.group(1) else 1
            if depth == 0:
                end = match.end()
                break
        position = end
    kept.append(html[position:])
    return "".join(kept)


def before_indexing(page) -> None:
    if page.content is None:
        return
    page._search_exclude_original = page.content
    page.content = without_excluded(page.content)


def after_indexing(page) -> None:
    original = getattr(page, "_search_exclude_original", None)
    if original is not None:
        page.content = PLUGIN_ATTRIBUTES.sub("", original)
        del page._search_exclude_original
