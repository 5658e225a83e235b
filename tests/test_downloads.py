"""A proof downloaded from the site runs on its own: one file, its helper modules inlined."""

import os
import subprocess
import sys

from verify.website import downloads
from verify.pages import all_proofs, find_snippet, load_pages


def test_every_download_compiles_and_inlines_what_it_imports():
    proofs = [p for p in all_proofs(load_pages()) if find_snippet(p.snippet).exists()]
    files = downloads.all_files(proofs)
    assert "downloads/_claims.py" in files
    for proof in proofs:
        script = files[downloads.script_path(proof.snippet)]
        compile(script, proof.snippet, "exec")
        imported = set(downloads.IMPORTED.findall(find_snippet(proof.snippet).read_text())) - downloads.NOT_INLINED
        for name in imported:
            assert f"_inline_module({name!r}" in script, f"{proof.snippet}: {name} is not inlined"
    forked = next(p for p in proofs if "from _forked_pair" in find_snippet(p.snippet).read_text())
    assert "_inline_module('_forked_pair'" in files[downloads.script_path(forked.snippet)]


def test_a_downloaded_proof_runs_under_accelerate_launch(tmp_path):
    name = "ddp_gradients_match_full_batch.py"
    script = downloads.self_contained(name)
    (tmp_path / name).write_text(script)
    # the inlined _claims is the one the proof imports, not one installed on this machine
    probe = script.split("# --- snippets/")[0] + "\nimport _claims\nprint(_claims.__file__)\n"
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert shown.stdout.strip() == "_claims.py", shown.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PROOF_REPORT_FILE")}
    env["ACCELERATE_USE_CPU"] = "true"
    run = subprocess.run(["accelerate", "launch", "--multi_gpu", "--num_processes", "2", name], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "[rank 0] PASS averaged_grads_match_full_batch" in run.stdout
    assert "[rank 1] PASS averaged_grads_match_full_batch" in run.stdout
