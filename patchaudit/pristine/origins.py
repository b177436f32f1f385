"""Credentials by origin: the user:password an index URL carries is kept for that URL's own origin (scheme,
host, port), so it is sent there and nowhere else; the User-Agent every request names."""

from __future__ import annotations

import urllib.parse

from patchaudit import __version__

USER_AGENT = f"patchaudit/{__version__}"
_DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int | None]


def origin(url: str) -> Origin:
    """(scheme, host, port) of a URL, the port filled in for http and https."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port if port is not None else _DEFAULT_PORTS.get(scheme)


# origin -> (user, password), learnt from index URLs that carry user:password (as pip allows)
_CREDENTIALS: dict[Origin, tuple[str, str]] = {}


def learn(url: str) -> str:
    """Keep the user:password of `url` for its origin; the URL without them."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url
    user = urllib.parse.unquote(parts.username)
    _CREDENTIALS[origin(url)] = (user, urllib.parse.unquote(parts.password or ""))
    return redact(url)


def learnt_credentials(url: str) -> tuple[str, str] | None:
    """The user:password learnt for `url`'s origin, if any."""
    return _CREDENTIALS.get(origin(url))


def redact(url: str) -> str:
    """The URL without user:password, for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        _, _, netloc = parts.netloc.rpartition("@")
        parts = parts._replace(netloc=netloc)
    return urllib.parse.urlunsplit(parts)
