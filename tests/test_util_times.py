"""harness/util.py: the one parser of records' time stamps and the one formatter of
compiled costs (each was written out in several modules)."""

import datetime as dt

from mibench.harness.util import now, parse_time, short_number


def test_time_stamps_parse_aware_whatever_their_spelling():
    utc = dt.datetime(2026, 11, 29, 5, 1, 49, 897000, tzinfo=dt.UTC)
    assert parse_time("2026-11-29T05:01:49.897Z") == utc
    assert parse_time("2026-11-29T05:01:49.897+00:00") == utc
    assert parse_time("2026-11-29T06:01:49.897+01:00") == utc  # the same instant
    assert parse_time("2026-11-29T05:01:49.897") == utc  # no offset: UTC
    assert parse_time(now()).tzinfo is not None
    for bad in ("yesterday", "", None, 3):
        assert parse_time(bad) is None


def test_compiled_costs_for_people():
    assert short_number(None) == "-" and short_number(12) == "12"
    assert short_number(1.5e9) == "1.500G" and short_number(-2e12) == "-2.000T"
    assert short_number(3 * 2**20, "B") == "3.00 MiB"
