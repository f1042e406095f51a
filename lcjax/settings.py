"""Settings sections: frozen dataclasses whose fields are declared once, with their check.

    @dataclasses.dataclass(frozen=True)
    class ProbeConfig(Settings):
        branch_probability: float = setting(0.2, Float(0.0, 1.0, lo_open=True))
        max_probes: int = setting(8, Int(1))

Building a section validates every field once (`Settings.__post_init__`) and normalizes it
(an int given for a float becomes a float, a list a tuple, a mapping given for a nested
section that section). A bad value raises `ConfigError`, whose `.key` is the field's name,
or the dotted path inside a nested section ("probe.max_probes"). The sections are hashable,
so a composition of them can be a static argument under `jax.jit`.

`from_dict(cls, data, path)` builds a section from plain data (as loaded from YAML): every
error's `.key` is then the full dotted path from `path` on, unknown keys are rejected with a
suggestion, and keys listed in the class's `MOVED` name their new place. `to_dict` is its
inverse. This module imports nothing of lcjax, so every layer may declare its settings here.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, ClassVar, Iterable, Mapping, Sequence


class ConfigError(ValueError):
    """An invalid setting; the message is one line: "[where: ][key: ]problem".

    Attributes:
      problem: what is wrong (and what is allowed).
      key: the dotted key path at fault ("traversal.probe.max_probes", "game"), or None
        when the problem is not tied to one key (missing file, YAML syntax).
      where: where the value came from ("run.yaml:12", "override 'a.b=1'"), or None.
    """

    def __init__(self, problem: str, key: str | None = None, where: str | None = None):
        self.problem = " ".join(str(problem).split())
        self.key = key
        self.where = where
        text = f"{key}: {self.problem}" if key else self.problem
        super().__init__(f"{where}: {text}" if where else text)

    def under(self, prefix: str) -> ConfigError:
        """The same error with its key inside `prefix` ("max_probes" -> "traversal.max_probes")."""
        if not prefix:
            return self
        return ConfigError(self.problem, f"{prefix}.{self.key}" if self.key else prefix, self.where)

    def at(self, where: str) -> ConfigError:
        """The same error, said to come from `where` (a file and line, an override)."""
        return ConfigError(self.problem, self.key, where)


def did_you_mean(word: Any, options: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the option closest to `word`, or '' when none is close."""
    match = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


# ---------------------------------------------------------------------------- checks
class Check:
    """Validates and normalizes one value: `check(value)` returns it or raises ConfigError
    (without a key; the caller adds it). `describe()` says what is allowed."""

    def describe(self) -> str:
        raise NotImplementedError

    def __call__(self, value: Any) -> Any:
        raise NotImplementedError

    def fail(self, value: Any, hint: str = "") -> ConfigError:
        return ConfigError(f"expected {self.describe()}, got {value!r}{hint}")


class Int(Check):
    """An integer (not a bool, not a float such as 2.0) in [lo, hi]."""

    def __init__(self, lo: int | None = None, hi: int | None = None):
        self.lo, self.hi = lo, hi

    def describe(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"an integer in {self.lo}..{self.hi}"
        if self.lo == 1:
            return "a positive integer"
        if self.lo is not None:
            return f"an integer >= {self.lo}"
        return "an integer"

    def __call__(self, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(value)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise self.fail(value)
        return int(value)


class Float(Check):
    """A finite number in [lo, hi] (or (lo, hi] when `lo_open`); None too when `nullable`."""

    def __init__(self, lo: float | None = None, hi: float | None = None, lo_open: bool = False, nullable: bool = False):
        self.lo, self.hi, self.lo_open, self.nullable = lo, hi, lo_open, nullable

    def describe(self) -> str:
        if self.lo is not None and self.hi is not None:
            text = f"a number in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"
        elif self.lo == 0 and self.lo_open:
            text = "a positive number"
        elif self.lo is not None:
            text = f"a number {'>' if self.lo_open else '>='} {self.lo:g}"
        else:
            text = "a finite number"
        return text + (" or null" if self.nullable else "")

    def __call__(self, value):
        if value is None and self.nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(value)
        number = float(value)
        if self.lo is not None and (number <= self.lo if self.lo_open else number < self.lo):
            raise self.fail(value)
        if self.hi is not None and number > self.hi:
            raise self.fail(value)
        return number


class Bool(Check):
    """true or false (not 0/1, not "yes")."""

    def describe(self) -> str:
        return "true or false"

    def __call__(self, value):
        if not isinstance(value, bool):
            raise self.fail(value)
        return value


class Choice(Check):
    """One of a fixed tuple of strings."""

    def __init__(self, options: Sequence[str]):
        self.options = tuple(options)

    def describe(self) -> str:
        return "one of " + ", ".join(self.options)

    def __call__(self, value):
        if not isinstance(value, str) or value not in self.options:
            raise self.fail(value, did_you_mean(value, self.options) if isinstance(value, str) else "")
        return value


class Section(Check):
    """A nested settings section: an instance of `cls`, or a mapping of its keys."""

    def __init__(self, cls: type[Settings]):
        self.cls = cls

    def describe(self) -> str:
        return f"a mapping of {self.cls.__name__} keys"

    def __call__(self, value):
        if isinstance(value, self.cls):
            return value
        if isinstance(value, Mapping):
            return from_dict(self.cls, value)
        raise self.fail(value)


def setting(default: Any, check: Check) -> Any:
    """A settings field with `default`, validated by `check`."""
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=default, metadata={"check": check})


def section(cls: type[Settings]) -> Any:
    """A nested settings field holding a `cls`, by default `cls()`."""
    return dataclasses.field(default_factory=cls, metadata={"check": Section(cls)})


# ---------------------------------------------------------------------------- sections
class Settings:
    """Base of the settings sections: declare fields with `setting`/`section` on a
    `@dataclasses.dataclass(frozen=True)` subclass.

    Attributes:
      MOVED: {old key: its new relative paths} of keys that moved (e.g. into a nested
        section, see `nested_paths`); `from_dict` names the new place instead of calling
        the old key unknown.
    """

    MOVED: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def __post_init__(self):
        for f in dataclasses.fields(self):
            check = f.metadata.get("check")
            if check is None:
                continue
            try:
                value = check(getattr(self, f.name))
            except ConfigError as err:
                raise err.under(f.name) from None
            object.__setattr__(self, f.name, value)


def keys(cls: type[Settings]) -> list[str]:
    """The field names of the section `cls`, in declaration order."""
    return [f.name for f in dataclasses.fields(cls)]


def from_dict(cls: type[Settings], data: Any, path: str = ""):
    """The section `cls` of the plain mapping `data` (None = all defaults), validated.

    Args:
      cls: a Settings dataclass.
      data: {key: value}; nested sections as nested mappings; missing keys take defaults.
      path: the dotted path of this section, the prefix of every error's key.

    Raises:
      ConfigError: not a mapping, an unknown or moved key, or an invalid value; `.key` is
        the full dotted path.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping of keys, got {data!r}", path or None)
    prefix = f"{path}." if path else ""
    kwargs = {}
    for key, value in data.items():
        subsection = field_section(cls, key, path)
        if subsection is not None:
            value = from_dict(subsection, value, f"{prefix}{key}")
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except ConfigError as err:
        raise err.under(path) from None


def field_section(cls: type[Settings], key: Any, path: str = "") -> type[Settings] | None:
    """The section class of the field `key` of `cls`, or None when it holds a plain value.

    Raises:
      ConfigError: `cls` has no field `key` (it names the key's new place when the key is in
        `cls.MOVED`); `.key` is `path`.`key`.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if key not in fields:
        if key in cls.MOVED:
            moved = " and ".join(f"{path}.{new}" if path else new for new in cls.MOVED[key])
            raise ConfigError(f"moved to {moved}", f"{path}.{key}" if path else key)
        raise unknown_key(key, list(fields), path)
    check = fields[key].metadata.get("check")
    return check.cls if isinstance(check, Section) else None


def nested_paths(cls: type[Settings]) -> dict[str, tuple[str, ...]]:
    """{name: its dotted paths} of every field inside the nested sections of `cls`, e.g.
    {"max_probes": ("probe.max_probes",), "max_strategy": ("external.max_strategy",
    "probe.max_strategy")}: what a flat key of an older layout is now (`Settings.MOVED`)."""
    out: dict[str, list[str]] = {}
    for f in dataclasses.fields(cls):
        check = f.metadata.get("check")
        if not isinstance(check, Section):
            continue
        for name in keys(check.cls):
            out.setdefault(name, []).append(f"{f.name}.{name}")
        for name, paths in nested_paths(check.cls).items():
            out.setdefault(name, []).extend(f"{f.name}.{path}" for path in paths)
    return {name: tuple(paths) for name, paths in out.items()}


def unknown_key(key: Any, valid: Sequence[str], path: str = "") -> ConfigError:
    """The error of a key that `path` (a section, or "" for the top level) does not have."""
    kind = "key" if path else "section"
    full = f"{path}.{key}" if path else str(key)
    return ConfigError(f"unknown {kind}{did_you_mean(key, valid)}; valid: {', '.join(valid)}", full)


def to_dict(settings: Settings) -> dict[str, Any]:
    """The plain, YAML-dumpable dict of a section (nested sections as dicts, tuples as
    lists); `from_dict(type(settings), to_dict(settings))` equals `settings`."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if isinstance(value, Settings):
            value = to_dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def merge(data: Mapping[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with the dotted-path `updates` ({"probe.max_probes": 4}) set, nested mappings
    created as needed; `data` itself is not changed."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in (data or {}).items()}
    for dotted, value in updates.items():
        *parents, leaf = dotted.split(".")
        node = out
        for part in parents:
            child = node.get(part)
            node[part] = dict(child) if isinstance(child, Mapping) else {}
            node = node[part]
        node[leaf] = value
    return out


__all__ = [
    "Bool",
    "Check",
    "Choice",
    "ConfigError",
    "Float",
    "Int",
    "Section",
    "Settings",
    "did_you_mean",
    "field_section",
    "from_dict",
    "keys",
    "merge",
    "nested_paths",
    "section",
    "setting",
    "to_dict",
    "unknown_key",
]
