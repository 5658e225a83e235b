"""The evidence labels of each page (data/levels-spec.md): every checked quote is in its source, and every
`<!-- evidence: ... -->` marker names a claim or source of the page at its level."""

from verify import levels, sources


def test_quote(quote_case):
    page, source_id = quote_case
    problem = sources.quote_problem(page.path, source_id, page.sources[source_id])
    assert problem is None, problem


def test_evidence_labels(labelled_page):
    found = levels.problems(labelled_page)
    assert not found, "\n".join(found)
