"""The excerpts of Accelerate's docs that the official-docs proofs run are the docs' own text.

snippets/official-docs/_doc_excerpts.py holds each excerpt with its file and lines at two refs of
huggingface/accelerate. When a git mirror of that repository is present (ACCELERATE_GIT_DIR, or the path the
`fetch` tool writes), every excerpt must equal those lines at both refs; without a mirror the test skips, and the
proofs still run offline on the vendored text.
"""

import functools
import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GIT_DIR = Path(os.environ.get("ACCELERATE_GIT_DIR", "/work/.mirror/huggingface+accelerate/repo"))


def load_excerpts():
    spec = importlib.util.spec_from_file_location("_doc_excerpts", ROOT / "snippets/official-docs/_doc_excerpts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXCERPTS = load_excerpts()


@functools.lru_cache(maxsize=None)
def git_show(ref: str, path: str):
    return subprocess.run(
        ["git", f"--git-dir={GIT_DIR}", "show", f"{ref}:{path}"], capture_output=True, text=True, check=False
    )


def show(ref: str, path: str) -> list:
    result = git_show(ref, path)
    if result.returncode != 0:
        pytest.skip(f"{ref}:{path} is not in the mirror at {GIT_DIR}")
    return result.stdout.split("\n")


def test_every_excerpt_names_its_lines_at_both_refs():
    for key, excerpt in EXCERPTS.EXCERPTS.items():
        count = excerpt["text"].count("\n") + 1
        for ref in ("main", "v1.14.0"):
            first, last = excerpt[ref]
            assert last - first + 1 == count, f"{key}: lines {first}-{last} at {ref} for {count} lines of text"
        assert excerpt["path"].startswith("docs/source/"), key


@pytest.mark.skipif(not GIT_DIR.is_dir(), reason=f"no mirror of huggingface/accelerate at {GIT_DIR}")
@pytest.mark.parametrize("ref", ["main", "v1.14.0"])
@pytest.mark.parametrize("key", sorted(EXCERPTS.EXCERPTS))
def test_excerpt_is_the_docs_text(key, ref):
    excerpt = EXCERPTS.EXCERPTS[key]
    commit = EXCERPTS.MAIN_COMMIT if ref == "main" else EXCERPTS.TAG
    lines = show(commit, excerpt["path"])
    first, last = excerpt[ref]
    assert "\n".join(lines[first - 1 : last]) == excerpt["text"], f"{key} differs from {commit}:{excerpt['path']}"


def regenerate(path=ROOT / "snippets/official-docs/_doc_excerpts.py"):
    """Rewrite the excerpts file from the mirror: each excerpt's lines on MAIN_COMMIT, found again at TAG.

    Run `python tests/test_doc_excerpts.py` after changing an excerpt's path or main lines in that file.
    """
    import pprint

    excerpts = {}
    for key, excerpt in EXCERPTS.EXCERPTS.items():
        first, last = excerpt["main"]
        text = "\n".join(show_or_fail(EXCERPTS.MAIN_COMMIT, excerpt["path"])[first - 1 : last])
        tagged = show_or_fail(EXCERPTS.TAG, excerpt["path"])
        count = last - first + 1
        hits = [i + 1 for i in range(len(tagged) - count + 1) if "\n".join(tagged[i : i + count]) == text]
        if len(hits) != 1:
            raise SystemExit(f"{key}: found {len(hits)} times at {EXCERPTS.TAG}")
        excerpts[key] = {"path": excerpt["path"], "text": text, "main": [first, last], "v1.14.0": [hits[0], hits[0] + count - 1]}
    source = Path(path).read_text()
    head = source[: source.index("EXCERPTS = ")]
    Path(path).write_text(head + "EXCERPTS = " + pprint.pformat(excerpts, width=110, sort_dicts=False) + "\n")


def show_or_fail(ref: str, path: str) -> list:
    result = git_show(ref, path)
    if result.returncode != 0:
        raise SystemExit(f"{ref}:{path}: {result.stderr.strip()}")
    return result.stdout.split("\n")


if __name__ == "__main__":
    regenerate()
