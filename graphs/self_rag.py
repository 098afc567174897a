"""Self-RAG: decide to retrieve, grade documents, generate, check groundedness and usefulness.

Not grounded → regenerate; grounded but not useful → rewrite the query and retrieve again,
unless the rewrite finds nothing new to answer from; every loop is bounded by a counter on the
state, ending in ``finish`` or ``give_up``.
"""

from langgraph.graph import END, START, StateGraph

from reflexrag.nodes.rag import (
    SEARCH_RETRY,
    decide_retrieval,
    finish,
    generate,
    give_up,
    grade_documents,
    grade_generation,
    prepare,
    retrieve,
    transform_query,
)
from reflexrag.nodes.routing import (
    route_after_generate,
    route_after_generation_grade,
    route_after_grading,
    route_after_retrieve,
    route_retrieval_decision,
)
from reflexrag.state import Context, InputState, RAGState


def self_rag_builder(decide: bool = True) -> StateGraph:
    """Self-RAG's graph; ``decide=False`` always retrieves (the adaptive strategy has
    already classified the question when it hands it over)."""
    builder = StateGraph(RAGState, input_schema=InputState, context_schema=Context)
    builder.add_node(prepare)
    if decide:
        builder.add_node(decide_retrieval, retry_policy=SEARCH_RETRY)
    builder.add_node(retrieve, retry_policy=SEARCH_RETRY)
    builder.add_node(grade_documents)
    builder.add_node(generate)
    builder.add_node(grade_generation)
    builder.add_node(transform_query)
    builder.add_node(finish)
    builder.add_node(give_up)

    builder.add_edge(START, "prepare")
    if decide:
        builder.add_edge("prepare", "decide_retrieval")
        builder.add_conditional_edges("decide_retrieval", route_retrieval_decision)
    else:
        builder.add_edge("prepare", "retrieve")
    builder.add_conditional_edges("retrieve", route_after_retrieve)
    builder.add_conditional_edges("grade_documents", route_after_grading)
    builder.add_edge("transform_query", "retrieve")
    builder.add_conditional_edges("generate", route_after_generate)
    builder.add_conditional_edges("grade_generation", route_after_generation_grade)
    builder.add_edge("finish", END)
    builder.add_edge("give_up", END)
    return builder


builder = self_rag_builder()
graph = builder.compile()
graph.name = "self_rag"
