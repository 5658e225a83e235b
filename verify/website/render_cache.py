"""Rendered pages (and their search entries) kept by the hash of everything that shapes them, so a build
converts and indexes only what changed.

Markdown conversion (highlighting every snippet shown, the admonitions, the tables) is half of a build,
and a page's HTML depends on nothing but its Markdown (after the hooks), the Markdown settings, the
libraries' versions, where the page goes and where every other file goes (its links). So `install()`
wraps mkdocs' `Page.render`: when all of that hashes to a kept result, the page takes it; otherwise it
renders and, if rendering logged no warning (a warning must show, and fail a strict build, every time),
keeps what it produced. Notebook pages (mkdocs-jupyter) render their own way and are left alone.
Indexing a page for search (parsing its HTML, segmenting its Chinese) is a fifth of what is left; its
entries depend on the HTML, the table of contents, the title, tags and boost, and the search settings, and
are kept the same way.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import importlib.metadata
import logging
import os
import pickle
import tempfile

from material.plugins.search.plugin import SearchIndex
from mkdocs.structure.pages import Page

from verify.paths import CACHE_DIR

FOLDER = CACHE_DIR / "pages"
RENDERED = ("content", "toc", "_title_from_render", "present_anchor_ids", "links_to_anchors")
LIBRARIES = ("mkdocs", "markdown", "pymdown-extensions", "pygments", "mkdocs-material")
_plain_render = Page.render
_plain_indexing = SearchIndex.add_entry_from_context
_files_signatures: dict[int, tuple[int, str]] = {}


def install() -> None:
    Page.render = cached_render
    SearchIndex.add_entry_from_context = cached_indexing


@functools.lru_cache(maxsize=1)
def library_versions() -> tuple[str, ...]:
    # read once per build: every page's key needs them, and each lookup reads package metadata from disk
    return tuple(importlib.metadata.version(name) for name in LIBRARIES)


def settings_signature(config) -> str:
    versions = library_versions()
    shaping = (config["markdown_extensions"], config["mdx_configs"], config["use_directory_urls"],
               config["site_url"], config["docs_dir"], config["validation"])  # fmt: skip
    return repr((versions, shaping))


def files_signature(files) -> str:
    """Where every file goes: a link's HTML depends on its target's URL (and on whether it exists)."""
    known = _files_signatures.get(id(files))
    if known is None or known[0] != len(files):
        places = sorted((f.src_uri, f.dest_uri, f.url) for f in files)
        known = (len(files), hashlib.sha256(repr(places).encode()).hexdigest())
        _files_signatures[id(files)] = known
    return known[1]


def key_of(page: Page, config, files) -> str:
    digest = hashlib.sha256()
    for part in (page.markdown, page.file.src_uri, page.file.dest_uri, page.file.url,
                 settings_signature(config), files_signature(files)):  # fmt: skip
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


class WarningCount(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):
        self.count += 1


@contextlib.contextmanager
def counting_warnings():
    counter, logger = WarningCount(), logging.getLogger("mkdocs")
    logger.addHandler(counter)
    try:
        yield counter
    finally:
        logger.removeHandler(counter)


def cached_render(page: Page, config, files) -> None:
    if type(page) is not Page or page.markdown is None:
        return _plain_render(page, config, files)
    path = FOLDER / f"{key_of(page, config, files)}.pickle"
    try:
        kept = pickle.loads(path.read_bytes())
        links = kept.pop("links_to_anchors", None)
        if links is not None:  # kept by the linked file's path: its File object is this build's own
            kept["links_to_anchors"] = {files.get_file_from_path(src): anchors for src, anchors in links.items()}
        if None in kept.get("links_to_anchors", {}):
            raise KeyError("a linked file is gone")
        for name, value in kept.items():
            setattr(page, name, value)
        return None
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, KeyError):
        pass  # not kept yet, or unreadable: render it
    with counting_warnings() as warnings:
        _plain_render(page, config, files)
    if warnings.count == 0:
        state = {name: getattr(page, name) for name in RENDERED if hasattr(page, name)}
        if "links_to_anchors" in state:
            state["links_to_anchors"] = {file.src_uri: anchors for file, anchors in state["links_to_anchors"].items()}
        keep(path, state)
    return None


def keep(path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as out:
        pickle.dump(state, out, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(out.name, path)  # atomic: a build that is stopped leaves no half-written page


def toc_signature(toc) -> list:
    return [(item.id, item.url, item.title, item.level, toc_signature(item.children)) for item in toc or []]


@functools.lru_cache(maxsize=8)
def file_digest(path: str | None) -> str:
    try:
        return hashlib.sha256(open(path, "rb").read()).hexdigest() if path else ""
    except OSError:
        return ""


def cached_indexing(index: SearchIndex, page) -> None:
    meta = page.meta
    shaping = json.dumps([page.content, page.url, page.title, toc_signature(page.toc), meta.get("title"),
                          meta.get("tags"), meta.get("search"), repr(sorted(index.config.items())),
                          file_digest(index.config.get("jieba_dict")), file_digest(index.config.get("jieba_dict_user")),
                          library_versions()], default=str, ensure_ascii=False)  # fmt: skip
    path = FOLDER / f"search-{hashlib.sha256(shaping.encode('utf-8')).hexdigest()}.json"
    try:
        index.entries.extend(json.loads(path.read_text(encoding="utf-8")))
        return None
    except (OSError, ValueError):
        pass
    first = len(index.entries)
    _plain_indexing(index, page)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as out:
        json.dump(index.entries[first:], out, ensure_ascii=False)
    os.replace(out.name, path)
    return None
