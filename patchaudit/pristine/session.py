"""The one requests session of a run, whose credentials never leave their origin.

Imported only when something is fetched over HTTP, so that the gate never imports requests.
"""

from __future__ import annotations

import ssl
from typing import Any

import requests
import requests.adapters
import requests.auth
from requests.utils import get_netrc_auth

from patchaudit.pristine.origins import USER_AGENT, learnt_credentials

_SESSION: requests.Session | None = None


def credentials_for(url: str, *, netrc: bool) -> tuple[str, str] | None:
    """What `url`'s own origin is owed: the user:password an index URL gave it, else ~/.netrc's for its host."""
    found = learnt_credentials(url)
    if found is None and netrc:
        found = get_netrc_auth(url)
    return found


class OriginAuth(requests.auth.AuthBase):
    """Basic auth with the credentials of the request's own origin, or none at all."""

    def __init__(self, *, netrc: bool) -> None:
        self.netrc = netrc

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.pop("Authorization", None)
        found = credentials_for(r.url or "", netrc=self.netrc)
        if found is not None:
            r.headers["Authorization"] = requests.auth._basic_auth_str(*found)
        return r


class SystemTrustAdapter(requests.adapters.HTTPAdapter):
    """HTTPS that also trusts the system's CA store (as urllib and pip do), not only certifi's bundle."""

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        pool_kwargs.setdefault("ssl_context", ssl.create_default_context())
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)


class OriginSession(requests.Session):
    """A session that re-decides Authorization on every redirect hop by the hop's own origin.

    requests itself keeps the header on an http -> https hop of the same host and re-adds only
    netrc's; here every hop gets exactly what its own origin (scheme, host, port) is owed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.auth = OriginAuth(netrc=self.trust_env)
        self.mount("https://", SystemTrustAdapter())
        self.headers.update({"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})

    def rebuild_auth(self, prepared_request: requests.PreparedRequest, response: requests.Response) -> None:
        assert isinstance(self.auth, OriginAuth)
        self.auth(prepared_request)


def session() -> requests.Session:
    """The process's session (connections are reused across range requests)."""
    global _SESSION
    if _SESSION is None:
        _SESSION = OriginSession()
    return _SESSION
