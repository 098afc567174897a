"""Metadata filters: every operator, type errors, parsing, and retrieval under filters."""

import json

import pytest

from reflexrag.providers.filters import (
    FilterError,
    chroma_where,
    parse_expression,
    parse_filters,
    post_filter,
)
from reflexrag.providers.knowledge_base import SourceDocument, get_knowledge_base
from reflexrag.server.cli import main, merge_filter_expressions
from reflexrag.state import Context

META = {"lang": "zh", "year": 2021, "date": "2024-03-01", "title": "Nikola Tesla", "ok": True}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"lang": "zh"}, True),
        ({"lang": "en"}, False),
        ({"lang": ["en", "zh"]}, True),
        ({"lang": {"in": ["en"]}}, False),
        ({"lang": {"not_in": ["en"]}}, True),
        ({"missing": {"not_in": ["x"]}}, True),
        ({"missing": "x"}, False),
        ({"year": {">": 2020}}, True),
        ({"year": {">": 2021}}, False),
        ({"year": {">=": 2021}}, True),
        ({"year": {"<": 2021}}, False),
        ({"year": {"<=": 2021}}, True),
        ({"date": {">": "2024-01-01"}}, True),
        ({"date": {"<": "2024-01-01"}}, False),
        ({"year": {">": "2020"}}, False),  # a string never compares with a number
        ({"title": {"contains": "tesla"}}, True),
        ({"title": {"contains": "Edison"}}, False),
        ({"ok": True}, True),
        ({"lang": "zh", "year": {">=": 2022}}, False),  # AND
    ],
)
def test_every_operator_matches_as_documented(spec, expected):
    assert all(c.matches(META) for c in parse_filters(spec)) is expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"lang": {"like": "zh"}}, "unknown filter operator"),
        ({"lang": {"in": "zh"}}, "non-empty list"),
        ({"lang": {"in": []}}, "non-empty list"),
        ({"title": {"contains": 3}}, "needs a string"),
        ({"year": {">": True}}, "number or a string"),
        ({"year": {">": [1]}}, "number or a string"),
        ({"lang": {"=": {"x": 1}}}, "string, number or boolean"),
        ({"lang": {}}, "no operator"),
    ],
)
def test_invalid_filters_are_rejected_with_the_reason(spec, message):
    with pytest.raises(FilterError, match=message):
        parse_filters(spec)
    with pytest.raises(ValueError, match=message):
        Context(filters=spec)


def test_push_down_covers_what_chroma_can_evaluate():
    conditions = parse_filters(
        {
            "lang": "zh",
            "source": ["a", "b"],
            "year": {">=": 2020},
            "date": {">": "2024-01-01"},
            "title": {"contains": "x"},
        }
    )
    assert chroma_where(conditions) == {
        "$and": [{"lang": {"$eq": "zh"}}, {"source": {"$in": ["a", "b"]}}, {"year": {"$gte": 2020}}]
    }
    assert [c.key for c in post_filter(conditions)] == ["date", "title"]
    assert chroma_where(parse_filters({"lang": "zh"})) == {"lang": {"$eq": "zh"}}
    assert chroma_where([]) is None


def test_cli_expressions_parse_and_merge():
    assert parse_expression("lang=zh") == {"lang": {"=": "zh"}}
    assert parse_expression("year>=2020") == {"year": {">=": 2020}}
    assert parse_expression("source in xquad, cmrc2018") == {
        "source": {"in": ["xquad", "cmrc2018"]}
    }
    assert parse_expression("lang!=en") == {"lang": {"not_in": ["en"]}}
    assert parse_expression("title contains Nikola Tesla") == {
        "title": {"contains": "Nikola Tesla"}
    }
    assert merge_filter_expressions(["year>=2020", "year<2024"]) == {
        "year": {">=": 2020, "<": 2024}
    }
    with pytest.raises(FilterError, match="cannot parse"):
        parse_expression("lang ~ zh")


def test_retrieval_under_filters_keeps_top_k(capsys):
    kb = get_knowledge_base("filtered")
    kb.add(
        [
            SourceDocument(
                f"d{n}",
                f"Report {n} about solar panels and batteries.",
                {
                    "title": f"Report {n}",
                    "year": 2015 + n,
                    "date": f"202{n % 10}-01-01",
                    "lang": "en" if n % 2 else "zh",
                },
            )
            for n in range(10)
        ]
    )
    for mode in ("vector", "bm25", "hybrid"):
        pushed = kb.search("solar panels", 3, mode, parse_filters({"year": {">=": 2021}}))
        assert len(pushed) == 3 and all(d.metadata["year"] >= 2021 for d in pushed), mode
        late = kb.search("solar panels", 3, mode, parse_filters({"date": {">=": "2027-01-01"}}))
        assert len(late) == 3 and all(d.metadata["date"] >= "2027" for d in late), mode
        none = kb.search("solar panels", 3, mode, parse_filters({"lang": "fr"}))
        assert none == [], mode
    assert main(["ask", "solar panels?", "--kb", "filtered", "--filter", "lang=fr", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stop_reason"] == "no_matching_documents"
    assert main(["ask", "solar panels?", "--filter", "year like 3"]) == 2
    assert "cannot parse filter" in capsys.readouterr().err
