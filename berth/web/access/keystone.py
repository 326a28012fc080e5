"""keystonemiddleware's ``auth_token`` in front of a service's application, for the ``keystone``
strategy: it validates the caller's token and sets the identity headers ``keystone_caller`` trusts,
having first removed any a caller sent. Without it those headers are the caller's word."""

from __future__ import annotations

import configparser
import os
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment


def keystone_wrapped(app: WSGIApplication, public_paths: Collection[str] = ()) -> WSGIApplication:
    """keystonemiddleware's auth_token in front of the app, configured from the [keystone_authtoken]
    section of the INI file named by $BERTH_KEYSTONE_CONFIG, as for any OpenStack service;
    ``public_paths`` (those the app serves without a caller: version discovery, the probes) go to
    the app itself, as Placement lets ``GET /`` past its auth_token."""
    try:
        from keystonemiddleware import auth_token
    except ImportError as error:
        raise SystemExit(
            "the keystone auth strategy needs keystonemiddleware: pip install 'berth[keystone]'"
        ) from error

    try:
        conf = keystone_authtoken_settings(os.environ)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    wrapped: WSGIApplication = auth_token.AuthProtocol(app, conf)
    if not public_paths:
        return wrapped
    public = frozenset(public_paths)

    def dispatch(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        chosen = app if environ.get("PATH_INFO", "") in public else wrapped
        return chosen(environ, start_response)

    return dispatch


def keystone_authtoken_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The [keystone_authtoken] section of the INI file ``$BERTH_KEYSTONE_CONFIG`` names; ValueError
    saying what is wrong (no variable, a file that cannot be read or is no INI file, no such section),
    which the services' commands show before they start rather than each worker crashing on it."""
    path = environ.get("BERTH_KEYSTONE_CONFIG")
    if not path:
        raise ValueError(
            "the keystone auth strategy needs $BERTH_KEYSTONE_CONFIG naming an INI file with a "
            "[keystone_authtoken] section"
        )
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as ini:
            parser.read_file(ini)
    except OSError as error:
        raise ValueError(
            f"$BERTH_KEYSTONE_CONFIG: cannot read {path}: {error.strerror or error}; name an INI file "
            "with a [keystone_authtoken] section"
        ) from None
    except (configparser.Error, UnicodeDecodeError) as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"$BERTH_KEYSTONE_CONFIG: {path} is not an INI file ({first_line})") from None
    if not parser.has_section("keystone_authtoken"):
        raise ValueError(f"$BERTH_KEYSTONE_CONFIG: {path} has no [keystone_authtoken] section")
    return dict(parser["keystone_authtoken"])
