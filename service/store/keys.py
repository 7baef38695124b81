"""Every Redis key and channel name of the service, built in one place.

Each key of model ``m`` carries the hash tag ``{m}`` so that all of one model's keys live on
one Redis Cluster slot: the Lua scripts that append, commit, publish and roll back touch
several of them atomically, which Redis only allows within one slot. The two global keys
(``models`` and ``workers``) are untagged and are only ever touched on their own.

Model names are validated here because they become part of key names: a ``}`` or ``{`` in a
name would move the hash tag, and ``:`` would make key names ambiguous.

>>> k = Keys("sl")
>>> k.spec("spam")
'sl:{spam}:spec'
>>> k.version("spam", 3)
'sl:{spam}:v:3'
"""

from __future__ import annotations

import re

from service.errors import InvalidSpec

MAX_NAME_LENGTH = 128
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def validate_model_name(name: object) -> str:
    """Return ``name`` if it is a usable model name, else raise ``InvalidSpec(field="name")``.

    Allowed: letters, digits, ``_``, ``.`` and ``-``, starting with a letter or digit, at most
    128 characters — safe in a key, a hash tag, a URL path segment and a file name.
    """
    if not isinstance(name, str):
        raise InvalidSpec(f"name must be a string, got {name!r}", field="name")
    if not name or len(name) > MAX_NAME_LENGTH:
        raise InvalidSpec(
            f"name must have 1 to {MAX_NAME_LENGTH} characters, got {len(name)}", field="name"
        )
    if not _NAME.match(name):
        raise InvalidSpec(
            f"name may only hold letters, digits, '_', '.' and '-' and must start with a "
            f"letter or digit, got {name!r}",
            field="name",
        )
    return name


class Keys:
    """Key builder for one key prefix (``settings.key_prefix``; tests use a unique one)."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "sl") -> None:
        if not prefix or any(c in prefix for c in "{}: \t\n"):
            raise ValueError(
                f"key prefix must be non-empty without braces, ':' or spaces, got {prefix!r}"
            )
        self.prefix = prefix

    def _m(self, m: str, suffix: str) -> str:
        validate_model_name(m)
        return f"{self.prefix}:{{{m}}}:{suffix}"

    # --- the key table (docs/pipeline.md, "Redis layout") -------------------------------------
    def spec(self, m: str) -> str:
        """Hash: ``json`` (the canonical spec), ``created_at`` and the model's own
        ``feedback_ttl`` if it has one."""
        return self._m(m, "spec")

    def examples(self, m: str) -> str:
        """Stream: one entry per appended batch (fields ``b`` = encoded batch, ``n`` = rows)."""
        return self._m(m, "examples")

    def state(self, m: str) -> str:
        """Hash: the learner state's ``chain`` (blob numbers), counters, ``cursor``,
        ``applied`` (see pipeline.md, "Redis layout")."""
        return self._m(m, "state")

    def version(self, m: str, n: int) -> str:
        """Hash: immutable version ``n``: metadata and its ``chain``/``schain`` (state and
        serving blob numbers); format-1 versions hold ``state`` and ``serving`` blobs."""
        return self._m(m, f"v:{int(n)}")

    def blobs(self, m: str) -> str:
        """Hash: blob number → immutable state blob (full or delta), shared by the state and
        the versions whose chains name it; unreferenced blobs are removed by the scripts."""
        return self._m(m, "blobs")

    def version_base(self, m: str) -> str:
        """The prefix of every version key, for the Lua scripts that build ``v:{n}``."""
        return self._m(m, "v:")

    def versions(self, m: str) -> str:
        """Sorted set: version numbers (score = number, which is also time order)."""
        return self._m(m, "versions")

    def head(self, m: str) -> str:
        """String: the version predictions use."""
        return self._m(m, "head")

    def lease(self, m: str) -> str:
        """String ``worker-id:epoch`` with a PX TTL: who may learn for ``m``."""
        return self._m(m, "lease")

    def history(self, m: str) -> str:
        """Stream: (examples_seen, mistakes, updates, version) points for charts."""
        return self._m(m, "history")

    def dead(self, m: str) -> str:
        """Stream: entries that could not be decoded or validated, with the reason."""
        return self._m(m, "dead")

    def events(self, m: str) -> str:
        """Pub/sub channel announcing version changes of ``m``."""
        return self._m(m, "events")

    def work(self, m: str) -> str:
        """Pub/sub channel: "``m`` has entries and no lease holder" (the append script, and a
        worker handing a model over), for the workers, who hold only active models."""
        return self._m(m, "work")

    def channels(self, suffix: str) -> str:
        """PSUBSCRIBE pattern of every model's ``suffix`` channel (``events``, ``work``)."""
        return f"{self.prefix}:{{*}}:{suffix}"

    def models(self) -> str:
        """Set of model names (untagged)."""
        return f"{self.prefix}:models"

    # --- the service's own extra keys ------------------------------------------------------
    def epoch(self, m: str) -> str:
        """Counter: the fencing epoch, incremented by every lease grant and by rollback."""
        return self._m(m, "epoch")

    def idempotency(self, m: str) -> str:
        """Sorted set: example ids seen, scored by the server time (ms) they were appended."""
        return self._m(m, "ids")

    def appended(self, m: str) -> str:
        """Counter: examples appended to the stream so far (lag = appended − applied)."""
        return self._m(m, "appended")

    def version_seq(self, m: str) -> str:
        """Counter: the last version number handed out."""
        return self._m(m, "vseq")

    def pins(self, m: str) -> str:
        """Set: pinned version numbers (never removed by retention)."""
        return self._m(m, "pins")

    def head_pin(self, m: str) -> str:
        """String: the version the head is held at while pinned (absent: head follows latest)."""
        return self._m(m, "headpin")

    def prediction(self, m: str, pid: str) -> str:
        """String with TTL: the features kept with a prediction, for feedback."""
        if not pid or any(c in pid for c in "{}: \t\n"):
            raise ValueError(
                f"prediction id must be non-empty without braces, ':' or spaces, got {pid!r}"
            )
        return self._m(m, f"pred:{pid}")

    def prediction_pattern(self, m: str) -> str:
        """SCAN pattern of every kept prediction of ``m`` (for delete)."""
        return self._m(m, "pred:*")

    def workers(self) -> str:
        """Hash (untagged): worker id → JSON ``{"models": [...], "ts": ms, "pid": ...}``."""
        return f"{self.prefix}:workers"

    def model_keys(self, m: str) -> list[str]:
        """Every fixed key of ``m`` (not versions or predictions, which are numbered)."""
        return [
            self.spec(m),
            self.examples(m),
            self.state(m),
            self.blobs(m),
            self.versions(m),
            self.head(m),
            self.lease(m),
            self.history(m),
            self.dead(m),
            self.idempotency(m),
            self.appended(m),
            self.version_seq(m),
            self.pins(m),
            self.head_pin(m),
        ]
