"""What a reader downloads to run a proof themselves: each snippet as one self-contained script (the
`_claims.py` it imports, and any helper module beside it, inlined), `_claims.py` alone, and each lab as
a notebook (.ipynb). Written into the built site by verify/website/hooks.py; nothing here runs a proof.
"""

from __future__ import annotations

import re
from pathlib import Path

from verify.pages import REPO_URL, find_snippet
from verify.paths import SNIPPETS_DIR

DOWNLOADS = "downloads"
IMPORTED = re.compile(r"^\s*(?:import|from)\s+(_[A-Za-z0-9_]+)\b", re.M)
NOT_INLINED = {"_mutants"}  # the harness's catalogue of library bugs; a proof never imports it
RUN = "ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 {name}"
INSTALL = 'python -m pip install "torch==2.13.0" "accelerate==1.15.0" "transformers==5.24.0"'


def helper_modules(code: str, folder: Path, snippets_dir: Path = SNIPPETS_DIR) -> list[tuple[str, str]]:
    """[(module name, source)] of the `_x` modules the code imports, those they import first."""
    found: dict[str, str] = {}

    def visit(text: str, here: Path):
        for name in IMPORTED.findall(text):
            if name in found or name in NOT_INLINED or name == "__future__":
                continue
            path = next((p for p in (here / f"{name}.py", snippets_dir / f"{name}.py") if p.exists()), None)
            if path is None:
                continue
            source = path.read_text(encoding="utf-8")
            visit(source, path.parent)
            found[name] = source

    visit(code, folder)
    return list(found.items())


def literal(source: str) -> str:
    """A Python literal that reads back as `source`: a raw triple-quoted string where that is exact."""
    if "'''" not in source and not source.endswith("\\"):
        return "r'''" + source + "'''"
    return repr(source)


def script_name(snippet: str) -> str:
    return Path(snippet).name


def script_path(snippet: str, snippets_dir: Path = SNIPPETS_DIR) -> str:
    """Where a snippet's download lies in the site: downloads/<topic>/<name>.py."""
    return f"{DOWNLOADS}/{find_snippet(snippet, snippets_dir).relative_to(snippets_dir).as_posix()}"


def self_contained(snippet: str, snippets_dir: Path = SNIPPETS_DIR) -> str:
    path = find_snippet(snippet, snippets_dir)
    code = path.read_text(encoding="utf-8")
    helpers = helper_modules(code, path.parent, snippets_dir)
    futures = re.findall(r"^from __future__ import .*$", code, re.M)
    code = re.sub(r"^from __future__ import .*\n", "", code, flags=re.M)
    relative = path.relative_to(snippets_dir).as_posix()
    head = [
        *futures,
        f"# snippets/{relative} from {REPO_URL}",
        "# One self-contained file: the helper module(s) it imports ("
        + ", ".join(f"{name}.py" for name, _ in helpers) + ") are inlined just below.",
        "# Run it on two processes on a machine without GPUs (each rank prints PASS or FAIL for each claim):",
        f"#   {INSTALL}",
        f"#   {RUN.format(name=path.name)}",
        "# With two GPUs, leave ACCELERATE_USE_CPU out.",
        "import sys as _sys",
        "import types as _types",
        "",
        "",
        "def _inline_module(_name, _source):",
        "    _module = _types.ModuleType(_name)",
        '    _module.__file__ = _name + ".py"',
        "    _sys.modules[_name] = _module",
        '    exec(compile(_source, _name + ".py", "exec"), _module.__dict__)',
        "",
        "",
    ]
    for name, source in helpers:
        head += [f"_inline_module({name!r}, {literal(source)})", ""]
    head += ["del _inline_module, _sys, _types", f"# --- snippets/{relative} ---", ""]
    return "\n".join(head) + code.rstrip("\n") + "\n" + STANDALONE_ENDING


# The harness's ranks leave the process group together and skip torch's C++ teardown (verify/worker.py),
# which sometimes aborts a rank (SIGABRT) at interpreter exit after all work is done; a download does too.
STANDALONE_ENDING = """
# --- added to the download: leave together, as the harness's ranks do (torch's teardown at exit can abort) ---
import os as _os
import sys as _sys
import torch.distributed as _dist

if _dist.is_initialized():
    _dist.barrier()
    _dist.destroy_process_group()
_sys.stdout.flush()
_sys.stderr.flush()
_os._exit(0)
"""


def all_files(proofs, labs_dir: Path | None = None, snippets_dir: Path = SNIPPETS_DIR) -> dict[str, str]:
    """{site path: text}: every proof's script, `_claims.py`, and each lab as a notebook."""
    files = {}
    for proof in proofs:
        if find_snippet(proof.snippet, snippets_dir).exists():
            files[script_path(proof.snippet, snippets_dir)] = self_contained(proof.snippet, snippets_dir)
    claims = snippets_dir / "_claims.py"
    if claims.exists():
        files[f"{DOWNLOADS}/_claims.py"] = claims.read_text(encoding="utf-8")
    if labs_dir is not None:
        import jupytext

        for lab in sorted(labs_dir.glob("lab*.py")):
            notebook = jupytext.read(lab)
            files[f"{DOWNLOADS}/labs/{lab.stem}.ipynb"] = jupytext.writes(notebook, fmt="ipynb")
    return files
