"""Reading the tracker's configuration documents: YAML or TOML, chosen by the file's suffix."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml

from berth.tracker.errors import ConfigError


def read_document(path: Path) -> dict[str, Any]:
    """A YAML (``.yaml``, ``.yml``, ``.json``) or TOML (``.toml``) document as a dict."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    try:
        if path.suffix == ".toml":
            data: object = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml", ".json"):
            data = yaml.safe_load(text)
        else:
            raise ConfigError(f"{path}: unknown format (use .yaml, .yml or .toml)")
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data
