"""`pytest verify`: one test per claim declared by a page, all snippets run by one shared session."""

from __future__ import annotations

import pytest

from verify.labs import load_labs
from verify.levels import has_evidence_markers
from verify.pages import all_proofs, load_pages
from verify.paths import ROOT, RUNS_DIR
from verify.run_dirs import fresh_run_dir
from verify.runner import MEMORY_LIMIT_MB, LaunchSettings
from verify.session import verify_all


def pytest_addoption(parser):
    group = parser.getgroup("verify", "running the proofs")
    group.addoption("--nproc", type=int, default=2, help="processes per node (default 2)")
    group.addoption(
        "--nnodes", type=int, default=1,
        help="nodes: with 2, two `accelerate launch` processes (machine ranks 0 and 1) meet on 127.0.0.1",
    )  # fmt: skip
    group.addoption("--accelerate-config", default=None, help="an accelerate config file for the launches")
    group.addoption(
        "--memory-limit-mb", type=int, default=MEMORY_LIMIT_MB,
        help=f"resident memory per rank (its forks included) past which a proof is stopped (default {MEMORY_LIMIT_MB})",
    )  # fmt: skip
    group.addoption(
        "--reuse-evidence", action="store_true",
        help="skip proofs whose snippet, claims, versions, launch and harness are unchanged since they last passed",
    )  # fmt: skip
    group.addoption(
        "--launch-mode", choices=("grouped", "isolated"), default="grouped",
        help="grouped: many snippets per launch (fast); isolated: one launch per snippet (reference)",
    )  # fmt: skip
    group.addoption(
        "--mutants", action="store_true",
        help="also run each snippet under every mutant (library bug) its claims name: each claim must then fail",
    )  # fmt: skip


def option_problems(nproc: int, nnodes: int, memory_limit_mb: int) -> list[str]:
    """What is wrong with the launch options, checked before anything runs: a bad value would start a
    launch per proof, fail each, and overwrite passing evidence with those failures."""
    problems = []
    if nnodes < 1:
        problems.append(f"--nnodes must be at least 1 (got {nnodes})")
    if nproc < 1:
        problems.append(f"--nproc must be at least 1 (got {nproc})")
    elif nnodes >= 1 and nproc * nnodes < 2:
        problems.append(f"--nproc {nproc} --nnodes {nnodes} is {nproc * nnodes} process in all; a distributed "
                        "launch needs at least 2 (a proof written for another count declares `processes:`)")  # fmt: skip
    if memory_limit_mb <= 0:
        problems.append(f"--memory-limit-mb must be a positive number of MiB (got {memory_limit_mb})")
    return problems


def pytest_configure(config):
    problems = option_problems(config.getoption("nproc"), config.getoption("nnodes"), config.getoption("memory_limit_mb"))
    if problems:
        raise pytest.UsageError("; ".join(problems))


def launch_settings(config) -> LaunchSettings:
    nodes = config.getoption("nnodes")
    return LaunchSettings(
        num_processes=config.getoption("nproc") * nodes, num_machines=nodes, config_file=config.getoption("accelerate_config"),
        memory_limit_mb=config.getoption("memory_limit_mb"),
    )


def pytest_generate_tests(metafunc):
    if "claim" in metafunc.fixturenames:
        pages = load_pages()
        # A page with unusable front matter is a failing test of its own; the other pages still run.
        cases = [(page, None) for page in pages if page.error]
        cases += [(proof, claim) for proof in all_proofs(pages) for claim in proof.claims]
        # Labs (docs/labs/*.py notebooks): executed by verify/labs.py, judged like snippets.
        lab_proofs, broken_labs = load_labs()
        cases += [(lab, None) for lab in broken_labs] + [(lab, claim) for lab in lab_proofs for claim in lab.claims]
        ids = [f"{owner.page}::{claim}" if claim else f"{owner.slug}::front-matter" for owner, claim in cases]
        metafunc.parametrize("claim", cases, ids=ids)
    if "quote_case" in metafunc.fixturenames:
        # One test per checked quote (data/levels-spec.md), so `-k <page-slug>` checks a page's quotes too.
        pages = [page for page in load_pages() if not page.error]
        cases = [(page, source_id) for page in pages for source_id in page.sources]
        metafunc.parametrize("quote_case", cases, ids=[f"{page.slug}::source::{source_id}" for page, source_id in cases])
    if "labelled_page" in metafunc.fixturenames:
        pages = [page for page in load_pages() if not page.error and (page.sources or has_evidence_markers(page))]
        metafunc.parametrize("labelled_page", pages, ids=[f"{page.slug}::evidence-labels" for page in pages])
    if "mutant_case" in metafunc.fixturenames:
        # One test per (claim, mutant it names): only with --mutants, so the plain run stays fast.
        proofs = all_proofs(load_pages()) + load_labs()[0] if metafunc.config.getoption("mutants") else []
        cases = [(proof, claim_id, name) for proof in proofs for claim_id, claim in proof.claims.items()
                 for name in claim.breaks_when]  # fmt: skip
        ids = [f"{proof.page}::{claim_id}::{name}" for proof, claim_id, name in cases]
        metafunc.parametrize("mutant_case", cases, ids=ids)


def pytest_collection_modifyitems(config, items):
    """Without --mutants, test_mutant has no cases: drop it rather than report an empty parameter set."""
    kept = [item for item in items if not (item.originalname == "test_mutant" and not config.getoption("mutants"))]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


@pytest.fixture(scope="session")
def results(request):
    """Runs, once, the snippets of the claims (and mutants) this pytest session selected (so `-k` stays cheap)."""
    params = [getattr(item, "callspec", None) for item in request.session.items]
    selected = [callspec.params["claim"] for callspec in params if callspec and "claim" in callspec.params]
    selected += [callspec.params["mutant_case"][:2] for callspec in params
                 if callspec and isinstance(callspec.params.get("mutant_case"), tuple)]  # fmt: skip
    proofs = list({(proof.page, proof.snippet): proof for proof, claim in selected if claim}.values())
    settings = launch_settings(request.config)
    work_dir = fresh_run_dir(RUNS_DIR)
    return verify_all(
        proofs, settings, work_dir, request.config.getoption("launch_mode"),
        reuse_evidence=request.config.getoption("reuse_evidence"), mutants=request.config.getoption("mutants"),
    )  # fmt: skip


@pytest.fixture(scope="session")
def verdicts(results):
    return results.verdicts


@pytest.fixture(scope="session")
def mutant_verdicts(results):
    return results.mutants


@pytest.fixture
def settings(request) -> LaunchSettings:
    return launch_settings(request.config)
