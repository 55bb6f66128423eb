"""JSON-RPC over HTTP that rides out a node going away for a while.

web3's own retry gives up after about a second and then raises a long traceback. A
trainer's node may restart, be frozen for a while, or be gone for good, and a public
provider may answer "rate limited, try again" (HTTP 429, or HTTP 200 with a JSON-RPC
error such as EIP-1474's -32005): this provider retries every such request with
exponential backoff, logs each retry, and after a bounded time raises
:class:`~mcfl_chain.chain.errors.ChainUnavailable` with one line to read.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import requests
from eth_typing import URI
from web3 import HTTPProvider
from web3._utils.batching import sort_batch_response_by_response_ids
from web3.types import RPCEndpoint, RPCResponse

from mcfl_chain._utils.errors import short_reason
from mcfl_chain.chain.errors import ChainUnavailable

log = logging.getLogger("mcfl_chain.chain")

DEFAULT_GIVE_UP_AFTER = 120.0
"""Seconds a worker keeps retrying an unreachable node before it stops."""
REQUEST_TIMEOUT = 15.0
"""Seconds one request may take: a node silent for longer counts as a failed try."""

_TRANSIENT = (requests.ConnectionError, requests.Timeout)

_SECRET_SEGMENT = re.compile(r"[A-Za-z0-9_-]{20,}")


def redact_url(url: str) -> str:
    """``url`` fit for logs, messages and published files: a password in it, the query
    and any long path segment (providers put API keys there, e.g. ``/v3/<key>``) are
    replaced by ``***``. Local URLs come out unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}:***@{host}" if ":" in userinfo else f"***@{host}"
    path = "/".join(
        "***" if _SECRET_SEGMENT.fullmatch(part) else part for part in parts.path.split("/")
    )
    return urlunsplit((parts.scheme, netloc, path, "***" if parts.query else "", ""))


# JSON-RPC errors that public providers answer with HTTP 200 when a request should just
# be sent again later: EIP-1474's "limit exceeded" (-32005), a 429 echoed as a code, and
# the wordings of rate limits and of a node that has not seen the block yet.
_BUSY_CODES = frozenset({-32005, 429})
_BUSY_MESSAGE = re.compile(
    r"rate.?limit|too many requests|limit exceeded|try again|header not found", re.IGNORECASE
)


class TransientRPCError(Exception):
    """The node answered, but with an error that says to try again later."""


def busy_answer(raw: bytes) -> str | None:
    """The error's text when ``raw`` is a JSON-RPC answer asking to retry later, else None.

    Only single answers are looked at; a revert or any other error is left to web3."""
    if b'"error"' not in raw:
        return None
    try:
        answer = json.loads(raw)
    except ValueError:
        return None
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), str(error.get("message", ""))
    if code in _BUSY_CODES or _BUSY_MESSAGE.search(message):
        return f"JSON-RPC error {code}: {message[:200]}"
    return None


_NEVER_SERVED = frozenset({501, 505})
"""HTTP statuses of a server that does not serve such requests at all (Not Implemented,
HTTP Version Not Supported): asking again changes nothing."""


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, (*_TRANSIENT, TransientRPCError)):
        return True
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        status = exc.response.status_code
        return (status >= 500 and status not in _NEVER_SERVED) or status == 429
    return False


def _http_status(exc: Exception) -> str | None:
    """The status of an HTTP answer ("HTTP 503 Service Unavailable"), else None.

    Said instead of requests' own text, which ends with the whole URL (and so with any
    API key in it)."""
    if not isinstance(exc, requests.HTTPError) or exc.response is None:
        return None
    response = exc.response
    return f"HTTP {response.status_code} {response.reason or ''}".strip()


def _http_error(status: int, reason: str) -> requests.HTTPError:
    """The error requests raises for an HTTP error status (what the retries look at)."""
    response = requests.Response()
    response.status_code, response.reason = status, reason
    return requests.HTTPError(f"HTTP {status} {reason}", response=response)


class DirectPost:
    """POSTs a JSON-RPC body over one kept-alive ``http.client`` connection per thread.

    requests costs about 0.5 ms of CPU a request (its session, adapters, proxy and
    netrc lookups), this about 0.05 ms: a host of a hundred trainers sends thousands of
    requests a round. Used only where requests would send the same bytes to the same
    place: plain ``http://`` URLs without credentials, no proxy from the environment and
    no ``.netrc`` entry (:meth:`serves`). Failures are raised as requests' exceptions
    (``ConnectionError``, ``Timeout``, ``HTTPError``), so the retries treat both alike.
    """

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        self._host, self._port = parts.hostname or "", parts.port or 80
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._timeout = timeout
        self._local = threading.local()
        self._headers = {"Content-Type": "application/json", "User-Agent": "mcfl-chain"}

    @staticmethod
    def serves(url: str) -> bool:
        """Whether ``url`` is one this transport sends exactly as requests would."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or "@" in parts.netloc:
            return False
        proxies = requests.utils.get_environ_proxies(url)
        if requests.utils.select_proxy(url, proxies) is not None:
            return False
        return requests.utils.get_netrc_auth(url) is None

    def __call__(self, data: bytes) -> bytes:
        connection = getattr(self._local, "connection", None)
        reused = connection is not None
        if connection is None:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            self._local.connection = connection
        try:
            connection.request("POST", self._target, body=data, headers=self._headers)
            response = connection.getresponse()
            body = response.read()
        except TimeoutError as exc:
            self._drop(connection)
            raise requests.Timeout(f"read timed out ({exc})") from exc
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
            self._drop(connection)
            if reused:  # the node closed the idle connection: once more on a new one
                return self(data)
            raise requests.ConnectionError(str(exc)) from exc
        except (OSError, http.client.HTTPException) as exc:
            self._drop(connection)
            raise requests.ConnectionError(str(exc)) from exc
        if response.will_close:
            self._drop(connection)
        if response.status >= 300:  # a JSON-RPC node answers 200; a redirect is no answer
            raise _http_error(response.status, response.reason)
        return body

    def _drop(self, connection: http.client.HTTPConnection) -> None:
        connection.close()
        self._local.connection = None


class PatientHTTPProvider(HTTPProvider):
    """An HTTP provider that retries unreachable-node failures for ``give_up_after`` s.

    Parameters
    ----------
    endpoint_uri
        The node's JSON-RPC URL.
    give_up_after
        Seconds after the first failure of a request past which it stops retrying.
    timeout
        Seconds one HTTP request may take.
    min_tries
        Tries made before giving up however long they took: a machine suspended for
        minutes (a laptop asleep, a paused VM) finds its first request long past
        ``give_up_after`` on waking, while the node may be fine.
    initial_delay, max_delay
        First wait between tries, doubled after each failure up to ``max_delay``.
    sleep, clock
        Waiting and time functions (tests pass fakes).
    """

    def __init__(
        self,
        endpoint_uri: str,
        *,
        give_up_after: float = DEFAULT_GIVE_UP_AFTER,
        timeout: float = REQUEST_TIMEOUT,
        min_tries: int = 3,
        initial_delay: float = 0.5,
        max_delay: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if give_up_after < 0:
            raise ValueError(f"give_up_after must be >= 0, got {give_up_after}")
        super().__init__(
            endpoint_uri, request_kwargs={"timeout": timeout}, exception_retry_configuration=None
        )
        if min_tries < 1:
            raise ValueError(f"min_tries must be >= 1, got {min_tries}")
        self.give_up_after = give_up_after
        self.min_tries = min_tries
        self.initial_delay = initial_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._clock = clock
        self._post: Callable[[bytes], bytes] = (
            DirectPost(endpoint_uri, timeout)
            if DirectPost.serves(endpoint_uri)
            else self._post_with_requests
        )

    @property
    def shown_uri(self) -> str:
        """The endpoint as messages show it (:func:`redact_url`)."""
        return redact_url(str(self.endpoint_uri))

    def make_batch_request(
        self, batch_requests: list[tuple[RPCEndpoint, Any]]
    ) -> list[RPCResponse] | RPCResponse:
        """Several requests in one HTTP request, retried as one request is (web3's own
        batch goes straight to the session, past the retries)."""
        raw = self._make_request(
            RPCEndpoint("batch"), self.encode_batch_rpc_request(batch_requests)
        )
        response = self.decode_rpc_response(raw)
        if not isinstance(response, list):
            return response  # the node refused the whole batch: one error answer
        return sort_batch_response_by_response_ids(cast(list[RPCResponse], response))

    def _make_request(self, method: RPCEndpoint, request_data: bytes) -> bytes:
        start = self._clock()
        delay = self.initial_delay
        attempt = 1
        while True:
            try:
                raw = self._post(request_data)
                busy = busy_answer(raw)
                if busy is not None:
                    raise TransientRPCError(busy)
                return raw
            except Exception as exc:
                status = _http_status(exc)
                if isinstance(exc, requests.HTTPError) and not _retryable(exc):
                    raise ChainUnavailable(
                        f"the chain node at {self.shown_uri} refused the request "
                        f"({status or short_reason(exc)}); check --rpc and any API key "
                        f"it needs"
                    ) from None
                if not _retryable(exc):
                    raise
                reason = status or short_reason(exc)
                waited = self._clock() - start
                if waited + delay > self.give_up_after and attempt >= self.min_tries:
                    if status is not None:
                        raise ChainUnavailable(
                            f"the chain node at {self.shown_uri} answered {status} for "
                            f"{waited:.0f} s ({attempt} tries); try again later or check "
                            f"--rpc"
                        ) from None
                    raise ChainUnavailable(
                        f"the chain node at {self.shown_uri} has not answered for "
                        f"{waited:.0f} s ({reason}, {attempt} tries); start it again or "
                        f"check --rpc"
                    ) from exc
                log.warning(
                    "chain node at %s: %s (%s); retry %d in %.1f s, giving up after %g s",
                    self.shown_uri,
                    reason,
                    method,
                    attempt,
                    delay,
                    self.give_up_after,
                )
                self._sleep(delay)
                delay = min(delay * 2, self.max_delay)
                attempt += 1

    def _post_with_requests(self, request_data: bytes) -> bytes:
        return cast(
            bytes,
            self._request_session_manager.make_post_request(
                URI(str(self.endpoint_uri)), request_data, **self.get_request_kwargs()
            ),
        )

    def __repr__(self) -> str:
        return f"<PatientHTTPProvider {self.shown_uri} give_up_after={self.give_up_after}>"
