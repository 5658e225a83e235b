"""Every proof's header says how to run it by hand, and that command must work as written.

A snippet's banner is the comment line of its header that starts with the launch command (a trailing
backslash continues it on the next comment line). It must be the form that really starts two ranks on
this kind of machine (`accelerate launch --cpu` starts one; see the README), with the proof's process
count, and name the snippet by its path from the repository root: a path that does not exist (a snippet
moved into its topic folder, the banner left behind) is what the review of 2026-12-01 found.
"""

import re
from pathlib import Path

import pytest

from verify.pages import all_proofs, load_pages

ROOT = Path(__file__).resolve().parent.parent
CPU_FORM = "ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes {n} {path}"
GPU_FORM = "accelerate launch --multi_gpu --num_processes {n} {path}"  # a proof that requires CUDA
LAUNCH = re.compile(r"^(ACCELERATE_USE_CPU=true )?accelerate launch ")


def header_lines(path: Path) -> list[str]:
    """The leading comment block, each line without its '#' and indentation."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return lines


def banners(path: Path) -> list[str]:
    """The launch commands in a snippet's header, continuation lines joined."""
    found, lines = [], header_lines(path)
    for index, line in enumerate(lines):
        if not LAUNCH.match(line):
            continue
        command = line
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1
            command = command[:-1].rstrip() + " " + lines[index]
        found.append(" ".join(command.split()))
    return found


PROOFS = {proof.snippet: proof for proof in all_proofs(load_pages())}


@pytest.mark.parametrize("snippet", sorted(PROOFS))
def test_banner_runs_the_snippet_on_its_processes(snippet):
    proof = PROOFS[snippet]
    path = proof.path.relative_to(ROOT).as_posix()
    form = GPU_FORM if proof.requires == "cuda" else CPU_FORM
    if proof.requires == "cuda" and proof.processes == 1:  # --multi_gpu refuses fewer than 2 processes
        form = form.replace("--multi_gpu ", "")
    wanted = form.format(n=proof.processes or 2, path=path)
    # a proof for any count (no `processes:`) may show another count than the harness's default 2
    counts = rf"{proof.processes}" if proof.processes else r"[1-9][0-9]*"
    prefix, _, _ = form.partition("{n}")
    # `--main_process_port 0` (a free port, where 29500 may be taken) is allowed before the path
    pattern = re.compile(re.escape(prefix) + counts + r"( --main_process_port 0)? " + re.escape(path) + r"( .*)?$")
    found = banners(proof.path)
    assert found, f"{path}: no run command in its header; write `{wanted}`"
    named = [token for command in found for token in command.split() if token.endswith(".py")]
    missing = [token for token in named if not (ROOT / token).is_file()]
    assert not missing, f"{path}: its run command names {missing}, which does not exist; write `{wanted}`"
    assert any(pattern.match(command) for command in found), f"{path}: run command {found} is not `{wanted}`"


def test_banner_parser_joins_continuations_and_rejects_a_moved_path(tmp_path):
    snippet = tmp_path / "s.py"
    snippet.write_text(
        "# what it shows\n#\n#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \\\n"
        "#       snippets/s.py\nimport torch\n"
    )
    assert banners(snippet) == ["ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/s.py"]
    assert not (ROOT / "snippets/s.py").is_file()  # the parametrized test would report it as missing
