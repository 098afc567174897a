"""Naive RAG: retrieve once, answer from what came back. The baseline for every other strategy."""

from langgraph.graph import END, START, StateGraph

from reflexrag.nodes.rag import SEARCH_RETRY, finish, generate, prepare, retrieve
from reflexrag.state import Context, InputState, RAGState

builder = StateGraph(RAGState, input_schema=InputState, context_schema=Context)
builder.add_node(prepare)
builder.add_node(retrieve, retry_policy=SEARCH_RETRY)
builder.add_node(generate)
builder.add_node(finish)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "retrieve")
builder.add_edge("retrieve", "generate")
builder.add_edge("generate", "finish")
builder.add_edge("finish", END)

graph = builder.compile()
graph.name = "naive"
