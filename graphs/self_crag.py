"""Self-CRAG: Corrective RAG's retrieval, then Self-RAG's grounded/useful checks.

Ungrounded answers are regenerated (bounded by ``max_regenerations``); a grounded but useless
answer earns another web search while ``max_web_searches`` allows.
"""

from reflexrag.graphs.crag import corrective_builder
from reflexrag.nodes.rag import grade_generation
from reflexrag.nodes.routing import route_after_corrective_check

builder = corrective_builder()
builder.add_node(grade_generation)
builder.add_edge("generate", "grade_generation")
builder.add_conditional_edges("grade_generation", route_after_corrective_check)

graph = builder.compile()
graph.name = "self_crag"
