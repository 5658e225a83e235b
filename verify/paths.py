"""Every folder the project reads or writes, in one place.

The proof side (`verify/*.py`) and the site side (`verify/website/`) both import their paths from here; the
environment variables let tests point the outputs at a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What the project is made of.
DOCS_DIR = ROOT / "docs"
SNIPPETS_DIR = ROOT / "snippets"
LABS_DIR = DOCS_DIR / "labs"
LEDGER_FILE = ROOT / "data" / "question-ledger.yaml"
RELEASE_LIST = ROOT / "data" / "accelerate-releases.txt"  # PyPI's releases: verify.matrix --edges picks neighbours here
EXCERPTS_DIR = ROOT / "data" / "excerpts"  # dated excerpts of sources that are not installed (data/levels-spec.md)
LEVELS_BACKLOG = ROOT / "data" / "levels-backlog.txt"  # pages whose Mechanism is not yet labelled; only shrinks
PROSE_BACKLOG = ROOT / "data" / "prose-backlog.yaml"  # prose findings not yet fixed (verify/website/prose.py); only shrinks
SEARCH_DICTIONARY = ROOT / "data" / "search-dictionary.txt"  # jieba's words for the site's search (search_dictionary.py)
SEARCH_TERMS = ROOT / "data" / "search-terms.txt"  # terms that search keeps whole
DELIBERATE_REPEATS = ROOT / "data" / "deliberate-repeats.yaml"  # sentences on two pages on purpose, with why
PYPROJECT = ROOT / "pyproject.toml"  # the pinned releases a page's prose may name as "the pinned release"
# Evidence measured on a reference machine and committed, shown by the site where this machine has none yet
# (refreshed from EVIDENCE_DIR by `python -m verify.website.reference`).
REFERENCE_DIR = ROOT / "reference-evidence"
# The reference set the site falls back on (never read by the harness); a test points it elsewhere.
REFERENCE_EVIDENCE_DIR = Path(os.environ.get("VERIFY_REFERENCE_DIR", REFERENCE_DIR))

# What `pytest verify` and the release matrix write (all under .verify/, which git ignores).
STATE_DIR = ROOT / ".verify"
EVIDENCE_DIR = Path(os.environ.get("VERIFY_EVIDENCE_DIR", STATE_DIR / "evidence"))
EXECUTED_LABS_DIR = Path(os.environ.get("VERIFY_LABS_DIR", STATE_DIR / "labs"))
MATRIX_DIR = Path(os.environ.get("VERIFY_MATRIX_DIR", STATE_DIR / "matrix"))
RELEASES_DIR = STATE_DIR / "releases"
RUNS_DIR = STATE_DIR / "runs"
CLEANED_DIR = STATE_DIR / "cleaned"
# What a site build keeps for the next one (figures by the hash of what they are drawn from).
CACHE_DIR = Path(os.environ.get("VERIFY_CACHE_DIR", STATE_DIR / "cache"))
