"""Upper bounds of the counts a config or a command sets, each with the reason it is
refused beyond it: past them a run would not finish in any useful time, its artifact
would grow too large to read, or the system would refuse a file name. Checked at the edge
(a ConfigError naming the key; a one-line error naming the flag), stated in the message.
"""

from __future__ import annotations

from pydantic import AfterValidator

from mibench.errors import MibenchError

# a file name's bytes (NAME_MAX on Linux and macOS)
NAME_MAX = 255
# a config's name starts the run id `<name>-<YYYYMMDDTHHMMSSZ>-<4 hex>` (22 bytes more; a
# compile run adds `-<target>`, up to 9), and the files named after the run id add up to
# 19 more (`.<run id>.json.<8 random>.tmp` while it is written; `.json.lock`,
# `.summary.json`): 200 + 22 + 9 + 19 = 250 <= NAME_MAX
MAX_NAME = 200

BOUNDS: dict[str, tuple[int, str]] = {
    "name": (MAX_NAME, f"characters: the run id `<name>-<UTC stamp>-<4 hex>` and the files "
                       f"named after it (`.<run id>.json.<random>.tmp` while it is written) "
                       f"must fit a file name's {NAME_MAX} bytes"),
    "runs.processes": (100, "each process is a fresh worker that loads the engine and "
                            "compiles again (seconds to minutes each); the spread between "
                            "processes shows in a handful"),
    "runs.warmup": (1_000, "warmup runs are full passes over the workload that are thrown "
                           "away; a few settle any cache"),
    "runs.timed": (10_000, "each timed run is a full pass over the workload and a number in "
                           "the artifact; the statistics gain nothing from more"),
    "requests": (100_000, "each measured request is a record of about 150 bytes in the "
                          "artifact: more makes an artifact of tens of MB to read back"),
    "warmup_requests": (10_000, "warmup requests are thrown away; a few settle the server"),
    "clients": (1_000, "each client is a thread with its own connection: past that the load "
                       "generator, not the server, is measured, and a process's usual limit "
                       "of 1024 open files is near"),
    "--rounds": (1_000, "each round starts fresh workers of both revisions (seconds to "
                        "minutes); the paired test settles in tens of rounds"),
    "--seed-runs": (100, "each seeding run is a whole run of the config at HEAD (minutes to "
                         "hours), one after another; the noise is learnt from a handful"),
    "cold_start.launches": (1_000, "each launch starts the server afresh and waits for it "
                                   "to be ready (seconds to minutes); the spread of start "
                                   "times shows in a handful"),
    "concurrency.trials": (1_000, "each trial launches the server afresh and scores the "
                                  "requests alone and all together (seconds to minutes)"),
    "prefix_cache.trials": (1_000, "each trial launches the server afresh (and its cache-off "
                                   "control once more) and scores the requests cold and "
                                   "warm (seconds to minutes)"),
}
BOUNDS["--max-rounds"] = BOUNDS["--rounds"]
BOUNDS["--sockets"] = (10_000, "each socket is an open file of the crowd's process and of "
                               "the server's; the lockout it measures showed at 300")
BOUNDS["--requests"] = (10_000, "one request every --interval: past that the job runs for "
                                "hours")


def bound_problem(key: str, value: int) -> str | None:
    """Why `value` is too large for `key` (BOUNDS), or None."""
    limit, why = BOUNDS[key]
    size = len(value) if isinstance(value, str) else value
    if size <= limit:
        return None
    return f"{size} is more than {limit}{' characters' if isinstance(value, str) else ''}: " \
           f"{why.removeprefix('characters: ')}"


def at_most(key: str) -> AfterValidator:
    """A config field's bound: a larger value is a validation error with its reason."""
    def check(value):
        problem = bound_problem(key, value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


def check_flag(value: int, key: str) -> None:
    """A command-line count (`--rounds`) within its bound, else a MibenchError naming it."""
    problem = bound_problem(key, value)
    if problem:
        raise MibenchError(problem, field=key)
