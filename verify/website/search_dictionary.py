"""The dictionary the site's search segments Chinese with (mkdocs-material's `search.jieba_dict`).

jieba's own dictionary has 349,046 words and takes seconds to load on every build; the site needs the
most frequent words of it and its own terms. So the dictionary is jieba's 20,000 most frequent words plus
every Chinese tag of a page and the terms in data/search-terms.txt, each given a frequency above any word
they contain, so that 梯度累积 or 数据并行 stays one word in the index.

    python -m verify.website.search_dictionary      # rewrites data/search-dictionary.txt
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from verify.pages import load_pages
from verify.paths import ROOT, SEARCH_DICTIONARY, SEARCH_TERMS

DICTIONARY = SEARCH_DICTIONARY
TERMS = SEARCH_TERMS
MOST_FREQUENT = 20_000
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def jieba_words() -> list[tuple[str, int, str]]:
    import jieba

    rows = []
    with open(Path(jieba.__file__).parent / "dict.txt", encoding="utf-8") as words:
        for line in words:
            word, frequency, *tag = line.split()
            rows.append((word, int(frequency), tag[0] if tag else "n"))
    rows.sort(key=lambda row: (-row[1], row[0]))
    return rows[:MOST_FREQUENT]


def site_terms() -> set[str]:
    """Every Chinese tag of a page, and the listed terms."""
    terms = {str(tag) for page in load_pages() if not page.error for tag in page.meta.get("tags") or []}
    text = TERMS.read_text(encoding="utf-8") if TERMS.exists() else ""
    listed = [term for line in text.splitlines() if not line.startswith("#") for term in line.split()]
    # a dictionary word is one token: a tag with a space ('为什么需要 accelerate') is segmented like text
    return {term for term in terms | set(listed) if CHINESE.search(term) and not re.search(r"\s", term)}


def dictionary_text() -> str:
    words = jieba_words()
    top = words[0][1]
    known = {word for word, _, _ in words}
    lines = [f"{word} {frequency} {tag}" for word, frequency, tag in words]
    lines += [f"{term} {top} n" for term in sorted(site_terms()) if term not in known]
    return "\n".join(lines) + "\n"


def missing_terms(text: str | None = None) -> list[str]:
    """Site terms the committed dictionary lacks (a new tag since it was written)."""
    text = DICTIONARY.read_text(encoding="utf-8") if text is None else text
    present = {line.split(" ", 1)[0] for line in text.splitlines()}
    return sorted(site_terms() - present)


def main() -> int:
    DICTIONARY.write_text(dictionary_text(), encoding="utf-8")
    print(f"{DICTIONARY.relative_to(ROOT)}: {len(DICTIONARY.read_text(encoding='utf-8').splitlines())} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
