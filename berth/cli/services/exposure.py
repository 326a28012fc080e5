"""Whether an address to listen on can be reached from other machines, and how the services
identify their callers and decide what they may do.

``berth serve`` in its noauth2 development mode and ``berth agent`` without a token trust every
caller, so both refuse such an address unless told otherwise. The address, the tokens file, the
policy file and the keystone INI file are read here once, when the settings are, as every worker
would read them: a mistake in one is the operator's usage error before anything starts, not a
traceback in each worker.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Final

from berth.cli.settings import SettingsError

# How ``berth serve`` and ``berth conductor`` identify callers (``--auth-strategy``): here, so that
# the conductor's command does not import the service's modules to name them.
AUTH_STRATEGIES: Final = ("noauth2", "tokens", "keystone")


def bind_host(bind: str) -> str:
    """The host part of ``host:port`` (``[::1]:8778`` included)."""
    return bind.rsplit(":", 1)[0].strip("[]")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def check_bind(bind: str) -> None:
    """A setting's check (``setting(check=...)``): ValueError unless ``bind`` is an address the
    services can listen on."""
    from berth.web.server import listen_address

    listen_address(bind)


def check_tokens_file(auth_strategy: str, tokens_file: str | None) -> None:
    """The tokens file read as each worker reads it; SettingsError saying what is wrong with it."""
    if auth_strategy != "tokens":
        return
    if not tokens_file:
        raise SettingsError(
            "--auth-strategy tokens needs --tokens-file FILE (or $BERTH_TOKENS_FILE): a YAML file of the "
            "tokens and their users, projects and roles"
        )
    from berth.web.access.auth import TokenFile

    try:
        TokenFile(tokens_file)
    except ValueError as error:
        raise SettingsError(str(error)) from None


def check_keystone_config(auth_strategy: str, environ: Mapping[str, str]) -> None:
    """For the keystone strategy, the INI file ``$BERTH_KEYSTONE_CONFIG`` names read as each worker
    reads it; SettingsError saying what is wrong with it."""
    if auth_strategy != "keystone":
        return
    from berth.web.access.keystone import keystone_authtoken_settings

    try:
        keystone_authtoken_settings(environ)
    except ValueError as error:
        raise SettingsError(str(error)) from None


def policy_file_path(policy_file: str | None) -> str | None:
    """The policy file as an absolute path (a relative one is the current folder's, where the workers
    would not look for it), read as each worker reads it; SettingsError saying what is wrong with it."""
    if not policy_file:
        return None
    from berth.web.access.policy import read_policy_file

    try:
        read_policy_file(policy_file)  # named as the operator gave it
    except ValueError as error:
        raise SettingsError(str(error)) from None
    return os.path.abspath(policy_file)
