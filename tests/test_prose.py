"""Prose that no claim reads (verify/website/prose.py): version words without their range, defaults without a
run that omits the argument, and one fact on several pages. Known findings wait in data/prose-backlog.yaml,
which may only shrink."""

import pytest

from verify.website import prose


@pytest.fixture(scope="module")
def found():
    return prose.findings()


@pytest.fixture(scope="module")
def backlog():
    return prose.read_yaml(prose.BACKLOG) or {}


@pytest.mark.parametrize("kind", ["version", "default", "repeat"])
def test_no_new_finding_outside_the_backlog(found, backlog, kind):
    new = sorted(set(found[kind]) - set(backlog.get(kind, [])))
    assert not new, f"{kind} findings (run python -m verify.website.prose for lines):\n" + "\n".join(new)


@pytest.mark.parametrize("kind", ["version", "default", "repeat"])
def test_the_backlog_only_shrinks(found, backlog, kind):
    fixed = sorted(set(backlog.get(kind, [])) - set(found[kind]))
    assert not fixed, f"fixed, now remove from data/prose-backlog.yaml (python -m verify.website.prose --backlog):\n" + "\n".join(fixed)


def test_a_version_sentence_needs_its_range_or_where_it_was_read(tmp_path):
    page = type("P", (), {"proofs": []})()
    def one(text):
        return [prose.Sentence("p.md", 1, text, text)]
    assert prose.version_findings(page, one("Older releases returned a list instead."))
    assert prose.version_findings(page, one("It was added in 0.22.0 and has stayed."))
    assert not prose.version_findings(page, one("It was added in 0.22.0 (PR #1746, first released in v0.22.0)."))


def test_a_default_sentence_needs_a_claim_that_omits_the_argument():
    text = "The scheduler steps once per process by default."
    sentence = prose.Sentence("p.md", 1, text, text + "\n<!-- default: steps_per_process -->")
    assert prose.default_findings(None, [sentence], set())
    assert not prose.default_findings(None, [sentence], {"steps_per_process"})


def test_near_identical_sentences_on_two_pages_are_found():
    a = "Each stage adds up the time spent in them and reports one minus busy over step for the least idle step."
    b = "Each stage adds up the time spent in them and reports one minus busy over step for the least idle of 3."
    pair = prose.repeated([prose.Sentence("a.md", 1, a, a), prose.Sentence("b.md", 1, b, b)])
    assert len(pair) == 1
