"""DecodeConfig: one decoding setting from CLI to CSV row; its point names (slugs) round-trip."""
from __future__ import annotations

import dataclasses

import pytest

from fastdllm_core.decode_config import (
    AR_SLUG,
    BLOCK_SIZE,
    MODE_FIELDS,
    ROW_DECODE_COLUMNS,
    SLUG_FIELDS,
    DecodeConfig,
    parse_bool,
)

# every field set to a value other than its default
VARIED = dict(block_size=16, sub_block_size=4, threshold=0.75, use_sub_block_cache=True, eos_rule="stop",
              decode_path="static",
              max_new_tokens=99,
              temperature=0.7, top_p=0.5, seed=11, steps=33, remasking="random", alg="maskgit_plus", alg_temp=0.25,
              eps=0.01, cache="dual", logits_eos_inf=True, confidence_eos_eot_inf=True)


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
                                  "bd_b64_s16_t0.95_c1", "bd_b32_s32_t0.9_c0_stop"])
def test_slug_round_trip_is_byte_identical(slug):
    c = DecodeConfig.from_slug(slug)
    assert c.slug(DecodeConfig.slug_mode(slug)) == slug


@pytest.mark.parametrize("slug", [
    "llada_g256_s256_b32_lc", "llada_g512_s512_b512_lc_ce", "llada_g256_s128_b8_rand_le", "llada_g64_s64_b64_lc_le_ce",
    "dream_g256_s256_entropy", "dream_g512_s512_origin", "dream_g16_s8_maskgit_plus_at0.5", "dream_g16_s8_topk_margin",
    "v1_g256_s8_b32_t0.9_dual", "v1_g256_s8_b32_t0.9_prefix", "v1_g256_s8_b32_t0.9_none",
    "v1_g256_s256_b32_tnone_prefix",
    "v1_g64_s2_b32_t1_dual"])
def test_masked_diffusion_slugs_round_trip(slug):
    mode = DecodeConfig.slug_mode(slug)
    assert mode == slug.split("_")[0]
    c = DecodeConfig.from_slug(slug).validate(mode)
    assert c.slug(mode) == slug
    assert DecodeConfig.from_dict(c.point_fields(mode)).slug(mode) == slug  # the DAG's point dict round trip
    assert DecodeConfig.from_slug(slug + "@64", seed=3).seed == 3
    row = c.row_fields(mode)
    assert tuple(row) == ROW_DECODE_COLUMNS and row["gen_length"] == c.max_new_tokens and row["steps"] == c.steps


def test_eos_rule_default_keeps_point_names_and_is_checked():
    assert DecodeConfig().eos_rule == "fill_block" and DecodeConfig().slug() == "bd_b32_s8_t0.9_c0"
    c = DecodeConfig.from_slug("bd_b32_s32_t1_c0_stop")
    assert c.eos_rule == "stop" and c.row_fields("bd")["eos_rule"] == "stop"
    assert DecodeConfig.from_dict(c.point_fields("bd")).slug() == "bd_b32_s32_t1_c0_stop"
    assert DecodeConfig().row_fields("llada")["eos_rule"] == ""
    with pytest.raises(ValueError, match="eos_rule must be one of"):
        DecodeConfig(eos_rule="reference").validate()


def test_masked_diffusion_point_names_carry_their_fields():
    c = DecodeConfig.from_slug("llada_g512_s256_b64_rand_le_ce")
    assert (c.max_new_tokens, c.steps, c.block_size, c.remasking) == (512, 256, 64, "random")
    assert c.logits_eos_inf and c.confidence_eos_eot_inf
    d = DecodeConfig.from_slug("dream_g256_s128_topk_margin_at0.3")
    assert (d.alg, d.alg_temp, d.steps) == ("topk_margin", 0.3, 128)
    v = DecodeConfig.from_slug("v1_g256_s256_b32_tnone_dual")
    assert v.threshold is None and v.cache == "dual"
    assert set(MODE_FIELDS["v1"]) == set(v.point_fields("v1"))
    with pytest.raises(ValueError, match="fixes the generation length 256"):
        DecodeConfig.from_slug("dream_g256_s256_entropy", max_new_tokens=128)
    with pytest.raises(ValueError, match="bad decoding point"):
        DecodeConfig.from_slug("llada_g256_s256_lc")
    # ar / bd rows carry gen_length too (steps empty: the bd decoder's steps are adaptive)
    bd = DecodeConfig(threshold=1.0).row_fields("bd")
    assert bd["gen_length"] == 256 and bd["steps"] == "" and bd["threshold"] == 1.0 and bd["alg"] == ""
    assert DecodeConfig().with_mode_defaults("llada").steps == 256
    assert DecodeConfig(block_size=32).with_mode_defaults("v1").steps == 8


@pytest.mark.parametrize("mode,bad,what", [
    ("llada", dict(steps=3, block_size=32), "steps=3 must be a multiple of the number of blocks 8"),
    ("llada", dict(steps=256, block_size=48), "block_size=48 must divide"),
    ("llada", dict(steps=256, remasking="lowest"), "remasking must be one of"),
    ("llada", dict(steps=None), "steps must be a positive integer, got None"),
    ("dream", dict(steps=8, alg="greedy"), "alg must be one of"),
    ("dream", dict(steps=8, alg_temp=-1.0), "alg_temp must be >= 0, got -1.0"),
    ("dream", dict(steps=8, eps=0.0), "eps must be in"),
    ("v1", dict(steps=8, cache="triple"), "cache must be one of"),
    ("v1", dict(steps=8, threshold=None), "threshold=None"),
    ("v1", dict(steps=8, threshold=1.5), "threshold must be in \\(0, 1\\] or None, got 1.5"),
    ("turbo", dict(), "unknown decoding mode 'turbo'"),
])
def test_masked_diffusion_validation_names_the_bad_value(mode, bad, what):
    with pytest.raises(ValueError, match=what):
        DecodeConfig(**bad).validate(mode)


def test_slug_round_trip_covers_every_field():
    c = DecodeConfig(**VARIED)
    slug = c.slug()
    assert slug == "bd_b16_s4_t0.75_c1_stop"
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
