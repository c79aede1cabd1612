"""A text against a model's length, bounded before the work it would cost.

One token covers at most the characters of the model's longest token (`token_chars`: a
byte-level BPE's vocabulary entries have one character a byte, so an entry's length bounds
the text it stands for), so a text of more than `positions x token_chars` characters has
more tokens than the model has positions and can never be scored: `TextBound` refuses it
from its length, before any tokenizing. A text within that is counted piece by piece
(`pieces`) and refused as soon as the count passes the positions by more than one token
per seam, then encoded whole and refused by its exact count: refusing a text costs at
most about `positions` tokens of tokenizing, whatever its size (a 100 MB text query of
`qwen3-0.6b`, 40,960 positions: before, 6 GB and 40 s of tokenizing to learn it could not
fit, and 12 minutes and a worker killed at 21.9 GB on a busy 2-core machine). The bound
holds for tokenizers that keep every character of a text in some token (a byte-level BPE:
Qwen, Llama 3, the presets' byte-level tokenizer); one whose normalizer drops characters
could fit a longer text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from mibench.errors import TextTooLong

# text is counted in pieces of at most this many characters, cut where a space starts a
# word (a seam at which a byte-level BPE's pre-tokenizer splits anyway), so refusing a long
# text costs about the bound's tokens of tokenizing, not the whole text (a byte-level
# tokenizer took ~2.8 s per MB here)
PIECE_CHARS = 16 * 1024


def pieces(text: str, size: int = PIECE_CHARS):
    """`text` in consecutive pieces of at most `size` characters, each cut (where it can
    be) before a space that starts a word."""
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + 1, end)
            end = cut if cut > start else end
        yield text[start:end]
        start = end


@functools.cache
def token_chars(model: str) -> int | None:
    """The characters the model's longest token stands for, at most: an embedded preset's
    (its byte-level tokenizer: one byte a token, or a special token's text), a checkpoint
    folder's longest vocabulary entry; None where it has no tokenizer here."""
    from .facts import EMBEDDED, tokenizer_of
    from .presets import PRESETS

    if model.startswith(EMBEDDED) and model[len(EMBEDDED):] in PRESETS:
        return max([1, *map(len, PRESETS[model[len(EMBEDDED):]]["special"])])
    tokenizer = tokenizer_of(model)
    return max(map(len, tokenizer.get_vocab())) if tokenizer is not None else None


class TextBound:
    """`model`'s text within its `positions` (module docstring): calling it encodes a text
    with `encode` (the engine's; default this model's own tokenizer, loaded when first
    needed), a TextTooLong saying by how much otherwise."""

    def __init__(self, model: str, positions: int,
                 encode: Callable[[str], list[int]] | None = None):
        self.model, self.positions, self._encode = model, positions, encode

    @classmethod
    def of(cls, engine) -> TextBound:
        """The bound of an engine's model, encoding with the engine's `encode`."""
        return cls(engine.model, engine.model_config.max_position_embeddings, engine.encode)

    @property
    def chars(self) -> int:
        """The bound in characters: positions x the longest token's characters."""
        return self.positions * (token_chars(self.model) or 1)

    def check_chars(self, text: str) -> None:
        """A TextTooLong when `text` has more characters than any text that fits (its
        tokenizer is asked only for a text longer than the positions)."""
        if len(text) > self.positions and len(text) > self.chars:
            raise TextTooLong(f"{len(text)} characters of text, more than any text of at "
                              f"most {self.positions} tokens can have ({self.chars}: "
                              f"{self.model}'s {self.positions} positions x the "
                              f"{self.chars // self.positions} characters of its longest "
                              "token): it can never be scored")

    def encode(self, text: str) -> list[int]:
        if self._encode is None:
            from .checkpoint import encode
            from .facts import tokenizer_of

            tokenizer = tokenizer_of(self.model)
            self._encode = lambda t: encode(tokenizer, t)
        return self._encode(text)

    def __call__(self, text: str) -> list[int]:
        self.check_chars(text)
        if len(text) > PIECE_CHARS:
            counted = seams = read = 0
            for k, piece in enumerate(pieces(text)):
                counted += len(self.encode(piece))
                seams, read = seams + (k > 0), read + len(piece)
                if counted - seams > self.positions:
                    raise TextTooLong(f"more than {self.positions} tokens, the positions of "
                                      f"{self.model} ({counted} counted in the first {read} "
                                      f"of {len(text)} characters): it can never be scored")
        ids = self.encode(text)
        if len(ids) > self.positions:
            raise TextTooLong(f"{len(ids)} tokens, more than the {self.positions} positions "
                              f"of {self.model}: it can never be scored")
        return ids
