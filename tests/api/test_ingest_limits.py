"""A client cannot grow the API's memory with giant names or tokens: a 1 MB feature name or a
1 MB one-word text is a 422 naming the field, and nothing is appended (real Redis)."""

from __future__ import annotations

import httpx

from service.learning.features import MAX_NAME_CHARS, MAX_TOKEN_CHARS
from service.settings import Settings
from tests.api.conftest import assert_error, running, store_metrics

SPEC = {"algorithm": "pa1", "bits": 12, "classes": ["ham", "spam"], "text": {}}


async def test_a_giant_feature_name_is_422_and_nothing_is_appended(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    assert (await api.put("/models/m", json=SPEC)).status_code == 201
    name = "n" * 1_000_000
    examples = [
        {"features": {"a": 1.0}, "label": "ham"},
        {"features": {"a": 1.0, name: 1.0}, "label": "spam"},
    ]
    r = await api.post("/models/m/examples", json={"examples": examples})
    err = assert_error(r, 422, "invalid_example", f"max_name_chars={MAX_NAME_CHARS}")
    assert err["index"] == 1 and err["field"].startswith("features.nnnn")
    assert len(r.content) < 1000  # the name is not sent back
    r = await api.post("/models/m/predict", json={"features": {name: 1.0}})
    assert_error(r, 422, "invalid_example", "max_name_chars")
    ok = {"features": {"n" * MAX_NAME_CHARS: 1.0}, "label": "ham"}
    assert (await api.post("/models/m/examples", json=ok)).status_code == 202
    assert (await store_metrics(settings, "m"))["appended"] == 1


async def test_a_giant_one_word_text_is_422_and_nothing_is_appended(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    assert (await api.put("/models/m", json=SPEC)).status_code == 201
    examples = [{"text": "hello", "label": "ham"}, {"text": "w" * 999_999, "label": "spam"}]
    r = await api.post("/models/m/examples", json={"examples": examples})
    err = assert_error(r, 422, "invalid_example", f"max_token_chars={MAX_TOKEN_CHARS}")
    assert (err["field"], err["index"]) == ("text", 1)
    assert_error(
        await api.post("/models/m/predict", json={"text": "w" * 999_999}), 422, "invalid_example"
    )
    ok = {"text": "w" * MAX_TOKEN_CHARS, "label": "ham"}
    assert (await api.post("/models/m/examples", json=ok)).status_code == 202
    assert (await store_metrics(settings, "m"))["appended"] == 1


async def test_text_and_feature_limits_name_the_example_and_keep_nothing(
    settings: Settings,
) -> None:
    """The featurizer checks them (once): an over-long text is a 413, too many features a
    422, each naming the field and the index; nothing of the request is appended."""
    settings.max_text_chars, settings.max_features = 100, 10
    async with running(settings) as (_, api):
        await _limits(api, settings)


async def _limits(api: httpx.AsyncClient, settings: Settings) -> None:
    assert (await api.put("/models/m", json=SPEC)).status_code == 201
    too_long = "a " * 51
    examples = [{"text": "hello", "label": "ham"}, {"text": too_long, "label": "spam"}]
    r = await api.post("/models/m/examples", json={"examples": examples})
    err = assert_error(r, 413, "payload_too_large", f"max_text_chars={settings.max_text_chars}")
    assert (err["field"], err["index"]) == ("text", 1)
    r = await api.post("/models/m/predict", json={"examples": examples})
    assert (r.status_code, r.json()["error"]["index"]) == (413, 1)
    r = await api.get("/models/m/predict", params={"text": too_long})
    assert_error(r, 413, "payload_too_large", "max_text_chars")
    many = {f"f{i}": 1.0 for i in range(settings.max_features + 1)}
    r = await api.post("/models/m/examples", json=[{"features": many, "label": "ham"}])
    err = assert_error(r, 422, "invalid_example", f"max_features={settings.max_features}")
    assert (err["field"], err["index"]) == ("features", 0)
    assert (await store_metrics(settings, "m"))["appended"] == 0
