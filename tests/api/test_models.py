"""Models: PUT create/describe/conflict, bad specs named, list, describe, delete."""

from __future__ import annotations

import httpx
import pytest

from service.settings import Settings
from service.store import Store
from tests.api.conftest import BINARY_SPEC, assert_error


async def test_put_creates_then_describes_then_conflicts(mem_api: httpx.AsyncClient) -> None:
    r = await mem_api.put("/models/spam", json=BINARY_SPEC)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["name"] == "spam" and body["version"] == 0
    assert body["spec"]["algorithm"] == "perceptron" and body["feedback_ttl"] == 86400
    again = await mem_api.put("/models/spam", json=BINARY_SPEC)
    assert again.status_code == 200 and again.json() == body
    conflict = await mem_api.put("/models/spam", json={**BINARY_SPEC, "algorithm": "pa1"})
    assert_error(conflict, 409, "spec_conflict", "spam")
    ttl_conflict = await mem_api.put("/models/spam", json={**BINARY_SPEC, "feedback_ttl": 5})
    assert_error(ttl_conflict, 409, "spec_conflict", "feedback_ttl")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"algorithm": "nope"}, "algorithm"),
        ({"algorithm": "pa1", "params": {"C": -1}}, "C"),
        ({"algorithm": "pa1", "colour": "red"}, "colour"),
        ({"algorithm": "pa1", "feedback_ttl": -1}, "feedback_ttl"),
        ({"algorithm": "pa1", "feedback_ttl": "1d"}, "feedback_ttl"),
        ([1, 2], "body"),
    ],
)
async def test_bad_specs_are_422_naming_the_field(
    mem_api: httpx.AsyncClient, body: object, field: str
) -> None:
    err = assert_error(await mem_api.put("/models/x", json=body), 422, "invalid_spec")
    assert field in err["message"] or err.get("field") == field, err
    assert_error(await mem_api.get("/models/x"), 404, "model_not_found", "x")


async def test_spec_body_errors(mem_api: httpx.AsyncClient) -> None:
    bad_json = await mem_api.put(
        "/models/x", content=b"{", headers={"content-type": "application/json"}
    )
    assert_error(bad_json, 400, "malformed_body")
    wrong_type = await mem_api.put(
        "/models/x", content=b"algorithm=pa1", headers={"content-type": "text/plain"}
    )
    assert_error(wrong_type, 415, "unsupported_media_type", "text/plain")


async def test_bad_model_name_is_422(mem_api: httpx.AsyncClient) -> None:
    assert_error(await mem_api.put("/models/-bad", json=BINARY_SPEC), 422, "invalid_spec", "name")


async def test_list_describe_delete(mem_api: httpx.AsyncClient) -> None:
    for name in ("b", "a"):
        assert (
            await mem_api.put(f"/models/{name}", json={**BINARY_SPEC, "feedback_ttl": 60})
        ).status_code == 201
    assert (await mem_api.get("/models")).json() == {"models": ["a", "b"]}
    described = (await mem_api.get("/models/a")).json()
    assert described["feedback_ttl"] == 60
    assert (await mem_api.delete("/models/a")).status_code == 204
    assert_error(await mem_api.delete("/models/a"), 404, "model_not_found")
    assert_error(await mem_api.get("/models/a"), 404, "model_not_found")
    assert_error(
        await mem_api.post("/models/a/examples", json={"text": "x"}), 404, "model_not_found"
    )
    assert (await mem_api.get("/models")).json() == {"models": ["b"]}


# The spam preset ({"classes": ["ham", "spam"]}) as version 0.1 stored it: before the text
# options char_limit/email/tokens and adagrad's invariant param existed (printed by that
# version's ModelSpec.from_dict(...).to_dict()).
SPAM_0_1 = {
    "algorithm": "adagrad", "bits": 20, "classes": ["ham", "spam"], "dim": 1048576,
    "hashing": True, "normalize": False,
    "params": {"bias": True, "loss": "logistic", "lr": 0.5},
    "positive": "spam", "preset": "spam", "quadratic": [],
    "text": {"binary": True, "char_ngrams": None, "normalize": True, "word_ngrams": [1, 1]},
    "transform": "log1p",
}  # fmt: skip


async def test_put_again_matches_a_spec_stored_before_new_defaults(
    mem_settings: Settings, mem_api: httpx.AsyncClient
) -> None:
    """A model stored by an older release lacks keys added since; sending its spec again is
    the same model (200, not 409), compared in today's canonical form — and a spec that
    differs from it (a new key away from its default, another param) still conflicts."""
    store = Store.open(mem_settings)
    try:
        assert await store.create_model("spam", SPAM_0_1)
    finally:
        await store.close()
    # the spam preset was retuned since: asking for "the spam preset" again is this model
    for same in (
        {"classes": ["ham", "spam"]},
        {"preset": "spam"},
        {"preset": "spam", "params": {"lr": 0.5}, "bits": 20},
    ):
        again = await mem_api.put("/models/spam", json=same)
        assert again.status_code == 200, (same, again.text)
        # described as the model is (stored by 0.1, new keys at their defaults), not as the
        # preset is today
        assert again.json()["spec"]["params"]["invariant"] is True
        assert again.json()["spec"]["params"]["loss"] == "logistic"
        assert again.json()["spec"]["text"]["email"] is False
        assert again.json()["spec"]["text"]["char_ngrams"] is None
    for other in (
        {"classes": ["ham", "spam"], "text": {"email": True}},
        {"classes": ["ham", "spam"], "params": {"lr": 0.25}},
        {"preset": "spam", "bits": 18},
        {"preset": "text", "classes": ["ham", "spam"]},
        {"algorithm": "adagrad", "classes": ["ham", "spam"]},
    ):
        assert_error(await mem_api.put("/models/spam", json=other), 409, "spec_conflict")
    # a model stored from today's preset: the same request is the same model, byte for byte
    assert (await mem_api.put("/models/spam2", json={"preset": "spam"})).status_code == 201
    assert (await mem_api.put("/models/spam2", json={"preset": "spam"})).status_code == 200


async def test_hyper_parameters_given_as_strings_or_absurd_are_refused(
    mem_api: httpx.AsyncClient,
) -> None:
    for params, fragment in (
        ({"C": "1"}, "must be a number"),
        ({"C": 1e-320}, "[1e-12, 1e+12]"),
        ({"C": 1e308}, "[1e-12, 1e+12]"),
    ):
        r = await mem_api.put("/models/x", json={"algorithm": "pa1", "params": params})
        err = assert_error(r, 422, "invalid_spec", fragment)
        assert err["field"] == "params.C"
