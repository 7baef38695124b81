"""Key names: one builder, the names of docs/pipeline.md, one slot per model, validated model
names."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from service.errors import InvalidSpec
from service.store.keys import MAX_NAME_LENGTH, Keys, validate_model_name


def all_model_keys(k: Keys, m: str) -> list[str]:
    return [
        *k.model_keys(m),
        k.version(m, 1),
        k.version(m, 987654),
        k.epoch(m),
        k.prediction(m, "p123"),
        k.events(m),
    ]


def test_design_names() -> None:
    """The names of the Redis table (docs/pipeline.md), exactly."""
    k = Keys("sl")
    assert k.spec("m") == "sl:{m}:spec"
    assert k.examples("m") == "sl:{m}:examples"
    assert k.state("m") == "sl:{m}:state"
    assert k.version("m", 7) == "sl:{m}:v:7"
    assert k.version_base("m") + "7" == k.version("m", 7)
    assert k.versions("m") == "sl:{m}:versions"
    assert k.head("m") == "sl:{m}:head"
    assert k.lease("m") == "sl:{m}:lease"
    assert k.history("m") == "sl:{m}:history"
    assert k.dead("m") == "sl:{m}:dead"
    assert k.events("m") == "sl:{m}:events"
    assert k.models() == "sl:models"
    assert k.workers() == "sl:workers"


def test_extra_keys_are_tagged_and_distinct() -> None:
    k = Keys("test-x")
    keys = all_model_keys(k, "spam")
    assert len(set(keys)) == len(keys)
    assert all(key.startswith("test-x:{spam}:") for key in keys)
    assert k.prediction_pattern("spam") == "test-x:{spam}:pred:*"
    assert k.prediction("spam", "abc") == "test-x:{spam}:pred:abc"


@pytest.mark.parametrize("m", ["spam", "ham.v2", "m-1", "x", "A_b.c-9", "z" * MAX_NAME_LENGTH])
def test_one_model_one_slot(m: str) -> None:
    """Every key of one model hashes to the slot of its tag, so scripts can touch them all."""
    slots = {key_slot(key.encode()) for key in all_model_keys(Keys("sl"), m)}
    assert slots == {key_slot(m.encode())}


def test_models_spread_over_slots() -> None:
    """Different models are different tags (so a cluster spreads them)."""
    slots = {key_slot(Keys("sl").state(f"model-{i}").encode()) for i in range(50)}
    assert len(slots) > 40


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "a:b",
        "{x}",
        "a}b",
        "a b",
        "-lead",
        ".hidden",
        "é",
        "a/b",
        "z" * (MAX_NAME_LENGTH + 1),
        5,
        None,
    ],
)
def test_invalid_names_rejected_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidSpec) as info:
        validate_model_name(bad)
    assert info.value.field == "name"
    assert repr(bad)[:20] in info.value.message or "characters" in info.value.message
    if isinstance(bad, str):
        with pytest.raises(InvalidSpec):
            Keys("sl").state(bad)


@pytest.mark.parametrize("prefix", ["", "a:b", "{p}", "a b"])
def test_invalid_prefix(prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        Keys(prefix)


@pytest.mark.parametrize("pid", ["", "a:b", "{p}"])
def test_invalid_prediction_id(pid: str) -> None:
    with pytest.raises(ValueError, match="prediction id"):
        Keys("sl").prediction("m", pid)
