"""The harness's layout: running proofs (verify/) and building the site (verify/website/) depend one way."""

from __future__ import annotations

import ast
from pathlib import Path

from verify.paths import ROOT

VERIFY = ROOT / "verify"


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The project modules a file imports, lazily or not."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                found.add(dotted if dotted in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in known} - {module_name(path)}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(path): path for path in VERIFY.rglob("*.py")}
    return {name: imports_of(path, set(files)) for name, path in files.items()}


def test_the_proof_side_never_imports_the_website():
    graph = import_graph()
    offenders = {name: sorted(uses) for name, uses in graph.items()
                 if not name.startswith("verify.website") and any(use.startswith("verify.website") for use in uses)}  # fmt: skip
    assert offenders == {}


def test_no_module_of_the_harness_imports_itself_through_a_cycle():
    graph = import_graph()
    cycles = []

    def walk(start, node, path):
        for nxt in sorted(graph[node]):
            if nxt == start:
                cycles.append(" -> ".join([*path, start]))
            elif nxt not in path and nxt > start:
                walk(start, nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    assert cycles == []


def test_folders_are_named_in_paths_py_alone():
    """`ROOT / "..."` and `.verify` folders are spelled once, in verify/paths.py."""
    spelled = []
    for path in VERIFY.rglob("*.py"):
        if path.name == "paths.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if "sys.path" in code:
                continue  # mkdocs loads the hooks file by path: it finds the checkout before it can import verify
            if "Path(__file__)" in code and "parent.parent" in code or 'ROOT / "' in code or '"' + ".verify" + '"' in code:
                spelled.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert spelled == []
