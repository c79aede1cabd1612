"""A mode is one object (engines/modes/registry.py): its scorer, token accounting, memory
estimate, defaults, semantics and examples. Adding one is a scorer plus one registry line;
the engine, the config validator, case ids and the tests then know it with no other edit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import DELIM, LABELS, mode_examples

from mibench.engines import MODES, MibenchError, Mode, Shape
from mibench.engines.modes import accounting


def score_reversed(engine, req, **options):
    """A toy mode: `single` over the items in reverse order, rows put back in order."""
    from mibench.engines.modes.single import score_single

    flipped = dataclasses.replace(req, items=tuple(reversed(req.items)))
    return score_single(engine, flipped, **options)[::-1]


def toy_memory(shape: Shape, options: dict) -> dict[str, float]:
    return {"dense mask": shape.num_items * 10.0 ** 15}  # a petabyte a item: always refused


TOY = Mode(name="reversed", doc="single, items in reverse order (a test's toy mode)",
           defaults={"attention": "auto"}, scorer=score_reversed,
           tokens=lambda prefix_len, item_lens, options, semantics: 7 * len(item_lens),
           memory=toy_memory, examples=({"attention": "xla"},))


@pytest.fixture
def toy():
    with MODES["jax"].entry("reversed", TOY):  # the one registry line, for the test
        yield TOY


def test_a_registered_mode_scores_counts_and_is_covered(toy, jax_tiny, make_request):
    query, items = make_request(5, query_len=24, num_items=5, item_len=(2, 7))
    got = jax_tiny.score(query, items, LABELS, mode="reversed", delimiter=DELIM)
    want = jax_tiny.score(query, items, LABELS, mode="single", delimiter=DELIM)
    assert len({tuple(r) for r in want.scores}) == len(items)  # items differ: a real check
    np.testing.assert_allclose(np.log(got.scores), np.log(want.scores), rtol=0, atol=1e-5)
    assert got.num_tokens == 7 * len(items)  # its own accounting, not another mode's
    assert "reversed" in jax_tiny.modes
    assert ("reversed", {"attention": "xla"}) in mode_examples()  # the tests loop over it
    with pytest.raises(MibenchError, match="does not take option"):
        jax_tiny.score(query, items, LABELS, mode="reversed", delimiter=DELIM, mask="dense")


def test_a_registered_mode_is_known_to_configs(toy, tmp_path):
    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand

    path = tmp_path / "toy.yaml"
    path.write_text("name: toy\nmodel: {path: 'embedded:tiny'}\n"
                    "workload: {query_tokens: 8, num_items: 1, item_tokens: 2, "
                    "label_token_ids: [198], delimiter: 151643}\n"
                    "cases:\n  - {engine: jax, mode: reversed, attention: xla}\n")
    with pytest.raises(MibenchError, match=r"cases\.0\.mode.*dense mask") as e:
        load_config(path, [])  # its memory estimate decides, naming the mode
    assert "host memory" in str(e.value)
    with MODES["jax"].entry("reversed", dataclasses.replace(TOY, memory=accounting.memory_none)):
        config = load_config(path, [])
        assert [c.case_id for c in expand(config)][0].startswith("jax/reversed/")


def test_every_declared_mode_has_its_parts():
    """Each engine's modes resolve their scorer (http: the engine itself), count tokens
    and estimate memory."""
    shape = Shape(prefix_len=9, num_items=4, item_len=3.0)
    for engine, modes in MODES.items():
        for mode in modes.values():
            if engine != "http":
                assert callable(mode._scorer()), (engine, mode.name)
            assert mode.examples, (engine, mode.name)
            for example in mode.examples:
                mode.check(example)
            assert mode.num_tokens(9, [3, 3, 3, 3], {}, "delimited") >= 12
            assert mode.host_bytes(shape, {})["token lists"] > 0


def test_the_flax_shell_holds_the_placed_weights_without_a_copy(jax_tiny):
    """The engine's parameter pytree is the very arrays the nnx.Params hold."""
    import jax

    pairs = zip(jax.tree.leaves(jax_tiny.params), jax.tree.leaves(jax_tiny.module.weights()),
                strict=True)
    assert all(a is b for a, b in pairs)
    assert jax_tiny.module.embed[...] is jax_tiny.params["embed"]
