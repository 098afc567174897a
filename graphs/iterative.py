"""Iterative retrieval: retrieve, draft an answer, score the round, derive the next query from
the draft (or from what is missing), and stop when the answer is complete enough or after
``max_rounds``. The final answer is drafted from every round's relevant chunks.

Stopping is either dynamic (completeness ≥ ``completeness_threshold``) or ``fixed``
(always ``max_rounds``); the round counter on the state bounds both.
"""

from langgraph.graph import END, START, StateGraph

from reflexrag.nodes.iterative import (
    assess_round,
    draft_answer,
    grade_round,
    next_query,
    retrieve_round,
)
from reflexrag.nodes.rag import SEARCH_RETRY, finish, give_up, prepare
from reflexrag.nodes.routing import (
    route_after_assessment,
    route_after_next_query,
    route_after_round_retrieval,
)
from reflexrag.state import Context, InputState, RAGState

builder = StateGraph(RAGState, input_schema=InputState, context_schema=Context)
builder.add_node(prepare)
builder.add_node(retrieve_round, retry_policy=SEARCH_RETRY)
builder.add_node(grade_round)
builder.add_node(draft_answer)
builder.add_node(assess_round)
builder.add_node(next_query)
builder.add_node(finish)
builder.add_node(give_up)

builder.add_edge(START, "prepare")
builder.add_edge("prepare", "retrieve_round")
builder.add_conditional_edges("retrieve_round", route_after_round_retrieval)
builder.add_edge("grade_round", "draft_answer")
builder.add_edge("draft_answer", "assess_round")
builder.add_conditional_edges("assess_round", route_after_assessment)
builder.add_conditional_edges("next_query", route_after_next_query)
builder.add_edge("finish", END)
builder.add_edge("give_up", END)

graph = builder.compile()
graph.name = "iterative"
