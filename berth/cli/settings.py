"""A command's settings from its command line, a file and the environment, resolved one way.

A command declares its settings once, as a frozen dataclass whose fields are made with ``setting()``:
the annotation is the type, then the default, the help text and the environment variable. From that
one definition come the command-line options (``click_options``), the keys a settings file may hold,
the reference table in the README (``reference_table``) and the resolution (``resolve``).

Each setting takes its value from the first layer that gives one: the command line, then the file,
then the environment, then the default. A layer that does not mention a setting gives ``None``;
every other value, ``0`` and ``false`` included, is a value, so ``--workers 0`` is refused as such
instead of quietly giving way to the file.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click
import yaml

_SPEC = "berth.setting"

SettingsT = TypeVar("SettingsT")


class SettingsError(ValueError):
    """A setting given with a value it cannot take, or a settings file that names no setting."""


@dataclass(frozen=True)
class Spec:
    """What ``setting()`` records about a field beyond its type and default."""

    help: str
    env: str | None
    minimum: float | None
    choices: tuple[str, ...]
    # Given several times on the command line (each occurrence adds to the list).
    repeatable: bool
    # The default as the README says it, when the value depends on the machine.
    default_text: str | None
    metavar: str | None
    # Refuses, with a ValueError saying why, a value of the right type the setting still cannot take.
    check: Callable[[Any], object] | None = None


def setting(
    default: object,
    *,
    help: str,
    env: str | None = None,
    minimum: float | None = None,
    choices: Sequence[str] = (),
    repeatable: bool = False,
    default_text: str | None = None,
    metavar: str | None = None,
    check: Callable[[Any], object] | None = None,
) -> Any:
    """A field of a settings dataclass. ``Any``: it stands where the field's own type is declared."""
    spec = Spec(help, env, minimum, tuple(choices), repeatable, default_text, metavar, check)
    return dataclasses.field(default=default, metadata={_SPEC: spec})


@dataclass(frozen=True)
class Declared:
    """One setting as declared: its name, type (without ``None``), default and spec."""

    name: str
    kind: object
    optional: bool
    default: object
    spec: Spec

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def negative_flag(self) -> str | None:
        """``--no-<name>`` for a flag that is on by default, so that the command line can turn it off
        (and win over a file or the environment that turns it on)."""
        if self.kind is bool and self.default is True:
            return "--no-" + self.name.replace("_", "-")
        return None


def declared(cls: type) -> list[Declared]:
    hints = typing.get_type_hints(cls)
    result = []
    for field in dataclasses.fields(cls):
        spec = field.metadata.get(_SPEC)
        if spec is None:
            raise TypeError(f"{cls.__name__}.{field.name} is not declared with setting()")
        kind, optional = _strip_none(hints[field.name])
        result.append(Declared(field.name, kind, optional, field.default, spec))
    return result


def _strip_none(hint: object) -> tuple[object, bool]:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


# ---- the command line ------------------------------------------------------------------------------


CommandT = TypeVar("CommandT", bound=Callable[..., Any])


def click_options(cls: type) -> Callable[[CommandT], CommandT]:
    """One option per setting, each defaulting to None ("not given") so that the other layers show.

    Values stay text here: ``resolve`` coerces and checks them, so a bad value is named the same way
    whichever layer it came from.
    """

    def decorate(command: CommandT) -> CommandT:
        # Click stacks decorators bottom up: applying them in reverse keeps the declared order in --help.
        for item in reversed(declared(cls)):
            command = _option(item)(command)
        return command

    return decorate


def _option(item: Declared) -> Callable[[CommandT], CommandT]:
    spec = item.spec
    also = f"; also ${spec.env}" if spec.env else ""
    help_text = f"{spec.help} (default: {default_text(item)}{also})"
    if item.kind is bool:
        if item.negative_flag:
            return click.option(f"{item.flag}/{item.negative_flag}", item.name, default=None, help=help_text)
        return click.option(item.flag, item.name, is_flag=True, default=None, help=help_text)
    return click.option(
        item.flag,
        item.name,
        multiple=spec.repeatable,
        default=None,
        type=click.Choice(spec.choices) if spec.choices else str,
        # As argparse named them: the option's name, where the declaration gives no better word.
        metavar=spec.metavar or (None if spec.choices else item.name.upper()),
        help=help_text,
    )


def command_line_layer(params: Mapping[str, object], cls: type) -> dict[str, object]:
    """The settings given on the command line; a repeatable option given no time is not given."""
    layer: dict[str, object] = {}
    for item in declared(cls):
        value = params.get(item.name)
        layer[item.name] = (value or None) if item.spec.repeatable else value
    return layer


# ---- the file ----------------------------------------------------------------------------------------


def read_settings_file(path: str, cls: type) -> dict[str, object]:
    """A YAML mapping keyed by the settings' names (``-`` or ``_`` alike); unknown keys are refused."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except OSError as error:
        raise SettingsError(f"{path}: cannot read it: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise SettingsError(f"{path}: not valid YAML: {error}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise SettingsError(f"{path}: expected a mapping of setting names to values at the top level")
    names = [item.name for item in declared(cls)]
    layer: dict[str, object] = {}
    for key, value in document.items():
        name = str(key).replace("-", "_")
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise SettingsError(f"{path}: unknown setting {key!r}; {hint}the settings are: {', '.join(names)}")
        layer[name] = value
    return layer


# ---- resolution -----------------------------------------------------------------------------------


def resolve(
    cls: type[SettingsT],
    *,
    command_line: Mapping[str, object] | None = None,
    file: Mapping[str, object] | None = None,
    file_name: str = "settings file",
    environ: Mapping[str, str] | None = None,
) -> SettingsT:
    """Each setting from the first layer that gives it: command line, file, environment, default."""
    command_line = command_line or {}
    file = file or {}
    environ = environ or {}
    values: dict[str, object] = {}
    for item in declared(cls):
        layers: list[tuple[str, object]] = [
            (item.flag, command_line.get(item.name)),
            (f"{file_name}: {item.name}", file.get(item.name)),
        ]
        if item.spec.env:
            # An empty variable is an unset one, as shells make it easy to write ``BERTH_X= berth ...``.
            layers.append((f"${item.spec.env}", environ.get(item.spec.env) or None))
        for where, raw in layers:
            if raw is not None:
                values[item.name] = _checked(item, _coerce(item.kind, raw, where), where)
                break
        else:
            values[item.name] = item.default
    return cls(**values)


def _checked(item: Declared, value: object, where: str) -> object:
    spec = item.spec
    if spec.choices and value not in spec.choices:
        raise SettingsError(f"{where}: {value!r} is not one of {', '.join(spec.choices)}")
    if spec.minimum is not None and isinstance(value, int | float) and value < spec.minimum:
        raise SettingsError(f"{where}: must be at least {spec.minimum:g}, got {value!r}")
    if spec.check is not None:
        try:
            spec.check(value)
        except ValueError as error:
            raise SettingsError(f"{where}: {error}") from None
    return value


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(raw: object, where: str) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE + _FALSE:
        return raw.strip().lower() in _TRUE
    raise SettingsError(f"{where}: expected true or false (also {'/'.join(_TRUE)} or {'/'.join(_FALSE)}), got {raw!r}")


def _whole(raw: object, where: str) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:
            pass
    raise SettingsError(f"{where}: expected a whole number, got {raw!r}")


def _number(raw: object, where: str) -> float:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise SettingsError(f"{where}: expected a number, got {raw!r}")


def _text(raw: object, where: str) -> str:
    if isinstance(raw, str):
        return raw
    raise SettingsError(f"{where}: expected text, got {raw!r} (quote it in YAML)")


def _names(raw: object, where: str) -> tuple[str, ...]:
    """A comma-separated string, or a list of them (a YAML list, a repeated option)."""
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
        raise SettingsError(f"{where}: expected a list of names or a comma-separated string, got {raw!r}")
    return tuple(name.strip() for item in items for name in item.split(",") if name.strip())


_COERCIONS: dict[object, Callable[[object, str], object]] = {
    bool: _flag,
    int: _whole,
    float: _number,
    str: _text,
    tuple[str, ...]: _names,
}


def _coerce(kind: object, raw: object, where: str) -> object:
    try:
        coerce = _COERCIONS[kind]
    except KeyError:
        raise TypeError(f"settings of type {kind!r} are not supported") from None
    return coerce(raw, where)


# ---- documentation --------------------------------------------------------------------------------


def reference_table(cls: type, *, file_option: str = "--config") -> str:
    """The Markdown table of every setting: option, file key, environment variable, default."""
    lines = [
        f"| option | `{file_option}` key | environment | default |",
        "|---|---|---|---|",
    ]
    for item in declared(cls):
        env = f"`{item.spec.env}`" if item.spec.env else "none"
        option = f"`{item.flag}`" + (f", `{item.negative_flag}`" if item.negative_flag else "")
        lines.append(f"| {option} | `{item.name}` | {env} | {default_text(item)} |")
    return "\n".join(lines) + "\n"


def default_text(item: Declared) -> str:
    if item.spec.default_text is not None:
        return item.spec.default_text
    if item.default is None or item.default == ():
        return "none"
    if isinstance(item.default, bool):
        return "on" if item.default else "off"
    return str(item.default)
