"""Ingest against the real Redis: every format, strict rejection with nothing appended,
idempotent ids learned once, 429 over the lag limit."""

from __future__ import annotations

import httpx
import orjson
import pytest

from service.settings import Settings
from tests.api.conftest import BINARY_SPEC, assert_error, dense, learn_all, running, store_metrics


@pytest.fixture
async def model(api: httpx.AsyncClient) -> httpx.AsyncClient:
    assert (await api.put("/models/m", json=BINARY_SPEC)).status_code == 201
    return api


async def test_every_format_is_accepted_and_learned(
    model: httpx.AsyncClient, settings: Settings
) -> None:
    one = await model.post("/models/m/examples", json=dense(1))
    assert one.status_code == 202 and one.json() == {"accepted": 1, "duplicates": 0}
    batch = await model.post("/models/m/examples", json={"examples": [dense(i) for i in range(4)]})
    assert batch.json()["accepted"] == 4
    nd = b"\n".join(orjson.dumps(dense(i)) for i in range(3))
    r = await model.post(
        "/models/m/examples", content=nd, headers={"content-type": "application/x-ndjson"}
    )
    assert r.status_code == 202 and r.json()["accepted"] == 3
    svm = b"1 0:1 3:1\n-1 1:1 3:1\n"
    r = await model.post(
        "/models/m/examples", content=svm, headers={"content-type": "text/x-svmlight"}
    )
    assert r.status_code == 202 and r.json()["accepted"] == 2
    r = await model.post(
        "/models/m/examples?format=svmlight", content=svm, headers={"content-type": "text/plain"}
    )
    assert r.status_code == 202 and r.json()["accepted"] == 2
    await learn_all(settings)
    assert (await store_metrics(settings, "m"))["examples_seen"] == 12


@pytest.mark.parametrize(
    ("examples", "field", "index"),
    [
        ([dense(0), {"features": [1, 0, 0], "label": 1}], "features", 1),
        ([dense(0), dense(1), {"features": [1, 0, 0, 0], "label": 7}], "label", 2),
        ([{"features": [1, 0, 0, 0]}], "label", 0),
        (
            [{"features": {"0": 1.0}, "label": 1}, {"features": {"9": 1.0}, "label": 1}],
            "features",
            1,
        ),
        (
            [{"features": {"0": 1.0}, "label": 1}, {"features": {"x": 1.0}, "label": 1}],
            "features",
            1,
        ),
        ([dense(0), {"features": [1, "a", 0, 0], "label": 1}], "features", 1),
        ([dense(0), {"features": [1, 0, 0, 0], "label": 1, "id": {"a": 1}}], "id", 1),
    ],
)
async def test_one_bad_example_rejects_the_batch_and_appends_nothing(
    model: httpx.AsyncClient, settings: Settings, examples: list[object], field: str, index: int
) -> None:
    err = assert_error(
        await model.post("/models/m/examples", json={"examples": examples}), 422, "invalid_example"
    )
    assert err["index"] == index, err
    assert err["field"].startswith(field), err
    assert field in err["message"] and f"index {index}" in err["message"], err
    assert (await store_metrics(settings, "m"))["appended"] == 0


async def test_transport_errors_append_nothing(
    model: httpx.AsyncClient, settings: Settings
) -> None:
    assert_error(
        await model.post(
            "/models/m/examples",
            content=b'{"examples": [',
            headers={"content-type": "application/json"},
        ),
        400,
        "malformed_body",
    )
    assert_error(
        await model.post("/models/m/examples", content=b"x", headers={"content-type": "text/csv"}),
        415,
        "unsupported_media_type",
        "text/csv",
    )
    assert_error(
        await model.post("/models/nope/examples", json=dense(0)), 404, "model_not_found", "nope"
    )
    assert (await store_metrics(settings, "m"))["appended"] == 0


async def test_nan_and_overflow_never_reach_the_stream(
    model: httpx.AsyncClient, settings: Settings
) -> None:
    for raw in (
        b'{"features": [NaN, 0, 0, 0], "label": 1}',
        b'{"features": [1e999, 0, 0, 0], "label": 1}',
    ):
        r = await model.post(
            "/models/m/examples", content=raw, headers={"content-type": "application/json"}
        )
        assert_error(r, 400, "malformed_body")
    assert (await store_metrics(settings, "m"))["appended"] == 0


async def test_repeated_ids_get_the_same_answer_and_are_learned_once(
    model: httpx.AsyncClient, settings: Settings
) -> None:
    examples = [{**dense(i), "id": f"e{i}"} for i in range(6)]
    first = await model.post("/models/m/examples", json={"examples": examples})
    again = await model.post("/models/m/examples", json={"examples": examples})
    assert first.status_code == again.status_code == 202
    ids = [f"e{i}" for i in range(6)]
    assert first.json() == {"accepted": 6, "duplicates": 0, "ids": ids}
    assert again.json() == {"accepted": 6, "duplicates": 6, "ids": ids}
    within = await model.post("/models/m/examples", json={"examples": [examples[0], examples[0]]})
    assert within.json() == {"accepted": 2, "duplicates": 2, "ids": ["e0", "e0"]}
    fresh = await model.post("/models/m/examples", json={**dense(0), "id": "new"})
    assert fresh.json() == {"accepted": 1, "duplicates": 0, "ids": ["new"]}
    mixed = [{**dense(i), "id": f"x{i}"} for i in range(70)]  # past the micro-batching size
    big = await model.post("/models/m/examples", json={"examples": [*examples, *mixed, *mixed]})
    assert big.json()["duplicates"] == 6 + 70
    await learn_all(settings)
    assert (await store_metrics(settings, "m"))["examples_seen"] == 6 + 1 + 70


async def test_lag_over_the_limit_is_429_with_retry_after(settings: Settings) -> None:
    settings.max_lag = 5
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        ok = await c.post("/models/m/examples", json={"examples": [dense(i) for i in range(5)]})
        assert ok.status_code == 202
        r = await c.post("/models/m/examples", json={"examples": [dense(0)]})
        assert_error(r, 429, "lag_exceeded", "max_lag")
        assert r.headers["retry-after"] == "1"
        await learn_all(settings)
        assert (await c.post("/models/m/examples", json=dense(0))).status_code == 202
    assert (await store_metrics(settings, "m"))["appended"] == 6


async def test_batch_over_max_batch_is_413(settings: Settings) -> None:
    settings.max_batch = 3
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        r = await c.post("/models/m/examples", json={"examples": [dense(i) for i in range(4)]})
        assert_error(r, 413, "payload_too_large", "max_batch")
    assert (await store_metrics(settings, "m"))["appended"] == 0


async def test_body_over_the_limit_is_413_while_reading(settings: Settings) -> None:
    settings.max_body_bytes = 1000

    async def chunks():  # type: ignore[no-untyped-def]
        yield b'{"examples": ['
        for _ in range(100):
            yield orjson.dumps(dense(0)) + b","
        yield b"]}"

    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        declared = await c.post("/models/m/examples", content=b"x" * 1001)
        assert_error(declared, 413, "payload_too_large", "max_body_bytes")
        streamed = await c.post("/models/m/examples", content=chunks())
        assert_error(streamed, 413, "payload_too_large", "max_body_bytes")
    assert (await store_metrics(settings, "m"))["appended"] == 0


async def test_meta_is_accepted_and_ignored_any_other_unknown_key_is_422(
    model: httpx.AsyncClient, settings: Settings
) -> None:
    tagged = [{**dense(i), "meta": [{"from": "crm"}, 7, None][i % 3]} for i in range(6)]
    r = await model.post("/models/m/examples", json={"examples": tagged})
    assert r.status_code == 202, r.text
    err = assert_error(
        await model.post("/models/m/examples", json={**dense(0), "source": "crm"}),
        422,
        "invalid_example",
        "source",
    )
    assert err["field"] == "source"
    await learn_all(settings)
    plain = await model.post("/models/m/predict", json={"features": [1.0, 0.0, 0.0, 1.0]})
    with_meta = await model.post(
        "/models/m/predict", json={"features": [1.0, 0.0, 0.0, 1.0], "meta": {"x": 1}}
    )
    assert with_meta.status_code == 200, with_meta.text
    assert with_meta.json()["margin"] == plain.json()["margin"]
    assert (await store_metrics(settings, "m"))["examples_seen"] == 6


async def test_an_example_with_neither_features_nor_text_is_empty_example(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    assert (await api.put("/models/h", json={"algorithm": "pa1", "bits": 8})).status_code == 201
    for bad in ({"label": 1}, {"features": None, "label": 1}, {"text": None, "label": -1}):
        r = await api.post(
            "/models/h/examples", json={"examples": [{"text": "ok", "label": 1}, bad]}
        )
        err = assert_error(r, 422, "empty_example", "neither")
        assert err["index"] == 1
    assert (await store_metrics(settings, "h"))["appended"] == 0
    bias_only = await api.post("/models/h/examples", json={"features": {}, "label": 1})
    assert bias_only.status_code == 202, bias_only.text
    await learn_all(settings)
    assert (await store_metrics(settings, "h"))["examples_seen"] == 1


async def test_text_works_on_a_model_created_with_an_algorithm_only(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    assert (await api.put("/models/t", json={"algorithm": "pa1"})).status_code == 201
    spec = (await api.get("/models/t")).json()["spec"]
    assert spec["text"]["word_ngrams"] == [1, 1] and spec["text"]["normalize"] is True
    r = await api.post("/models/t/examples", json={"text": "win money now", "label": 1})
    assert r.status_code == 202, r.text
    none = {"algorithm": "pa1", "text": False}
    assert (await api.put("/models/n", json=none)).status_code == 201
    r = await api.post("/models/n/examples", json={"text": "win money now", "label": 1})
    assert_error(r, 422, "invalid_example", "no text featurizer", '"text": false')


async def test_the_spam_preset_takes_ham_and_spam_labels(api: httpx.AsyncClient) -> None:
    created = await api.put("/models/s", json={"preset": "spam"})
    assert created.status_code == 201 and created.json()["spec"]["classes"] == ["ham", "spam"]
    r = await api.post("/models/s/examples", json={"text": "cheap pills", "label": "spam"})
    assert r.status_code == 202, r.text


async def test_big_json_batches_of_named_features_take_one_path_with_the_same_answers(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    """A big JSON body is read by the compiled reader: the same ids, duplicates, errors and
    predictions as the general path (the same examples as NDJSON), learned exactly once."""
    assert (await api.put("/models/h", json={"algorithm": "pa1", "bits": 10})).status_code == 201

    def ex(i: int) -> dict[str, object]:
        feats = {f"w{(i * 7 + k) % 50}": (i + k) % 5 - 2.5 for k in range(12)}
        return {"features": feats, "label": 1 if i % 3 else -1, "id": f"h{i % 150}"}

    rows = [ex(i) for i in range(200)]  # ids h0..h149, fifty of them twice
    assert len(orjson.dumps(rows)) > 16 * 1024
    first = await api.post("/models/h/examples", json={"examples": rows})
    assert first.status_code == 202
    assert first.json()["duplicates"] == 50 and first.json()["ids"] == [r["id"] for r in rows]
    nd = b"\n".join(orjson.dumps(r) for r in rows)
    again = await api.post(
        "/models/h/examples", content=nd, headers={"content-type": "application/x-ndjson"}
    )
    assert again.json()["duplicates"] == 200
    bad = [*rows[:120], {**rows[120], "label": 7}, *rows[121:]]
    r = await api.post("/models/h/examples", json={"examples": bad})
    err = assert_error(r, 422, "invalid_example", "label 7")
    assert (err["field"], err["index"]) == ("label", 120)
    await learn_all(settings)
    assert (await store_metrics(settings, "h"))["examples_seen"] == 150
    plain = [{"features": r["features"]} for r in rows]
    fast = (await api.post("/models/h/predict?feedback=false", json={"examples": plain})).json()
    small = [
        (await api.post("/models/h/predict?feedback=false", json=p)).json() for p in plain[:70]
    ]
    assert fast["predictions"][:70] == small
