"""Adaptive-RAG: classify the question's complexity and route it.

no retrieval → answer directly (the local generator, which can only quote documents, says
so) · single-step → the Self-RAG graph (without its own retrieve? decision)
· multi-step → the iterative graph. Both are compiled subgraphs, not copies of their nodes.
A question pointing at something unnamed ("this API") is asked back once with ``interrupt()``.
"""

from langgraph.graph import END, START, StateGraph

from reflexrag.graphs.iterative import builder as iterative_builder
from reflexrag.graphs.self_rag import self_rag_builder
from reflexrag.nodes.adaptive import (
    answer_directly,
    clarify,
    classify_complexity,
    needs_clarification,
)
from reflexrag.nodes.rag import finish, prepare
from reflexrag.nodes.routing import route_by_complexity
from reflexrag.state import Context, InputState, RAGState

builder = StateGraph(RAGState, input_schema=InputState, context_schema=Context)
builder.add_node(prepare)
builder.add_node(classify_complexity)
builder.add_node(clarify)
builder.add_node(needs_clarification)
builder.add_node(answer_directly)
builder.add_node(finish)
builder.add_node("single_step", self_rag_builder(decide=False).compile(name="single_step"))
builder.add_node("multi_step", iterative_builder.compile(name="multi_step"))

builder.add_edge(START, "prepare")
builder.add_edge("prepare", "classify_complexity")
builder.add_conditional_edges("classify_complexity", route_by_complexity)
builder.add_edge("clarify", "classify_complexity")
builder.add_edge("answer_directly", "finish")
builder.add_edge("single_step", END)
builder.add_edge("multi_step", END)
builder.add_edge("needs_clarification", END)
builder.add_edge("finish", END)

graph = builder.compile()
graph.name = "adaptive"
