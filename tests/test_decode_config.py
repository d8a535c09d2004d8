"""DecodeConfig: one decoding setting from CLI to CSV row; its point names (slugs) round-trip."""
from __future__ import annotations

import dataclasses

import pytest

from fastdllm_core.config import AR_SLUG, BLOCK_SIZE, SLUG_FIELDS, DecodeConfig, parse_bool

# every field set to a value other than its default
VARIED = dict(block_size=16, sub_block_size=4, threshold=0.75, use_sub_block_cache=True, max_new_tokens=99,
              temperature=0.7, top_p=0.5, seed=11)


def test_varied_covers_every_field():
    names = [f.name for f in dataclasses.fields(DecodeConfig)]
    assert sorted(VARIED) == sorted(names)
    assert all(VARIED[n] != getattr(DecodeConfig(), n) for n in names)


def test_dict_round_trip_covers_every_field():
    c = DecodeConfig(**VARIED).validate()
    assert c.to_dict() == VARIED
    assert DecodeConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="unknown decoding key"):
        DecodeConfig.from_dict({**VARIED, "blocksize": 3})


@pytest.mark.parametrize("slug", ["ar", "bd_b32_s8_t1_c0", "bd_b32_s8_t0.9_c1", "bd_b4_s4_t0.5_c0",
                                  "bd_b64_s16_t0.95_c1"])
def test_slug_round_trip_is_byte_identical(slug):
    c = DecodeConfig.from_slug(slug)
    assert c.slug(DecodeConfig.slug_mode(slug)) == slug


def test_slug_round_trip_covers_every_field():
    c = DecodeConfig(**VARIED)
    slug = c.slug()
    assert slug == "bd_b16_s4_t0.75_c1"
    rest = {k: v for k, v in VARIED.items() if k not in SLUG_FIELDS}  # what a point name does not carry
    assert DecodeConfig.from_slug(slug, **rest) == c
    assert DecodeConfig.from_slug(slug).point_fields() == c.point_fields()
    assert DecodeConfig.from_slug(slug + "@128", **rest) == c  # an item limit is not part of the setting
    assert c.slug("ar") == AR_SLUG and DecodeConfig.from_slug(AR_SLUG, **rest) == DecodeConfig(**rest)


def test_slug_names_of_today():
    # the DAG's job lists and cached results are keyed by these names: they must never change
    assert DecodeConfig(threshold=1.0).slug() == "bd_b32_s8_t1_c0"
    assert DecodeConfig(threshold=1).slug() == "bd_b32_s8_t1_c0"
    assert DecodeConfig(use_sub_block_cache=True).slug() == "bd_b32_s8_t0.9_c1"
    assert DecodeConfig.from_dict({"block_size": 32, "sub_block_size": 8, "threshold": 0.9,
                                   "use_sub_block_cache": True}).slug() == "bd_b32_s8_t0.9_c1"
    with pytest.raises(ValueError, match="bad decoding point"):
        DecodeConfig.from_slug("bd_b32_s8")


def test_frozen_and_defaults():
    c = DecodeConfig()
    assert c.block_size == BLOCK_SIZE
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.block_size = 8  # type: ignore[misc]
    assert c.with_block_size(None) is c and c.with_block_size(16).block_size == 16


@pytest.mark.parametrize("bad", [dict(sub_block_size=5), dict(threshold=0), dict(threshold=1.5), dict(block_size=0),
                                 dict(top_p=0), dict(temperature=-1), dict(max_new_tokens=True)])
def test_validate_refuses(bad):
    with pytest.raises(ValueError):
        DecodeConfig(**bad).validate()


def test_parse_bool():
    for v in (True, 1, "1", "true", "True", " yes ", "on"):
        assert parse_bool(v) is True
    for v in (False, 0, "0", "false", "no", "OFF"):
        assert parse_bool(v) is False
    for v in ("", "none", None):
        assert parse_bool(v, empty_false=True) is False
        with pytest.raises(ValueError):
            parse_bool(v)
    with pytest.raises(ValueError):
        parse_bool("maybe")
