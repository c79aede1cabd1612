"""What an engine's `score` returns."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ScoreResult:
    """Scores of one request: `scores[i][j]` is label j's score for item i."""

    scores: list[list[float]]
    mode: str
    num_items: int
    # tokens the engine actually ran through the model (padding excluded), per mode as
    # `Mode.num_tokens` counts them: a prefix run N times counts N times
    num_tokens: int
