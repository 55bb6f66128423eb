"""How the chain client fails: a node gone, a URL without scheme, an account without funds.

Each failure ends in one line a person can act on, never a library traceback.
"""

from __future__ import annotations

import http.server
import threading

import pytest
import requests
from conftest import FakeClock
from eth_account import Account
from web3 import Web3

from mcfl_chain._utils.process import free_port
from mcfl_chain.chain._rpc import DirectPost, PatientHTTPProvider, redact_url
from mcfl_chain.chain.client import ChainClient, ChainError, connect
from mcfl_chain.chain.errors import AccountUnfunded, ChainUnavailable


def test_a_node_gone_is_retried_for_a_bounded_time_then_named_in_one_line(caplog):
    # Prepare: nothing listens on the port.
    clock = FakeClock()
    url = f"http://127.0.0.1:{free_port()}"
    w3 = Web3(PatientHTTPProvider(url, give_up_after=5.0, sleep=clock.sleep, clock=clock))

    # Execute
    with caplog.at_level("WARNING", logger="mcfl_chain.chain"):
        with pytest.raises(ChainUnavailable) as caught:
            w3.eth.block_number  # noqa: B018 - the request is the point

    # Assert: backoff 0.5, 1, 2 (then 4 would pass the bound), each retry logged, and
    # one line naming the node and what to do.
    assert clock.waits == [0.5, 1.0, 2.0]
    assert len(caplog.records) == 3
    assert all("Connection refused" in r.getMessage() for r in caplog.records)
    message = str(caught.value)
    assert "\n" not in message and url in message and "Connection refused" in message
    assert "has not answered" in message and "--rpc" in message


def test_a_node_refusing_or_frozen_for_a_while_is_logged_then_answers(monkeypatch, caplog):
    # Prepare: the node refuses, then does not answer in time (frozen), then answers.
    clock = FakeClock()
    provider = PatientHTTPProvider("http://127.0.0.1:1", sleep=clock.sleep, clock=clock)
    answers = [
        requests.ConnectionError("[Errno 111] Connection refused"),
        requests.Timeout("read timed out"),
        b'{"jsonrpc": "2.0", "id": 0, "result": "0x2a"}',
    ]

    def post(*_args, **_kwargs):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(provider, "_post", post)

    # Execute
    with caplog.at_level("WARNING", logger="mcfl_chain.chain"):
        block = Web3(provider).eth.block_number

    # Assert: the answer, after two logged retries saying why.
    assert block == 42 and clock.waits == [0.5, 1.0]
    reasons = [r.getMessage() for r in caplog.records]
    assert "Connection refused" in reasons[0] and "no answer in time" in reasons[1]


def test_a_machine_waking_from_suspension_tries_again_before_giving_up(monkeypatch, caplog):
    # Prepare: the first request hangs while the machine is suspended for 300 s (past
    # the 120 s bound), then the node answers; and a node that never answers again.
    clock = FakeClock()
    provider = PatientHTTPProvider("http://127.0.0.1:1", sleep=clock.sleep, clock=clock)
    answers: list = [300.0, requests.Timeout("read timed out"),
                     b'{"jsonrpc": "2.0", "id": 0, "result": "0x2a"}']  # fmt: skip

    def post(*_args, **_kwargs):
        answer = answers.pop(0)
        if isinstance(answer, float):
            clock.now += answer
            raise requests.Timeout("read timed out")
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(provider, "_post", post)

    # Execute
    with caplog.at_level("WARNING", logger="mcfl_chain.chain"):
        block = Web3(provider).eth.block_number
    answers[:] = [300.0] + [requests.Timeout("read timed out")] * 5
    clock.waits.clear()
    with pytest.raises(ChainUnavailable) as caught:
        Web3(provider).eth.block_number  # noqa: B018 - the request is the point

    # Assert: two more tries after the long one, the third answering; a node still
    # silent is given up after the third try, not the first.
    assert block == 42 and clock.waits == [0.5, 1.0]
    assert "3 tries" in str(caught.value) and clock.waits == [0.5, 1.0]
    with pytest.raises(ValueError, match="min_tries"):
        PatientHTTPProvider("http://127.0.0.1:1", min_tries=0)


class _ScriptedNode(http.server.BaseHTTPRequestHandler):
    """Answers each POST with the next (status, close the connection after?) of
    ``server.script``, a JSON-RPC result when the status is 200; keeps connections alive
    otherwise (HTTP/1.1) and counts them."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        status, close = self.server.script.pop(0)  # type: ignore[attr-defined]
        body = b'{"jsonrpc": "2.0", "id": 0, "result": "0x2a"}' if status == 200 else b"busy"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = close

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1  # type: ignore[attr-defined]

    def log_message(self, *_args) -> None:
        pass


def test_the_direct_transport_keeps_its_connection_and_retries_like_requests(caplog):
    # Prepare: a node on loopback that answers 503 once, then 200 four times, closing the
    # connection after the third answer (as a node dropping idle connections does).
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedNode)
    server.script = [(503, False), (200, False), (200, False), (200, True), (200, False)]
    server.connections = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    clock = FakeClock()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    provider = PatientHTTPProvider(url, sleep=clock.sleep, clock=clock)
    w3 = Web3(provider)

    # Execute
    try:
        with caplog.at_level("WARNING", logger="mcfl_chain.chain"):
            blocks = [w3.eth.block_number for _ in range(4)]
    finally:
        server.shutdown()
        server.server_close()

    # Assert: the direct transport served it; the 503 was retried after a logged wait,
    # the closed connection replaced without one; two connections for five requests.
    assert isinstance(provider._post, DirectPost)
    assert blocks == [42] * 4 and clock.waits == [0.5]
    assert len(caplog.records) == 1 and "HTTP 503" in caplog.records[0].getMessage()
    assert server.connections == 2 and server.script == []


def test_the_direct_transport_names_a_redirect_instead_of_decoding_it():
    # Prepare: a URL that redirects (an http:// address of an https-only provider)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedNode)
    server.script = [(301, False)]
    server.connections = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"

    # Execute
    try:
        with pytest.raises(ChainUnavailable) as caught:
            Web3(PatientHTTPProvider(url)).eth.block_number  # noqa: B018 - the request
    finally:
        server.shutdown()
        server.server_close()

    # Assert: refused at once, by its status, with what to check
    assert "HTTP 301" in str(caught.value) and "--rpc" in str(caught.value)


@pytest.mark.parametrize(
    "url, env, direct",
    [
        ("http://127.0.0.1:8545", {}, True),
        ("http://node.internal:8545/rpc", {}, True),
        ("https://rpc.example/v3/key", {}, False),
        ("http://user:secret@127.0.0.1:8545", {}, False),
        ("http://node.internal:8545", {"HTTP_PROXY": "http://proxy.internal:3128"}, False),
        (
            "http://127.0.0.1:8545",
            {"HTTP_PROXY": "http://proxy.internal:3128", "NO_PROXY": "127.0.0.1"},
            True,
        ),
    ],
)
def test_the_direct_transport_serves_only_what_requests_would_send_alike(
    url, env, direct, monkeypatch, tmp_path
):
    # Prepare: no proxy or .netrc from this machine's environment, then the case's.
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "absent"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    # Execute / Assert
    assert DirectPost.serves(url) is direct


@pytest.mark.parametrize(
    "url, expected",
    [
        ("127.0.0.1:8545", "lacks its scheme: write http://127.0.0.1:8545"),
        ("localhost:8545", "lacks its scheme: write http://localhost:8545"),
        ("ws://127.0.0.1:8545", "must start with http:// or https://"),
    ],
)
def test_an_rpc_url_without_http_scheme_is_named_as_such(url, expected):
    with pytest.raises(ChainError, match=expected):
        connect(url)


def test_an_account_without_funds_is_named(devnet):
    # Prepare: a fresh key, never funded.
    _, deployment = devnet
    account = Account.create()
    client = ChainClient(deployment, account)

    # Execute
    with pytest.raises(AccountUnfunded) as caught:
        client.register()

    # Assert: which address needs native currency, and no key in the message.
    message = str(caught.value)
    assert account.address in message and "native currency" in message
    assert account.key.hex().removeprefix("0x") not in message.lower()


def test_a_transaction_resent_after_its_answer_was_lost_counts_as_sent(devnet, monkeypatch):
    # Prepare: the node receives and mines the first send, but its answer is lost, so
    # the provider sends the same signed transaction again.
    _, deployment = devnet
    client = ChainClient(deployment, account_index=6)
    provider = client.w3.provider
    real_request = provider.make_request
    resent = []

    def send_twice(method, params):
        if method == "eth_sendRawTransaction":
            real_request(method, params)
            resent.append(method)
        return real_request(method, params)

    monkeypatch.setattr(provider, "make_request", send_twice)

    # Execute
    trainer_id = client.register()

    # Assert: registered once, no error.
    assert resent and trainer_id >= 1 and client.is_registered()


def _http_error(status: int) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    response.reason = {429: "Too Many Requests", 503: "Service Unavailable"}.get(status, "No")
    return requests.HTTPError(f"{status} Client Error", response=response)


def test_a_provider_rate_limiting_or_overloaded_is_retried_with_backoff(monkeypatch, caplog):
    # Prepare: a public provider answers 429, then 503, then the result.
    clock = FakeClock()
    provider = PatientHTTPProvider("https://rpc.example", sleep=clock.sleep, clock=clock)
    answers = [_http_error(429), _http_error(503), b'{"jsonrpc": "2.0", "id": 0, "result": "0x7"}']

    def post(*_args, **_kwargs):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(provider, "_post", post)

    # Execute
    with caplog.at_level("WARNING", logger="mcfl_chain.chain"):
        block = Web3(provider).eth.block_number

    # Assert
    assert block == 7 and clock.waits == [0.5, 1.0] and len(caplog.records) == 2


def test_json_rpc_errors_asking_to_retry_are_retried_and_others_are_not(monkeypatch, caplog):
    # Prepare: HTTP 200 answers carrying EIP-1474's "limit exceeded", then a provider's
    # rate-limit wording, then the result; afterwards an ordinary error.
    clock = FakeClock()
    provider = PatientHTTPProvider("https://rpc.example", sleep=clock.sleep, clock=clock)
    answers = [
        b'{"jsonrpc": "2.0", "id": 0, "error": {"code": -32005, "message": "limit exceeded"}}',
        b'{"jsonrpc": "2.0", "id": 0, "error": {"code": -32000, "message": "daily request '
        b'count exceeded, request rate limited"}}',
        b'{"jsonrpc": "2.0", "id": 0, "result": "0x9"}',
        b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "method not found"}}',
    ]
    monkeypatch.setattr(provider, "_post", lambda *a, **k: answers.pop(0))
    w3 = Web3(provider)

    # Execute
    with caplog.at_level("WARNING", logger="mcfl_chain.chain"):
        block = w3.eth.block_number
        retries = len(caplog.records)
        with pytest.raises(Exception, match="method not found"):
            w3.eth.chain_id  # noqa: B018 - the request is the point

    # Assert: two retries with backoff for the busy answers, none for the last error.
    assert block == 9 and clock.waits == [0.5, 1.0] and retries == 2
    assert "-32005" in caplog.records[0].getMessage()
    assert answers == [] and len(caplog.records) == 2


def test_a_provider_refusing_the_request_is_one_line_at_once_without_its_api_key(monkeypatch):
    # Prepare: the URL carries an API key, as public providers' do; the answer is 401.
    clock = FakeClock()
    api_key = "0123456789abcdef0123456789abcdef"
    provider = PatientHTTPProvider(
        f"https://sepolia.provider.example/v3/{api_key}", sleep=clock.sleep, clock=clock
    )

    def post(*_args, **_kwargs):
        raise _http_error(401)

    monkeypatch.setattr(provider, "_post", post)

    # Execute
    with pytest.raises(ChainUnavailable) as caught:
        Web3(provider).eth.block_number  # noqa: B018 - the request is the point

    # Assert: not retried; the message names the host, not the key.
    message = str(caught.value)
    assert clock.waits == [] and "\n" not in message
    assert "refused the request" in message and "401" in message
    assert "https://sepolia.provider.example/v3/***" in message and api_key not in message
    assert caught.value.__cause__ is None


def _answer(status: int, reason: str, url: str) -> requests.HTTPError:
    """The error requests raises for an HTTP answer (its text holds the whole URL)."""
    response = requests.Response()
    response.status_code, response.reason, response.url = status, reason, url
    try:
        response.raise_for_status()
    except requests.HTTPError as exc:
        return exc
    raise AssertionError(status)


@pytest.mark.parametrize(
    "status, reason, waits, expected",
    [
        (501, "Not Implemented", [], "refused the request (HTTP 501 Not Implemented)"),
        (503, "Service Unavailable", [0.5, 1.0, 2.0], "answered HTTP 503 Service Unavailable"),
    ],
    ids=["not-implemented", "unavailable"],
)
def test_an_http_error_from_the_node_is_reported_by_its_status(
    monkeypatch, status, reason, waits, expected
):
    # Prepare: every request is answered with this HTTP status.
    clock = FakeClock()
    api_key = "0123456789abcdef0123456789abcdef"
    url = f"https://node.example/v3/{api_key}"
    provider = PatientHTTPProvider(url, give_up_after=5.0, sleep=clock.sleep, clock=clock)

    def post(*_args, **_kwargs):
        raise _answer(status, reason, url)

    monkeypatch.setattr(provider, "_post", post)

    # Execute
    with pytest.raises(ChainUnavailable) as caught:
        Web3(provider).eth.block_number  # noqa: B018 - the request is the point

    # Assert: a 501 is not retried (the node does not serve this), a 503 is; either
    # way the node answered, and the line says with what, without the API key.
    message = str(caught.value)
    assert clock.waits == waits and expected in message and "has not answered" not in message
    assert api_key not in message and "\n" not in message


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://127.0.0.1:8545", "http://127.0.0.1:8545"),
        ("https://eth.example/v2/abcdefghijklmnopqrstuvwxyz012345", "https://eth.example/v2/***"),
        ("https://user:secret@node.example/rpc", "https://user:***@node.example/rpc"),
        ("https://node.example/rpc?apikey=s3cr3t", "https://node.example/rpc?***"),
    ],
)
def test_rpc_urls_are_shown_without_credentials(url, shown):
    assert redact_url(url) == shown
