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


def one(text, links=()):
    return [prose.Sentence("questions/t/p.md", 1, text, text, tuple(links))]


def page_with_range(since=None, until=None):
    claim = type("C", (), {"since": since, "until": until})()
    return type("P", (), {"proofs": [type("F", (), {"claims": {"c": claim}})()]})()


def test_a_value_after_up_to_is_not_a_release():
    page = page_with_range()
    assert not prose.version_findings(page, one("The gradients differ by up to 4.0 (the largest value)."), set())
    assert not prose.version_findings(page, one("It differed in 21,200 elements, by up to 4.8e-7."), set())
    assert prose.version_findings(page, one("The step halved up to v1.8 and shrank after."), set())


def test_a_deprecation_said_of_the_pinned_release_names_its_release():
    page, pinned = page_with_range(), {"torch 2.13", "torch 2.13.0", "2.13.0"}
    assert not prose.version_findings(page, one("In torch 2.13 `reduce_scatter_tensor` is deprecated."), pinned)
    assert prose.version_findings(page, one("`reduce_scatter_tensor` is deprecated."), pinned)
    assert prose.version_findings(page, one("In torch 2.1 `reduce_scatter_tensor` is deprecated."), pinned)
    # history needs its own range or source, even beside the pinned release
    assert prose.version_findings(page, one("In torch 2.13 the loop is runLoop; older releases called it X."), pinned)
    # a removal the pinned release announces is its state, not history
    assert not prose.version_findings(page, one("The alias warns it will be removed in v6."), pinned)


def test_a_release_written_short_is_the_claims_edge():
    page = page_with_range(since="1.0.0")
    assert not prose.version_findings(page, one("Since 1.0 the switches go through DataLoaderConfiguration."), set())
    assert prose.version_findings(page, one("Since 1.2 the switches go through DataLoaderConfiguration."), set())


def test_a_version_sentence_may_rest_on_the_ranged_claims_of_a_page_it_links_to():
    text = "The step halves through 1.8.1 and shrinks by 0.9 since 1.9.0."
    linked = {"questions/a/owner.md": {"1.9.0", "1.8.1"}}
    found = one(text, links=["questions/a/owner.md"])
    assert not prose.version_findings(page_with_range(), found, set(), linked_edges=linked)
    assert prose.version_findings(page_with_range(), one(text), set(), linked_edges=linked)


def test_a_repeat_that_links_to_the_page_stating_it_is_the_link_asked_for():
    a = "Each stage adds up the time spent in them and reports one minus busy over step for the least idle step."
    raw = a.replace("Each stage", "[Each stage](../b/owner.md)")
    found = prose.Sentence("questions/a/p.md", 1, a, raw, ("questions/b/owner.md",))
    owner = prose.Sentence("questions/b/owner.md", 1, a, a)
    assert not prose.repeated([found, owner])
    assert prose.repeated([prose.Sentence("questions/a/p.md", 1, a, a), owner])


def test_a_sentence_keeps_the_pages_its_own_links_point_to(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    page = docs / "questions" / "a" / "p.md"
    page.parent.mkdir(parents=True)
    page.write_text("See [the owner](../b/owner.md#proof) for it. Another sentence with [a site](https://x.org).\n")
    monkeypatch.setattr(prose, "DOCS_DIR", docs)
    first, second = prose.sentences(page)
    assert first.links == ("questions/b/owner.md",)
    assert second.links == ("",)


def test_a_default_inside_a_quotation_is_not_the_pages_own_statement():
    def finding(paragraph, text=None):
        text = text or paragraph
        return prose.default_findings(None, [prose.Sentence("p.md", 1, text, paragraph)], set())
    assert not finding('The guide says "Accelerate automagically does this for you by default." It does not.',
                       'The guide says "Accelerate automagically does this for you by default.')
    # a quotation holding a full stop: the second sentence starts inside it
    paragraph = 'It warns "Use torchrun. Note that --use-env is set by default in torchrun" (the proof reads it).'
    assert not finding(paragraph, 'Note that --use-env is set by default in torchrun" (the proof reads it).')
    assert finding('`reduce` defaults to `"sum"` here.')
    # an admonition's title is the page's own question
    assert finding('??? note "Why is it off although its documented default is True?" Because.')
    # a decorator's message quoted as code is the library's text too
    assert not finding('`main` is decorated `@deprecated("Note that --use-env is set by default in torchrun.")`.')
    assert finding('It says "sum" and, by default, averages.')


def test_a_default_sentence_may_rest_on_a_claim_of_the_page_it_links_to():
    text = "Gloo's timeout is 30 minutes by default (process-group timeouts)."
    raw = "Gloo's timeout is 30 minutes by default ([process-group timeouts](../l/t.md)).\n<!-- default: timeout_default -->"
    linked = {"questions/l/t.md": {"timeout_default"}}
    found = [prose.Sentence("questions/a/p.md", 1, text, raw, ("questions/l/t.md",))]
    assert not prose.default_findings(None, found, set(), linked)
    unlinked = [prose.Sentence("questions/a/p.md", 1, text, raw, ())]
    assert prose.default_findings(None, unlinked, set(), linked)
