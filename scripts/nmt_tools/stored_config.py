"""The config a checkpoint or benchmark dump stores (its "config" metadata: the effective
YAML that nmt-train ran with), read with PyYAML."""
import re
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    """YAML 1.2's booleans, true and false only, as nmt-train's yaml-cpp schema reads them:
    PyYAML's 1.1 rules would make choices such as `amp.mode: off` the boolean False."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool",
                              re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


class StoredConfigError(ValueError):
    """The stored config is not a YAML mapping; the message names where it came from."""


def parse(yaml_text: str, origin: str) -> dict[str, Any]:
    """The stored config as nested dicts ({"model": {"d_model": 512, ...}, ...}); {} for an
    empty text."""
    try:
        config = yaml.load(yaml_text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise StoredConfigError(f"{origin}: metadata config: malformed YAML: {e}") from e
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise StoredConfigError(f"{origin}: metadata config is not a YAML mapping")
    return config


def flatten(config: dict[str, Any]) -> dict[str, Any]:
    """{"section.key": value} for every key of every section (a top-level key that is not a
    section, e.g. run_dir, keeps its name); values keep their YAML types."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": v for inner, v in value.items()})
        else:
            flat[key] = value
    return flat
