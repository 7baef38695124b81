"""API keys and scopes.

``settings.api_keys`` reads ``key:scope,scope;key2:admin``. Scopes are ``learn`` (ingest and
feedback), ``predict`` (predictions and monitoring reads) and ``admin`` (create/delete models,
rollback, pin), and ``admin`` implies the other two. Keys are compared in constant time
(:func:`hmac.compare_digest`) against every configured key, so timing reveals neither a key nor
which one matched, and no key is ever logged. With no keys the service is open (and says so
loudly at start-up).
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass

from service.errors import Forbidden, Unauthorized

log = logging.getLogger("streamlearn.api")

SCOPES = frozenset({"learn", "predict", "admin"})
READ = "read"  # any valid key may read monitoring data


@dataclass(frozen=True, slots=True)
class ApiKey:
    secret: bytes
    scopes: frozenset[str]


def parse_keys(spec: str) -> tuple[ApiKey, ...]:
    """Parse ``key:scope,scope;key2:admin``; errors name the entry by position, never the key."""
    keys: list[ApiKey] = []
    for pos, raw in enumerate(p.strip() for p in spec.split(";")):
        if not raw:
            continue
        secret, sep, scopes_s = raw.rpartition(":")
        if not sep or not secret:
            raise ValueError(f"api_keys entry {pos} must read 'key:scope[,scope]'")
        scopes = frozenset(s.strip() for s in scopes_s.split(",") if s.strip())
        unknown = scopes - SCOPES
        if not scopes or unknown:
            raise ValueError(
                f"api_keys entry {pos}: scopes must be among {sorted(SCOPES)}, "
                f"got {sorted(unknown) or 'none'}"
            )
        keys.append(ApiKey(secret.encode(), scopes))
    return tuple(keys)


class Authenticator:
    """Checks a presented key for a scope; open when no keys are configured."""

    def __init__(self, keys: tuple[ApiKey, ...]) -> None:
        self.keys = keys

    @property
    def open(self) -> bool:
        return not self.keys

    def scopes_of(self, presented: str | None) -> frozenset[str] | None:
        if presented is None:
            return None
        given = presented.encode()
        found: frozenset[str] | None = None
        for key in self.keys:  # no early exit: the time does not depend on which key matched
            if hmac.compare_digest(key.secret, given):
                found = key.scopes
        return found

    def check(self, presented: str | None, scope: str) -> None:
        """Raise 401 without a valid key, 403 when the key lacks ``scope``."""
        if self.open:
            return
        if presented is None:
            raise Unauthorized(
                "an API key is required (Authorization: Bearer <key> or X-API-Key)",
                field="authorization",
            )
        scopes = self.scopes_of(presented)
        if scopes is None:
            raise Unauthorized("the API key is not valid", field="authorization")
        if scope == READ or "admin" in scopes or scope in scopes:
            return
        raise Forbidden(f"the API key lacks the {scope!r} scope", field="authorization")


def presented_key(authorization: str | None, x_api_key: str | None) -> str | None:
    """The key from ``Authorization: Bearer …`` or ``X-API-Key``."""
    if x_api_key:
        return x_api_key.strip()
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        return ""  # present but not a bearer token: treated as an invalid key
    return None


def warn_if_open(auth: Authenticator) -> None:
    if auth.open:
        log.warning(
            "!!! NO API KEYS CONFIGURED: the streamlearn API is OPEN to anyone who can reach it. "
            "Set STREAMLEARN_API_KEYS='key:learn,predict;adminkey:admin' to protect it. !!!"
        )
