"""The one typed state every reflexrag graph shares, and the per-run context (configuration)."""

from state.context import Context
from state.schema import (
    RESET,
    CragAction,
    DocGrade,
    Grounding,
    InputState,
    RAGState,
    Source,
    Step,
    StopReason,
    append_steps,
    merge_documents,
    merge_grades,
    sum_counts,
)

__all__ = [
    "RESET",
    "Context",
    "CragAction",
    "DocGrade",
    "Grounding",
    "InputState",
    "RAGState",
    "Source",
    "Step",
    "StopReason",
    "append_steps",
    "merge_documents",
    "merge_grades",
    "sum_counts",
]
