"""The fast tier's rule (tests/conftest.py): a test not marked slow starts no server. The
guard fails such a test naming it, fixtures included; a slow test may listen; a test that
uses the `served` fixture is marked slow at collection."""

from __future__ import annotations

import socket

import conftest
import pytest


def _bound() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def test_a_fast_test_that_listens_fails_naming_itself():
    with _bound() as s, pytest.raises(AssertionError, match=(
            r"test_fast_tier\.py::test_a_fast_test_that_listens_fails_naming_itself listens "
            r"on a socket \(starts a server\): a fast-tier test may not; mark it slow")):
        s.listen()


@pytest.mark.slow
def test_a_slow_test_may_listen():
    with _bound() as s:
        s.listen()
        assert s.getsockname()[1] > 0


def test_outside_a_test_the_guard_lets_listen_through():
    """Control: the guard keys on the running test only (collection, session teardown pass)."""
    running, conftest._RUNNING[0] = conftest._RUNNING[0], None
    try:
        with _bound() as s:
            s.listen()
    finally:
        conftest._RUNNING[0] = running


class _Item:
    def __init__(self, fixturenames, marks=()):
        self.fixturenames, self.marks = fixturenames, list(marks)

    def add_marker(self, mark):
        self.marks.append(mark.name)

    def get_closest_marker(self, name):
        return name if name in self.marks else None


def test_a_test_using_served_is_marked_slow_at_collection():
    served, other = _Item(["jax_tiny", "served"]), _Item(["jax_tiny"])
    conftest.pytest_collection_modifyitems(None, [served, other])
    assert served.marks == ["slow"] and other.marks == []


def test_the_slow_tests_come_first_each_files_order_kept():
    """pytest-xdist hands tests out a few at a time (pyproject's --maxschedchunk) in this
    order: the long ones early, so the workers' last tests are short."""
    a, b = _Item([]), _Item([])
    slow, served, c = _Item([], ["slow"]), _Item(["served"]), _Item([])
    items = [a, slow, b, served, c]
    conftest.pytest_collection_modifyitems(None, items)
    assert items == [slow, served, a, b, c]
