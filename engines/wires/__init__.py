"""Server wires: how a request for scores is put to a server and its answer read. The
`http` engine and the harness's load generator speak only through a wire; a server with
another API is one module here and one `WIRES.add` line. `Wire` states what a wire is;
`DEFAULT_WIRE` is the one an http case speaks unless it names another (`wire:`).

`describe` and `fact_problem` word a server fact that differs from what a request wants.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from mibench.registry import Registry

if TYPE_CHECKING:
    from mibench.errors import InputError

    from ..http_client import HttpClient, Reply

# name -> the wire's class, imported on first lookup
WIRES: Registry[type[Wire]] = Registry("wire", field="wire")
WIRES.add("sglang", "mibench.engines.wires.sglang:SGLang")
DEFAULT_WIRE = "sglang"  # SGLang's /v1/score


@runtime_checkable
class Wire(Protocol):
    """What every wire implements (engines/wires/sglang.py is one)."""

    name: str  # the registry name (an http case's `wire:`)

    def encode(self, query, items, label_token_ids, apply_softmax: bool = False,
               model: str | None = None) -> bytes:
        """The request body, built once before any timing."""

    def send(self, client: HttpClient, body: bytes) -> Reply:
        """The request on an HttpClient (engines/http_client.py)."""

    def decode(self, reply: Reply, num_items: int, num_labels: int,
               apply_softmax: bool = False, dtype: str | None = "float32"
               ) -> list[list[float]]:
        """A 200 answer's scores, checked where they enter (shape, finite probabilities,
        rows), or a ValueError naming the item."""

    def usage(self, reply: Reply) -> int | None:
        """The tokens the server says it ran, when it says."""

    def error(self, reply: Reply) -> InputError:
        """A refused request (400/413/422) as the field it names."""

    def facts(self, client: HttpClient, served_model: str | None) -> dict | None:
        """What the server says it scores with (delimiter, semantics, dtype, mode), {}
        when it does not say, None when it does not answer now."""

    def info(self, client: HttpClient) -> dict:
        """What the server says it is (version, settings), for the record of a launched
        server."""


def wire(name: str = DEFAULT_WIRE) -> Wire:
    """The wire called `name`, or a MibenchError naming `wire`."""
    return WIRES.lookup(name)()


def describe(value) -> str:
    """A server fact as a reader should see it: a token id, a name, or, for anything else,
    its JSON type and value (so `"151643"` never reads like the token id 151643)."""
    if value is None:
        return "none"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"token id {value}"
    kind = {str: "a string", bool: "a boolean", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
    return f"{kind} ({json.dumps(value)[:40]})"


def fact_problem(facts: dict, key: str, wanted) -> str | None:
    """What differs between what a server reports (`facts[key]`, GET /v1/models) and what
    the request or case wants, in words that say when only the types differ; None when
    they agree or the server does not say."""
    if key not in facts:
        return None
    got = facts[key]
    if got == wanted and type(got) is type(wanted):
        return None
    if isinstance(wanted, str):  # semantics, dtype: names
        if isinstance(got, str):
            return f"scores with {key} {got}"
        return f"reports its {key} as {describe(got)}, not a name"
    if type(got) is not type(wanted) and str(got) == str(wanted):
        return (f"reports its {key} as {describe(got)}, not as the {describe(wanted)}: "
                "the types differ (a server must report a token id)")
    return f"scores with {key} {describe(got)}"
