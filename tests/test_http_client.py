"""``berth.clients.http``: what the clients of Berth's services send, and how they tell a request
never sent from one that may have been acted on, against a server written out here byte by byte."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest

from berth.clients.http import ConnectionPools, JsonHttp, NotConnected, ReadTimedOut, TransportError

BODY = b'{"ok":true}'
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)


class ScriptedServer:
    """A listening socket on the loopback; each accepted connection is handed to ``serve`` in a
    thread of its own. ``requests`` keeps every request's bytes as read; ``connections`` counts."""

    def __init__(self, serve):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.connections = 0
        self._serve = serve
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(self, connection), daemon=True)
            self._threads.append(thread)
            thread.start()

    def read_request(self, connection: socket.socket) -> bytes | None:
        """One whole request (headers and the body its Content-Length names), or None at the end."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            body += connection.recv(65536)
        self.requests.append(head + b"\r\n\r\n" + body)
        return self.requests[-1]

    def stop_listening(self):
        """New connections are refused from now on (a shutdown also wakes the thread in accept)."""
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()

    def close(self):
        self.stop_listening()
        for thread in self._threads:
            thread.join(timeout=5)


def _answer_all(server: ScriptedServer, connection: socket.socket) -> None:
    with connection:
        while server.read_request(connection) is not None:
            connection.sendall(OK)


def _headers(request: bytes) -> dict[str, str]:
    head = request.split(b"\r\n\r\n")[0].decode()
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])}


@pytest.fixture
def server():
    made = ScriptedServer(_answer_all)
    yield made
    made.close()


def test_requests_as_sent_with_and_without_bodies(server):
    http = JsonHttp(server.url + "/", {"X-Auth-Token": "admin"}, timeout=5.0)
    assert http.request("PUT", "/allocations/c1", {"allocations": {"rp": {"resources": {"VCPU": 1}}}}).json() == {
        "ok": True
    }
    http.request("GET", "/resource_providers", params={"name": "a b"})
    http.request("DELETE", "/allocations/c1")
    http.request("POST", "/berth/leases/c1/confirm")
    http.headers["OpenStack-API-Version"] = "placement 1.39"  # a change applies to the calls after
    http.request("GET", "/")

    put, get, delete, post, last = server.requests
    assert put.startswith(b"PUT /allocations/c1 HTTP/1.1\r\n")
    assert put.endswith(b'\r\n\r\n{"allocations":{"rp":{"resources":{"VCPU":1}}}}')
    assert _headers(put)["content-type"] == "application/json" and _headers(put)["x-auth-token"] == "admin"
    assert "expect" not in _headers(put)
    assert get.startswith(b"GET /resource_providers?name=a+b HTTP/1.1\r\n") and get.endswith(b"\r\n\r\n")
    assert delete.startswith(b"DELETE /allocations/c1 HTTP/1.1\r\n") and "content-type" not in _headers(delete)
    # A write without a body says so with a length of 0, and no form encoding.
    assert post.startswith(b"POST /berth/leases/c1/confirm HTTP/1.1\r\n")
    assert _headers(post)["content-length"] == "0" and "content-type" not in _headers(post)
    assert _headers(last)["openstack-api-version"] == "placement 1.39"
    # All of them on one kept-alive connection.
    assert server.connections == 1


def test_threads_and_clients_of_one_address_share_its_connections(server):
    pools = ConnectionPools()
    clients = [JsonHttp(server.url, timeout=5.0, pools=pools) for _ in range(3)]
    for _ in range(4):
        for client in clients:
            assert client.request("GET", "/").status == 200
    assert server.connections == 1

    barrier = threading.Barrier(4)
    statuses: list[int] = []

    def call(client: JsonHttp) -> None:
        barrier.wait()
        for _ in range(20):
            statuses.append(client.request("GET", "/").status)

    threads = [threading.Thread(target=call, args=(clients[i % 3],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert statuses == [200] * 80
    assert server.connections <= 4


def test_a_refused_connection_is_not_connected():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(NotConnected) as failed:
        JsonHttp(f"http://127.0.0.1:{port}", timeout=5.0).request("PUT", "/allocations/c1", {"allocations": {}})
    # The system's own words, which the command line's errors read.
    assert f"PUT http://127.0.0.1:{port}/allocations/c1: " in str(failed.value)
    assert "(Connection refused)" in str(failed.value)


def test_a_connection_closed_after_the_request_was_read_may_have_been_acted_on():
    def hang_up(server, connection):
        with connection:
            server.read_request(connection)

    server = ScriptedServer(hang_up)
    try:
        with pytest.raises(TransportError) as failed:
            JsonHttp(server.url, timeout=5.0).request("PUT", "/allocations/c1", {"allocations": {}})
    finally:
        server.close()
    assert not isinstance(failed.value, NotConnected)
    assert server.requests and server.requests[0].startswith(b"PUT /allocations/c1")


def test_no_answer_in_time_is_a_read_timeout():
    release = threading.Event()

    def never_answer(server, connection):
        with connection:
            server.read_request(connection)
            release.wait(10)

    server = ScriptedServer(never_answer)
    try:
        with pytest.raises(ReadTimedOut):
            JsonHttp(server.url, timeout=0.3).request("POST", "/berth/pick", {"consumer": {}})
    finally:
        release.set()
        server.close()
    assert len(server.requests) == 1


def test_a_server_that_dies_holding_a_kept_connection_request_is_not_not_connected():
    """The server answers one request, reads the next on the same connection and dies: libcurl sends
    it once more on a new connection, which is refused. The request was sent, so the error must not
    say that nothing was."""

    def answer_then_die(server, connection):
        with connection:
            server.read_request(connection)
            connection.sendall(OK)
            server.read_request(connection)
            server.stop_listening()  # the new connection libcurl tries is refused

    server = ScriptedServer(answer_then_die)
    http = JsonHttp(server.url, timeout=5.0)
    try:
        assert http.request("GET", "/").status == 200
        with pytest.raises(TransportError) as failed:
            http.request("POST", "/allocations", {"c1": {}})
    finally:
        server.close()
    assert not isinstance(failed.value, NotConnected)
    assert [r.split(b"\r\n")[0] for r in server.requests] == [b"GET / HTTP/1.1", b"POST /allocations HTTP/1.1"]


def test_a_kept_connection_the_server_closed_while_idle_is_replaced():
    def answer_once(server, connection):
        with connection:
            server.read_request(connection)
            connection.sendall(OK)

    server = ScriptedServer(answer_once)
    http = JsonHttp(server.url, timeout=5.0)
    try:
        assert [http.request("GET", "/").status for _ in range(3)] == [200, 200, 200]
    finally:
        server.close()
    assert server.connections == 3


def test_a_server_gone_while_its_connection_was_idle_was_not_sent_the_next_request():
    """The server answers, then closes its connections and stops listening (its process died while
    the connection was idle): the next request is refused before anything is sent, so it is
    ``NotConnected`` (libcurl, left alone, would send it on the dead connection first)."""
    answered = threading.Event()

    def answer_then_go(server, connection):
        server.read_request(connection)
        connection.sendall(OK)
        answered.wait(5)
        server.stop_listening()
        connection.close()

    server = ScriptedServer(answer_then_go)
    http = JsonHttp(server.url, timeout=5.0)
    try:
        assert http.request("GET", "/").status == 200
        answered.set()
        server.close()
        with pytest.raises(NotConnected):
            http.request("PUT", "/allocations/c1", {"allocations": {}})
    finally:
        server.close()
    assert len(server.requests) == 1
