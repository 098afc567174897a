"""A test-only graph that asks the user a clarifying question with ``interrupt()``."""

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from nodes.rag import prepare
from state import Context, InputState, RAGState


async def clarify(state: RAGState) -> dict[str, Any]:
    reply = interrupt({"question": "Which API do you mean?"})
    return {
        "question": f"{state['question']} ({reply})",
        "steps": [{"node": "clarify", "summary": f"user said {reply!r}"}],
    }


builder = StateGraph(RAGState, input_schema=InputState, context_schema=Context)
builder.add_node(prepare)
builder.add_node(clarify)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "clarify")
builder.add_edge("clarify", END)
graph = builder.compile()
