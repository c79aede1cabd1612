"""The error classes every part of mibench raises for expected failures (bad input, bad
config, missing files). Neutral: `engines`, `harness` and `workloads` all import it, and it
imports nothing of theirs."""

from __future__ import annotations


class MibenchError(ValueError):
    """An expected failure: the CLI prints its message as one line and exits `exit_code`
    (2: bad input or nothing that could be judged).

    `field` names the input, config key or file at fault, so the message can point at it;
    `message` is the message alone (`str(e)` is `field: message`). A caller that names the
    same input another way (a CLI flag, a config key, a request field) re-keys the error
    with `under`, never by editing its text.
    """

    exit_code = 2

    def __init__(self, message: str, field: str | None = None):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}" if field else message)

    def under(self, field: str | None, cls: type[MibenchError] | None = None) -> MibenchError:
        """The same failure with the same message, named under `field`: an error of `cls`,
        default this error's own class (MibenchError for one built another way)."""
        if cls is None:
            cls = type(self) if type(self).__init__ is MibenchError.__init__ else MibenchError
        return cls(self.message, field=field)


class InputError(MibenchError):
    """A bad scoring request: empty query, token id out of range, misplaced delimiter..."""


class TextTooLong(InputError):
    """A text that can never fit its model, by its characters or its tokens
    (engines/text.py)."""


class InvalidScores(MibenchError):
    """Scores that no correct engine returns (not finite, outside [0, 1], a row that does
    not sum as it must), from an engine or a server: the call fails naming the item, and
    a case that got them is `failed`, never recorded as ok."""


class EnvironmentFailed(MibenchError):
    """The environment failed mid-run (disk full, a file-size limit, a quota, a read-only or
    vanished folder, permissions): the CLI prints the message as one line and exits 4 (not
    2: the input was fine). The message names the path, what is safe and how to go on."""

    exit_code = 4


class Unavailable(MibenchError):
    """Something a case needs that this machine lacks: the case is skipped, not failed."""


class TopologyUnavailable(Unavailable):
    """More devices asked for than exist."""


class ServerUnavailable(Unavailable):
    """A launched server's interpreter (or another variable its launch names) is not set
    on this machine."""


class ModelError(MibenchError):
    """A model that cannot be loaded: unknown preset, not a checkpoint, unsupported architecture."""


def closest(word: str, known, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The names of `known` closest to `word` (difflib's ratio, at least `cutoff`), best
    first: the "did you mean" of an unknown key, file or case id."""
    import difflib

    return difflib.get_close_matches(word, [str(k) for k in known], n=n, cutoff=cutoff)


def did_you_mean(word: str, known, n: int = 3) -> str:
    """`; did you mean 'a' or 'b'?` for the names of `known` closest to `word`, else ''."""
    close = closest(word, known, n)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def closest_first(word: str, names, most: int = 40, shown: int = 10) -> str:
    """Every one of `names` (each once), the closest to `word` first (difflib's ratio to
    the name or to its start, as a glob's `prefix*` matches; wildcards left out):
    `a, b, c`; more than `most`: the closest `shown`, then `... and N more`. For an error
    that must list what exists (`--case` globs)."""
    import difflib

    bare = word.replace("*", "").replace("?", "")

    def near(name: str) -> float:
        return max(difflib.SequenceMatcher(None, bare, n).ratio()
                   for n in (name, name[:len(bare)]))

    ordered = sorted(dict.fromkeys(str(n) for n in names), key=lambda n: -near(n))
    if len(ordered) <= most:
        return ", ".join(ordered)
    return ", ".join(ordered[:shown]) + f", ... and {len(ordered) - shown} more"
