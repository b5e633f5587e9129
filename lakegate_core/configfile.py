"""Reading a YAML config file into frozen dataclasses, with environment overrides.

Shared by the service (``commit_service.config``) and the sidecar (``sidecar.config``); standard
library plus pyyaml only. The rules (docs/configuration.md):

- ``${NAME}`` in a string value is replaced by the environment variable ``NAME`` (an unset
  variable is an error naming it; ``${NAME:-default}`` gives a default);
- an environment variable ``<PREFIX><KEY>__<KEY>...`` overrides one key; list items are addressed
  by index (``LAKEGATE_TABLES__0__PATH``); the value is parsed as YAML (``8081`` is a number);
- unknown keys, wrong types and missing required keys are errors naming the dotted key.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import yaml

from lakegate_core.errors import ConfigError

T = TypeVar("T")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return raw


def apply_env_overrides(
    raw: dict[str, Any], prefix: str, environ: Mapping[str, str], sections: set[str]
) -> dict[str, Any]:
    """Set ``raw[a][b]...`` from each ``<prefix>A__B...`` variable (values parsed as YAML).

    Only variables whose first key is one of ``sections`` (the top-level keys) count, so other
    ``LAKEGATE_*`` variables (tokens read through ``${...}``, cache paths) are left alone.
    """
    for name, value in sorted(environ.items()):
        if not name.startswith(prefix) or len(name) == len(prefix):
            continue
        keys = name[len(prefix) :].lower().split("__")
        if keys[0] not in sections:
            continue
        node: Any = raw
        for i, key in enumerate(keys):
            last = i == len(keys) - 1
            if isinstance(node, list):
                if not key.isdigit() or int(key) >= len(node):
                    raise ConfigError(f"{name}: {'.'.join(keys[:i]) or 'config'} has no item {key}")
                if last:
                    node[int(key)] = yaml.safe_load(value)
                else:
                    node = node[int(key)]
            elif isinstance(node, dict):
                if last:
                    node[key] = yaml.safe_load(value)
                else:
                    node = node.setdefault(key, {})
            else:
                raise ConfigError(f"{name}: {'.'.join(keys[:i])} is not a section")
    return raw


def expand_vars(value: Any, environ: Mapping[str, str], where: str = "") -> Any:
    """Replace ``${NAME}`` / ``${NAME:-default}`` in every string of ``value``."""
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            if m[1] in environ:
                return environ[m[1]]
            if m[2] is not None:
                return m[2]
            raise ConfigError(f"{where or 'config'}: environment variable {m[1]} is not set")

        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        return {k: expand_vars(v, environ, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_vars(v, environ, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def build(cls: type[T], raw: Any, where: str = "") -> T:
    """Make dataclass ``cls`` from a mapping, checking keys and types against its fields."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where or 'config'}: must be a mapping, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(f"{_join(where, unknown[0])}: unknown key (known: {', '.join(sorted(fields))})")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in raw:
            kwargs[name] = _convert(hints[name], raw[name], _join(where, name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{_join(where, name)}: is required")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where or 'config'}: {exc}") from None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _convert(args[0], value, where)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, str) and hasattr(tp, "from_text"):  # a section with a one-word form
            try:
                return tp.from_text(value)
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        return build(tp, value, where)  # type: ignore[arg-type]
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: must be a list, got {type(value).__name__}")
        item = typing.get_args(tp)[0]
        items = [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: must be a mapping, got {type(value).__name__}")
        return {str(k): ("" if v is None else str(v)) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(value)
        except ValueError:
            raise ConfigError(f"{where}: must be one of {[e.value for e in tp]}, got {value!r}") from None
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false, got {value!r}")
        return value
    if tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (tp is int and not isinstance(value, int)):
            raise ConfigError(f"{where}: must be {'an integer' if tp is int else 'a number'}, got {value!r}")
        return tp(value)
    if tp is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{where}: must be a string, got {value!r}")
        return str(value)
    if tp is Path:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be a path string, got {value!r}")
        return Path(value).expanduser()
    return value


def load(
    cls: type[T],
    path: Path | None,
    *,
    env_prefix: str,
    default: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> T:
    """Read ``path`` (or start from ``default``), apply the environment, build ``cls``."""
    env = os.environ if environ is None else environ
    raw = read_yaml(path) if path is not None else dict(default or {})
    sections = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    raw = apply_env_overrides(raw, env_prefix, env, sections)
    return build(cls, expand_vars(raw, env))
