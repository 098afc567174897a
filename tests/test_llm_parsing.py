"""The LLM backend's verdict parsing never crashes and reads unparseable output as "no"."""

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from reflexrag.nodes.judges.llm import BinaryVerdict, GroundingVerdict, LLMJudge, parse_verdict
from reflexrag.nodes.judges.usage import metered


def fake(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def test_parse_json_anywhere_in_the_reply():
    verdict = parse_verdict('Sure! {"binary_score": "yes"} hope that helps', BinaryVerdict)
    assert verdict is not None and verdict.binary_score == "yes"


def test_parse_falls_back_to_the_first_keyword():
    assert parse_verdict("No. Although yes is tempting.", BinaryVerdict).binary_score == "no"
    assert (
        parse_verdict("The answer is partially supported.", GroundingVerdict).level == "partially"
    )


def test_parse_invalid_json_value_then_keyword():
    verdict = parse_verdict('{"binary_score": "maybe"} ... yes', BinaryVerdict)
    assert verdict.binary_score == "yes"


def test_unparseable_reply_gives_none():
    assert parse_verdict("¯\\_(ツ)_/¯", BinaryVerdict) is None
    assert parse_verdict("", GroundingVerdict) is None


async def test_malformed_grader_output_counts_as_negative_and_is_metered():
    judge = LLMJudge(fake("I am not sure what you mean", "<<<>>>", "{broken json"))
    docs = [Document("alpha", id="1"), Document("beta", id="2")]
    with metered() as meter:
        grades = await judge.grade_documents("q", docs)
        grounding = await judge.grade_grounding("answer", docs)
    assert [g.relevant for g in grades] == [False, False]
    assert grounding.level == "none"
    assert meter.counts["llm.grader"] == 3
    assert meter.counts["tokens.prompt"] > 0


async def test_unparseable_router_verdict_retrieves():
    decision = await LLMJudge(fake("hmm")).needs_retrieval("Who founded Tesla?", [])
    assert decision.needed is True


async def test_unreadable_round_scores_and_levels_fall_back_safely():
    judge = LLMJudge(fake("I think it is fine", "complex, maybe", "multi_step for sure"))
    scores = await judge.assess_round("q", "draft", [], [])
    # Neither complete (stop early) nor hopeless: the round limit decides.
    assert (scores.relevance, scores.completeness, scores.quality) == (5, 5, 5)
    unreadable = await judge.classify_complexity("Who directed Jaws?")
    assert unreadable.level == "single_step" and not unreadable.ambiguous
    keyword = await judge.classify_complexity("Compare Jaws and Alien")
    assert keyword.level == "multi_step" and keyword.features["comparison"]
