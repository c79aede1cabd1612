"""What an engine's `score` returns; its scores pass `check_scores` (mibench/checks.py)
before they leave the engine."""

from __future__ import annotations

import dataclasses

from mibench.checks import check_scores
from mibench.errors import InvalidScores


@dataclasses.dataclass(frozen=True)
class ScoreResult:
    """Scores of one request: `scores[i][j]` is label j's score for item i."""

    scores: list[list[float]]
    mode: str
    num_items: int
    # tokens the engine actually ran through the model (padding excluded), per mode as
    # `Mode.num_tokens` counts them: a prefix run N times counts N times
    num_tokens: int


def checked_result(scores_nk, req, dtype: str, mode: str, num_tokens: int,
                   engine: str) -> ScoreResult:
    """An engine's ScoreResult of a request (engines/request.py ScoreRequest), its scores
    through `check_scores` first: an InvalidScores names the item and the engine."""
    import numpy as np

    a_nk = np.asarray(scores_nk, dtype=np.float64)
    try:
        check_scores(a_nk, req.apply_softmax, dtype, req.labels)
    except InvalidScores as e:
        raise InvalidScores(f"{e} (the {engine} engine, mode {mode}, {dtype})") from None
    return ScoreResult(scores=a_nk.tolist(), mode=mode, num_items=len(req.items),
                       num_tokens=num_tokens)
