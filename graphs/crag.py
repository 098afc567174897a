"""Corrective RAG: retrieve → evaluate → refine (correct), web search (incorrect), or both.

A retrieval evaluator scores the chunks against two thresholds; the kept knowledge is
decomposed into strips, scored, and the best recomposed before generating.
"""

from langgraph.graph import END, START, StateGraph

from reflexrag.nodes.crag import (
    evaluate_retrieval,
    refine_knowledge,
    rewrite_for_search,
    web_fallback,
)
from reflexrag.nodes.rag import SEARCH_RETRY, finish, generate, give_up, prepare, retrieve
from reflexrag.nodes.routing import route_after_evaluation, route_after_refinement
from reflexrag.state import Context, InputState, RAGState


def corrective_builder() -> StateGraph:
    """Retrieval, evaluation, web fallback and refinement, up to (not including) generate."""
    builder = StateGraph(RAGState, input_schema=InputState, context_schema=Context)
    builder.add_node(retrieve, retry_policy=SEARCH_RETRY)
    for node in (
        prepare,
        evaluate_retrieval,
        rewrite_for_search,
        web_fallback,
        refine_knowledge,
        generate,
        finish,
        give_up,
    ):
        builder.add_node(node)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "retrieve")
    builder.add_edge("retrieve", "evaluate_retrieval")
    builder.add_conditional_edges("evaluate_retrieval", route_after_evaluation)
    builder.add_edge("rewrite_for_search", "web_fallback")
    builder.add_edge("web_fallback", "refine_knowledge")
    builder.add_conditional_edges("refine_knowledge", route_after_refinement)
    builder.add_edge("finish", END)
    builder.add_edge("give_up", END)
    return builder


builder = corrective_builder()
builder.add_edge("generate", "finish")

graph = builder.compile()
graph.name = "crag"
