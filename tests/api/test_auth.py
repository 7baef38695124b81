"""API keys: parsing, constant-time checks, scopes (401 vs 403), and the open mode."""

from __future__ import annotations

import pytest

from service.api.auth import READ, Authenticator, parse_keys, presented_key
from service.errors import Forbidden, Unauthorized


def test_parse_keys_reads_scopes() -> None:
    keys = parse_keys("k1:learn,predict; k2:admin ;")
    assert [k.secret for k in keys] == [b"k1", b"k2"]
    assert keys[0].scopes == {"learn", "predict"}
    assert keys[1].scopes == {"admin"}


@pytest.mark.parametrize("spec", ["k1", "k1:", "k1:write", ":admin"])
def test_parse_keys_rejects_bad_entries_without_echoing_the_key(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_keys(spec)
    assert "entry 0" in str(info.value)
    assert "k1" not in str(info.value)


def test_scopes() -> None:
    auth = Authenticator(parse_keys("lk:learn;pk:predict;ak:admin"))
    auth.check("lk", "learn")
    auth.check("pk", "predict")
    auth.check("pk", READ)
    for scope in ("learn", "predict", "admin"):
        auth.check("ak", scope)  # admin implies every scope
    with pytest.raises(Forbidden):
        auth.check("lk", "predict")
    with pytest.raises(Forbidden):
        auth.check("pk", "admin")
    with pytest.raises(Unauthorized):
        auth.check(None, "learn")
    with pytest.raises(Unauthorized):
        auth.check("nope", READ)
    with pytest.raises(Unauthorized):
        auth.check("", READ)


def test_open_mode_lets_everything_through(caplog: pytest.LogCaptureFixture) -> None:
    from service.api.auth import warn_if_open

    auth = Authenticator(parse_keys(""))
    assert auth.open
    auth.check(None, "admin")
    with caplog.at_level("WARNING"):
        warn_if_open(auth)
    assert "OPEN" in caplog.text


def test_presented_key_sources() -> None:
    assert presented_key("Bearer abc", None) == "abc"
    assert presented_key("bearer  abc ", None) == "abc"
    assert presented_key(None, "xyz") == "xyz"
    assert presented_key("Basic Zm9v", None) == ""  # present but not usable: invalid, not absent
    assert presented_key(None, None) is None
