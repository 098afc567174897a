"""Offline text utilities for English and Chinese."""

from reflexrag.providers.text import (
    count_tokens,
    is_chinese,
    keywords,
    split_into_chunks,
    split_sentences,
)


def test_chunks_respect_the_token_budget():
    text = " ".join(f"Sentence number {n} talks about retrieval." for n in range(200))
    chunks = split_into_chunks(text, chunk_tokens=50, overlap_tokens=5)
    assert len(chunks) > 10
    assert all(count_tokens(chunk) <= 50 for chunk in chunks)


def test_chinese_text_is_chunked_too():
    text = "自我反思检索增强生成是一种方法。" * 100
    chunks = split_into_chunks(text, chunk_tokens=60, overlap_tokens=0)
    assert len(chunks) > 1 and all(count_tokens(c) <= 60 for c in chunks)


def test_sentences_split_in_both_languages():
    assert split_sentences("Tesla died in 1943. He lived in New York! Did he?") == [
        "Tesla died in 1943.",
        "He lived in New York!",
        "Did he?",
    ]
    assert split_sentences("今天下雨。明天晴天！后天呢？") == [
        "今天下雨。",
        "明天晴天！",
        "后天呢？",
    ]


def test_keywords_drop_question_words_in_both_languages():
    assert keywords("What year did Tesla die?") == ["year", "tesla", "die"]
    zh = keywords("特斯拉是哪一年去世的？")
    assert "特斯拉" in zh and "哪" not in zh and "的" not in zh


def test_language_detection():
    assert is_chinese("什么是自我反思检索增强？")
    assert not is_chinese("What is Self-RAG?")


def test_coverage_is_the_same_float_in_every_process():
    # Summed in a set's order, the share came out 0.36842105263157887, …89 or …88 by the
    # process's hash seed, and every score built on it with it.
    import os
    import subprocess
    import sys

    script = (
        "from reflexrag.providers.text import coverage;"
        "print(repr(coverage(['prevalence', 'coronavirus', 'oc43', 'community', 'samples',"
        " 'ilorin', 'nigeria', 'in', 'of'], frozenset({'prevalence', 'oc43', 'nigeria'}))))"
    )
    shares = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(1, 6)
    }
    assert len(shares) == 1, shares
