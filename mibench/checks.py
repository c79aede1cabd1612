"""Checks at the edge that the engines, the harness and the workloads all apply, in one
place (neutral, like mibench/errors.py: it imports nothing of theirs, so an engine of
another revision measured by `mibench ab` is checked by the same code):

- `check_scores`: scores are probabilities (finite, in [0, 1]; rows that sum as they must
  within the dtype's tolerance), wherever they enter: an engine's `score`, a server's
  answer, the harness's record of a case;
- `text_problem`: text is Unicode (no lone surrogate from a JSON escape, no byte that is
  not UTF-8 from a command line).
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import InvalidScores

# how far a row of softmax probabilities may sum from 1: float32 rounds each of n
# probabilities by at most 2^-24 (row_tolerance), bfloat16 softmax probabilities are
# judged to 2e-2 (docs/parity.md)
ROW_TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}


def row_tolerance(dtype: str | None, num_labels: int) -> float:
    """How far a softmax row may sum from 1: the dtype's tolerance (ROW_TOLERANCE, the
    loosest for a dtype not listed), and for float32 at least n rounding errors of 2^-23."""
    base = ROW_TOLERANCE.get(dtype, max(ROW_TOLERANCE.values()))
    return max(base, num_labels * 2.0**-23)


def check_scores(scores_nk, apply_softmax: bool, dtype: str | None,
                 labels: Sequence[int] | None = None) -> None:
    """Refuse scores no correct engine returns, naming the first such item: every score a
    finite probability in [0, 1] (a log-probability <= 0), and each row summing to 1
    (apply_softmax: a softmax over the labels) or to at most 1 (probabilities of distinct
    labels under the full vocabulary; `labels`, when given, tells repeated ones apart)
    within the dtype's `row_tolerance`. An InvalidScores otherwise."""
    import numpy as np  # lazily: `import mibench.engines` stays light

    a_nk = np.asarray(scores_nk, dtype=np.float64)
    if a_nk.ndim != 2:
        raise InvalidScores(f"expected one row of label scores per item, got an array of "
                            f"shape {a_nk.shape}")
    tol = row_tolerance(dtype, a_nk.shape[1])
    good_nk = np.isfinite(a_nk) & (a_nk >= 0.0) & (a_nk <= 1.0)
    if apply_softmax or labels is None:
        total_n = a_nk.sum(axis=1)
    else:  # a label asked for twice is one outcome of the vocabulary, counted once
        total_n = a_nk[:, np.unique(np.asarray(labels), return_index=True)[1]].sum(axis=1)
    bad_sum_n = np.abs(total_n - 1.0) > tol if apply_softmax else total_n > 1.0 + tol
    bad_n = ~good_nk.all(axis=1) | bad_sum_n
    if not bad_n.any():
        return
    i = int(np.argmax(bad_n))
    if not good_nk[i].all():
        j = int(np.argmin(good_nk[i]))
        s = float(a_nk[i, j])
        why = "not a finite probability" if not np.isfinite(s) else \
            "not a probability in [0, 1]"
        raise InvalidScores(f"item {i}: score {j} is {s!r}, {why}")
    total = float(total_n[i])
    if apply_softmax:
        raise InvalidScores(f"item {i}: softmax scores sum to {total!r}, not 1 (tolerance "
                            f"{tol:g})")
    raise InvalidScores(f"item {i}: label probabilities sum to {total!r}, more than 1 "
                        f"(tolerance {tol:g})")




def text_problem(text: str, from_argv: bool = False) -> str | None:
    """Why `text` is not Unicode text, in words, or None. A Python str can hold a lone
    surrogate (U+D800..U+DFFF), which no UTF-8 can: JSON's `"\\ud800"` escape makes one,
    and so does a command-line byte that is not UTF-8 (Python decodes argv with
    surrogateescape: byte 0xff becomes U+DCFF), which `from_argv` names as the byte."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as e:
        i, c = e.start, ord(text[e.start])
    if from_argv and 0xDC80 <= c <= 0xDCFF:
        return f"is not UTF-8 text: byte 0x{c - 0xDC00:02x} at character {i}"
    return f"holds a lone surrogate (\\u{c:04x} at character {i}), which is not Unicode text"


def invalid_text(value, path: str = "") -> tuple[str, str] | None:
    """(path, why) of the first string, or key, in JSON-like data that is not Unicode
    text (`text_problem`): the path reads `items[3]`, `mibench.mask` ('' for the top
    level or a key of it); None when every string is text."""
    if isinstance(value, str):
        problem = text_problem(value)
        return None if problem is None else (path, problem)
    if isinstance(value, dict):
        for k, v in value.items():
            key = invalid_text(k) if isinstance(k, str) else None
            if key is not None:
                return path, f"has a key that {key[1]}"
            found = invalid_text(v, f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            if isinstance(v, str | list | tuple | dict):
                found = invalid_text(v, f"{path}[{i}]")
                if found is not None:
                    return found
    return None
