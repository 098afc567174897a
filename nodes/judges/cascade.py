"""Which chunk grades the local judge decides in ``llm_judging="cascade"``: its band.

The local relevance score is trusted only where it was measured to be right: from
``relevant_from`` up a chunk is relevant, under ``irrelevant_below`` it is not, and the model
reads everything between. Both ends are fitted leave-one-set-out on the shared sets by
``python -m reflexrag.benchmarks.cascade_band`` (chunks of a gold document of an answerable
question are relevant, the rest are not) as the scores at which the local verdicts were
right at least 9 times in 10 on the sets fitted on; an end no score reaches is null, and then
the model reads every chunk on that side.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

BAND_FILE = Path(__file__).with_name("cascade_band.json")


@cache
def cascade_band() -> dict[str, Any]:
    """The shipped band (``cascade_band.json``)."""
    return json.loads(BAND_FILE.read_text(encoding="utf-8"))


def clear_verdict(score: float, band: dict[str, Any]) -> bool | None:
    """The local verdict on a chunk scored ``score``, or None when the model should read it."""
    relevant_from, irrelevant_below = band.get("relevant_from"), band.get("irrelevant_below")
    if relevant_from is not None and score >= relevant_from:
        return True
    if irrelevant_below is not None and score < irrelevant_below:
        return False
    return None
