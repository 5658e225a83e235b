"""The search dictionary holds every term the site's Chinese search must keep whole."""

from verify.website import search_dictionary


def test_every_chinese_tag_and_term_is_in_the_search_dictionary():
    missing = search_dictionary.missing_terms()
    assert not missing, (f"{search_dictionary.DICTIONARY.name} lacks {missing}: "
                         "run `python -m verify.website.search_dictionary` and commit the file")


def test_site_terms_outweigh_the_words_inside_them():
    text = search_dictionary.DICTIONARY.read_text(encoding="utf-8")
    frequency = {line.split()[0]: int(line.split()[1]) for line in text.splitlines()}
    assert frequency["梯度累积"] >= max(frequency.get("梯度", 0), frequency.get("累积", 0))
    import jieba

    segmenter = jieba.Tokenizer(str(search_dictionary.DICTIONARY))
    for term in ("梯度累积", "数据并行", "混合精度", "张量并行", "流水线并行"):
        assert term in list(segmenter.cut(f"什么是{term}？")), term
