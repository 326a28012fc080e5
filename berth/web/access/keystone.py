"""keystonemiddleware's ``auth_token`` in front of a service's application, for the ``keystone``
strategy: it validates the caller's token and sets the identity headers ``keystone_caller`` trusts,
having first removed any a caller sent. Without it those headers are the caller's word."""

from __future__ import annotations

import configparser
import os
from collections.abc import Collection, Iterable
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

    path = os.environ.get("BERTH_KEYSTONE_CONFIG")
    if not path:
        raise SystemExit(
            "the keystone auth strategy needs $BERTH_KEYSTONE_CONFIG naming an INI file with a "
            "[keystone_authtoken] section"
        )
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    wrapped: WSGIApplication = auth_token.AuthProtocol(app, dict(parser["keystone_authtoken"]))
    if not public_paths:
        return wrapped
    public = frozenset(public_paths)

    def dispatch(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        chosen = app if environ.get("PATH_INFO", "") in public else wrapped
        return chosen(environ, start_response)

    return dispatch
