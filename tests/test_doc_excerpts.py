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
