"""Tests of the settings mechanism (`lcjax.settings`) on small sections of its own. No JAX."""

from __future__ import annotations

import dataclasses

import pytest

from lcjax.settings import (
    Bool,
    Choice,
    ConfigError,
    Float,
    Int,
    Settings,
    from_dict,
    merge,
    nested_paths,
    section,
    setting,
    to_dict,
)


@dataclasses.dataclass(frozen=True)
class Inner(Settings):
    size: int = setting(4, Int(1))
    rate: float = setting(0.5, Float(0.0, 1.0, lo_open=True))
    limit: float | None = setting(None, Float(0.0, nullable=True))


@dataclasses.dataclass(frozen=True)
class Outer(Settings):
    kind: str = setting("fast", Choice(("fast", "slow")))
    verbose: bool = setting(False, Bool())
    inner: Inner = section(Inner)
    other: Inner = section(Inner)


Outer.MOVED = nested_paths(Outer)


def test_defaults_and_normalization():
    outer = Outer()
    assert outer.inner == outer.other == Inner() and (outer.kind, outer.verbose) == ("fast", False)
    inner = Inner(rate=1)  # an int for a float becomes a float
    assert inner.rate == 1.0 and isinstance(inner.rate, float)
    built = Outer(inner={"size": 7})  # a mapping for a section becomes that section
    assert built.inner == Inner(size=7)
    assert hash(built) == hash(Outer(inner=Inner(size=7)))  # hashable: usable as a jit static


@pytest.mark.parametrize(
    "make, key, text",
    [
        (lambda: Inner(size=0), "size", "size: expected a positive integer, got 0"),
        (lambda: Inner(size=2.0), "size", "size: expected a positive integer, got 2.0"),
        (lambda: Inner(size=True), "size", "size: expected a positive integer, got True"),
        (lambda: Inner(rate=0.0), "rate", "rate: expected a number in (0, 1], got 0.0"),
        (lambda: Inner(rate=float("nan")), "rate", "expected a number in (0, 1]"),
        (lambda: Inner(limit=-1), "limit", "limit: expected a number >= 0 or null, got -1"),
        (lambda: Outer(kind="fats"), "kind", "kind: expected one of fast, slow, got 'fats' (did you mean 'fast'?)"),
        (lambda: Outer(verbose=1), "verbose", "verbose: expected true or false, got 1"),
        (lambda: Outer(inner=Inner(size=0)), "size", "size: expected a positive integer"),
        (lambda: Outer(inner={"size": 0}), "inner.size", "inner.size: expected a positive integer, got 0"),
        (lambda: Outer(other=5), "other", "other: expected a mapping of Inner keys, got 5"),
    ],
)
def test_construction_validates_and_names_the_key(make, key, text):
    with pytest.raises(ConfigError) as info:
        make()
    assert isinstance(info.value, ValueError)
    assert info.value.key == key
    assert text in str(info.value) and "\n" not in str(info.value)


def test_from_dict_gives_full_key_paths():
    assert from_dict(Outer, None) == Outer()
    assert from_dict(Outer, {"inner": {"size": 9}, "kind": "slow"}, "top") == Outer(kind="slow", inner=Inner(size=9))
    cases = [
        ({"inner": {"size": -1}}, "top.inner.size", "expected a positive integer"),
        ({"inner": {"sise": 1}}, "top.inner.sise", "unknown key (did you mean 'size'?); valid: size, rate, limit"),
        ({"inner": 3}, "top.inner", "expected a mapping of keys, got 3"),
        ({"size": 1}, "top.size", "moved to top.inner.size and top.other.size"),
        ({"verbose": "yes"}, "top.verbose", "expected true or false"),
    ]
    for data, key, text in cases:
        with pytest.raises(ConfigError) as info:
            from_dict(Outer, data, "top")
        assert info.value.key == key and text in str(info.value), (data, str(info.value))
    with pytest.raises(ConfigError) as info:
        from_dict(Outer, [1, 2], "top")
    assert info.value.key == "top"


def test_error_under_and_at():
    err = ConfigError("expected a positive integer, got 0", "size")
    moved = err.under("a.b").at("run.yaml:3")
    assert moved.key == "a.b.size" and moved.problem == err.problem
    assert str(moved) == "run.yaml:3: a.b.size: expected a positive integer, got 0"
    assert ConfigError("no key").under("sec").key == "sec"
    assert str(ConfigError("two\n  lines", "k")) == "k: two lines"


def test_to_dict_round_trip_and_merge():
    outer = Outer(kind="slow", inner=Inner(size=3, limit=2.5))
    data = to_dict(outer)
    assert data == {
        "kind": "slow",
        "verbose": False,
        "inner": {"size": 3, "rate": 0.5, "limit": 2.5},
        "other": {"size": 4, "rate": 0.5, "limit": None},
    }
    assert from_dict(Outer, data) == outer
    merged = merge(data, {"inner.size": 8, "other": None, "new.deep.key": 1})
    assert merged["inner"] == {"size": 8, "rate": 0.5, "limit": 2.5}
    assert merged["other"] is None and merged["new"] == {"deep": {"key": 1}}
    assert data["inner"]["size"] == 3 and "new" not in data  # the input is not changed
