"""capaudit.llm.http: framing, keep-alive reuse, stale connections, deadlines, bad responses.

A raw asyncio TCP server plays scripted byte sequences, so every framing case is exact.
"""

from __future__ import annotations

import asyncio
import gzip
from typing import List

import pytest

from capaudit.llm.http import HTTPProtocolError, Pool

class RawServer:
    """Answers each request with ``reply(n, request_bytes)`` -> list of byte pieces (or None to hang);
    a piece ``b"<close>"`` closes the connection."""

    def __init__(self, reply):
        self.reply = reply
        self.requests: List[bytes] = []
        self.connections = 0

    async def __aenter__(self) -> "RawServer":
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/chat/completions"
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")][0]
                             .split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                pieces = self.reply(len(self.requests), head + body)
                if pieces is None:
                    await asyncio.sleep(30)
                    return
                for p in pieces:
                    if p == b"<close>":
                        writer.close()
                        return
                    writer.write(p)
                    await writer.drain()
                    await asyncio.sleep(0.001)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def ok(body: bytes, extra: bytes = b"") -> List[bytes]:
    return [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body]


def run(coro):
    return asyncio.run(coro)


def test_content_length_keepalive_reuses_one_connection():
    async def main():
        async with RawServer(lambda n, req: ok(b'{"n": %d}' % n)) as srv:
            pool = Pool(srv.url, {"Content-Type": "application/json", "Authorization": "Bearer k"})
            outs = [await pool.post(b'{"q": 1}', 5) for _ in range(5)]
            pool.close()
            return srv, outs

    srv, outs = run(main())
    assert [o.body for o in outs] == [b'{"n": %d}' % i for i in range(1, 6)]
    assert all(o.status == 200 and o.headers["content-type"] == "application/json" for o in outs)
    assert srv.connections == 1
    first = srv.requests[0]
    assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"Authorization: Bearer k\r\n" in first and first.endswith(b'\r\n\r\n{"q": 1}')


def test_chunked_split_across_writes_with_trailer_and_interim_100():
    body = b'{"choices": [1, 2, 3]}'
    pieces = [b"HTTP/1.1 100 Continue\r\n\r\n",
              b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
              b"5\r\n" + body[:5] + b"\r\n", b"1", b"1;ext=1\r\n" + body[5:22], b"\r\n0\r\n",
              b"X-Trailer: t\r\n", b"\r\n"]

    async def main():
        async with RawServer(lambda n, req: pieces if n == 1 else ok(b"second")) as srv:
            pool = Pool(srv.url, {})
            a = await pool.post(b"{}", 5)
            b = await pool.post(b"{}", 5)
            pool.close()
            return srv, a, b

    srv, a, b = run(main())
    assert a.status == 200 and a.body == body
    assert b.body == b"second" and srv.connections == 1


def test_body_to_end_of_connection_and_connection_close_header():
    async def main():
        replies = {1: [b"HTTP/1.1 200 OK\r\n\r\nuntil-eof", b"<close>"],
                   2: ok(b"closing", b"Connection: close\r\n") + [b"<close>"],
                   3: ok(b"third")}

        async with RawServer(lambda n, req: replies[n]) as srv:
            pool = Pool(srv.url, {})
            outs = [(await pool.post(b"{}", 5)).body for _ in range(3)]
            pool.close()
            return srv, outs

    srv, outs = run(main())
    assert outs == [b"until-eof", b"closing", b"third"]
    assert srv.connections == 3


def test_stale_keepalive_connection_is_resent_once_on_a_fresh_one():
    # request 2 arrives on the kept-alive connection, which the server drops without answering
    async def main():
        async with RawServer(lambda n, req: [b"<close>"] if n == 2 else ok(b"fine")) as srv:
            pool = Pool(srv.url, {})
            a = await pool.post(b"{}", 5)
            b = await pool.post(b"{}", 5)
            pool.close()
            return srv, a, b

    srv, a, b = run(main())
    assert a.body == b.body == b"fine"
    assert len(srv.requests) == 3 and srv.connections == 2


def test_fresh_connection_dropped_raises_connection_error():
    async def main():
        async with RawServer(lambda n, req: [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", b"<close>"]) as srv:
            pool = Pool(srv.url, {})
            try:
                await pool.post(b"{}", 5)
            finally:
                pool.close()

    with pytest.raises(ConnectionError, match="connection lost before a complete response"):
        run(main())


def test_deadline_raises_timeout_and_pool_recovers():
    async def main():
        async with RawServer(lambda n, req: None if n == 1 else ok(b"late but fine")) as srv:
            pool = Pool(srv.url, {})
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            with pytest.raises(asyncio.TimeoutError):
                await pool.post(b"{}", 0.3)
            took = loop.time() - t0
            b = await pool.post(b"{}", 5)
            pool.close()
            return took, b

    took, b = run(main())
    assert 0.25 <= took < 2.0
    assert b.body == b"late but fine"


def test_gzip_body_is_decoded_and_bad_status_line_is_a_protocol_error():
    gz = gzip.compress(b'{"zipped": true}')

    async def main():
        async with RawServer(lambda n, req: ok(gz, b"Content-Encoding: gzip\r\n") if n == 1
                             else [b"SMTP 220 hello\r\n\r\n"]) as srv:
            pool = Pool(srv.url, {})
            a = await pool.post(b"{}", 5)
            with pytest.raises(HTTPProtocolError, match="bad status line"):
                await pool.post(b"{}", 5)
            pool.close()
            return a

    assert run(main()).body == b'{"zipped": true}'


def test_refused_connection_is_a_connection_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main():
        pool = Pool(f"http://127.0.0.1:{port}/v1/chat/completions", {})
        await pool.post(b"{}", 2)

    with pytest.raises(ConnectionError):
        run(main())


def test_bad_url_is_rejected():
    with pytest.raises(ValueError, match="must be http"):
        Pool("ftp://example.org/x", {})
