"""The building blocks of the config models: strict models (unknown keys and wrong types
are errors) and list-or-scalar matrix axes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PositiveFloat


def _listify(v):
    return v if isinstance(v, list) else [v]


def nest(v):
    """precompile_bs: a list of ints is one value; wrap it so a list of lists is the axis."""
    if isinstance(v, list) and v and not any(isinstance(x, list) for x in v):
        return [v]
    return [[v]] if isinstance(v, int) else v


def Axis(t):  # noqa: N802 - reads as a type
    """A matrix axis of `t`: one value, or a non-empty list of them."""
    return Annotated[list[t], BeforeValidator(_listify), Field(min_length=1)]


Dtype = Literal["float32", "bfloat16"]
Finite = Annotated[PositiveFloat, Field(allow_inf_nan=False)]  # a positive finite number
# a time span: past about 9.2e9 s a socket timeout or a timer overflows the platform's
# time_t (OverflowError), and past days no run waits anyway
MAX_SECONDS = 1_000_000
Seconds = Annotated[PositiveFloat, Field(allow_inf_nan=False, le=MAX_SECONDS)]
# open-loop arrivals per second: below one an hour a load of even a few requests outlasts
# any run (and at 1e-300 the arrival times overflow the clock)
MIN_RATE = 1 / 3600
Rate = Annotated[PositiveFloat, Field(allow_inf_nan=False, ge=MIN_RATE)]


class Strict(BaseModel):
    """Unknown keys are errors, and so are values of the wrong type: no coercion, so
    `num_items: true` or `4.0` is not an integer and `apply_softmax: 1` not a boolean."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
