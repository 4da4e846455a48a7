"""A small keep-alive HTTP/1.1 client for JSON POSTs to OpenAI-compatible endpoints.

Why not a general client: ``capaudit llm run`` sends hundreds of thousands of identical-shape
POSTs to a handful of endpoints, and on a 2-core machine a general client's per-request
bookkeeping (cookies, redirects, middleware, header multidicts) costs more CPU than everything
else in the run. This module does exactly what the run needs:

* one :class:`Pool` per endpoint URL (``http://`` or ``https://``), reusing idle connections;
* ``POST`` with ``Content-Length``; responses framed by ``Content-Length``, ``chunked`` transfer
  coding, or end of connection; ``1xx`` interim responses skipped; ``gzip``/``deflate`` bodies
  decoded (we never ask for them);
* a per-request deadline covering connect, send and receive (:class:`asyncio.TimeoutError`);
* transport failures raise :class:`ConnectionError` (an ``OSError``); a request that fails on a
  *reused* connection before any response byte arrives (the server closed an idle keep-alive
  connection) is re-sent once on a fresh connection, as browsers and general clients do.

No redirects, proxies, cookies or HTTP/2.
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
import zlib
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple
from urllib.parse import urlsplit

MAX_HEADER_BYTES = 64 * 1024


class HTTPProtocolError(ConnectionError):
    """The server's bytes are not a valid HTTP/1.1 response."""


class Response(NamedTuple):
    status: int
    headers: Dict[str, str]  # lower-cased names; repeated headers joined with ", "
    body: bytes


class _Conn(asyncio.Protocol):
    """One connection; at most one request in flight (no pipelining)."""

    __slots__ = ("transport", "buf", "waiter", "closed", "received", "_head", "_need", "_chunks", "_chunked",
                 "_to_eof", "_keep")

    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.buf = bytearray()
        self.waiter: Optional[asyncio.Future] = None
        self.closed = False
        self.received = False
        self._reset()

    def _reset(self) -> None:
        self._head: Optional[Tuple[int, Dict[str, str]]] = None
        self._need = -1
        self._chunks: List[bytes] = []
        self._chunked = False
        self._to_eof = False
        self._keep = True

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received = True
        self.buf += data
        if self.waiter is not None and not self.waiter.done():
            try:
                self._parse()
            except HTTPProtocolError as exc:
                self._fail(exc)

    def eof_received(self) -> Optional[bool]:
        if self._to_eof and self._head is not None and self.waiter is not None and not self.waiter.done():
            self._finish(bytes(self.buf), keep=False)
            self.buf.clear()
        return None  # close the transport

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            if self._to_eof and self._head is not None:
                self._finish(bytes(self.buf), keep=False)
            else:
                what = f"{type(exc).__name__}: {exc}" if exc else "server closed the connection"
                self.waiter.set_exception(ConnectionError(f"connection lost before a complete response ({what})"))

    # -- parsing ---------------------------------------------------------------------------
    def _fail(self, exc: BaseException) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.close()

    def _finish(self, body: bytes, keep: bool) -> None:
        status, headers = self._head  # type: ignore[misc]
        enc = headers.get("content-encoding", "").lower()
        if enc in ("gzip", "x-gzip", "deflate") and body:
            try:
                body = zlib.decompress(body, 47 if enc != "deflate" else 15)
            except zlib.error:
                try:
                    body = zlib.decompress(body, -15)
                except zlib.error as exc:
                    self._fail(HTTPProtocolError(f"cannot decode {enc} body: {exc}"))
                    return
        self._keep = self._keep and keep
        if not self._keep:
            self.close()
        waiter = self.waiter
        self.waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(status, headers, body))

    def _parse(self) -> None:
        buf = self.buf
        while True:
            if self._head is None:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEADER_BYTES:
                        raise HTTPProtocolError(f"response header larger than {MAX_HEADER_BYTES} bytes")
                    return
                lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
                del buf[: end + 4]
                parts = lines[0].split(" ", 2)
                if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                    raise HTTPProtocolError(f"bad status line {lines[0][:200]!r}")
                status = int(parts[1])
                headers: Dict[str, str] = {}
                for line in lines[1:]:
                    name, sep, value = line.partition(":")
                    if not sep:
                        raise HTTPProtocolError(f"bad header line {line[:200]!r}")
                    name = name.strip().lower()
                    value = value.strip()
                    headers[name] = f"{headers[name]}, {value}" if name in headers else value
                if 100 <= status < 200:  # interim response (100 Continue, 103 Early Hints)
                    continue
                conn = headers.get("connection", "").lower()
                self._keep = "close" not in conn and (parts[0] != "HTTP/1.0" or "keep-alive" in conn)
                self._head = (status, headers)
                te = headers.get("transfer-encoding", "").lower()
                if "chunked" in te:
                    self._chunked = True
                    self._need = -1
                elif status in (204, 304):
                    self._need = 0
                elif "content-length" in headers:
                    try:
                        self._need = int(headers["content-length"])
                    except ValueError:
                        raise HTTPProtocolError(f"bad Content-Length {headers['content-length']!r}") from None
                else:
                    self._to_eof = True
                    return
            if self._chunked:
                if not self._parse_chunks():
                    return
                body = b"".join(self._chunks)
                self._finish(body, keep=True)
                return
            if self._to_eof:
                return
            if len(buf) < self._need:
                return
            body = bytes(buf[: self._need])
            del buf[: self._need]
            self._finish(body, keep=True)
            return

    def _parse_chunks(self) -> bool:
        buf = self.buf
        while True:
            if self._need < 0:  # expecting a size line
                end = buf.find(b"\r\n")
                if end < 0:
                    return False
                size_s = bytes(buf[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_s, 16)
                except ValueError:
                    raise HTTPProtocolError(f"bad chunk size {size_s[:40]!r}") from None
                if size == 0:  # last chunk, then optional trailers and a blank line
                    rest = end + 2
                    if buf[rest:rest + 2] == b"\r\n":
                        del buf[: rest + 2]
                        return True
                    t = buf.find(b"\r\n\r\n", rest)
                    if t < 0:
                        return False  # size line kept; parsed again when more bytes arrive
                    del buf[: t + 4]
                    return True
                del buf[: end + 2]
                self._need = size
            if len(buf) < self._need + 2:
                return False
            self._chunks.append(bytes(buf[: self._need]))
            del buf[: self._need + 2]
            self._need = -1

    # -- use -------------------------------------------------------------------------------
    def send(self, data: bytes, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        self._reset()
        self.buf.clear()
        self.received = False
        self.waiter = loop.create_future()
        self.transport.write(data)  # type: ignore[union-attr]
        return self.waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Pool:
    """Keep-alive connections to one endpoint URL; ``post`` sends a body and returns the response."""

    def __init__(self, url: str, headers: Mapping[str, str], max_idle: int = 1024,
                 ssl_context: Optional[_ssl.SSLContext] = None):
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"URL {url!r} must be http://host[:port]/path or https://...")
        self.url = url
        self.host = u.hostname
        self.tls = u.scheme == "https"
        self.port = u.port or (443 if self.tls else 80)
        self.ssl = (ssl_context or _ssl.create_default_context()) if self.tls else None
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        host_hdr = u.netloc.rsplit("@", 1)[-1]
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() not in ("host", "content-length"))
        self._head = f"POST {path} HTTP/1.1\r\nHost: {host_hdr}\r\n{extra}Content-Length: ".encode("latin-1")
        self.max_idle = max_idle
        self._idle: List[_Conn] = []
        self._open: "set[_Conn]" = set()

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Conn:
        _, conn = await loop.create_connection(_Conn, self.host, self.port, ssl=self.ssl,
                                               server_hostname=self.host if self.tls else None)
        self._open.add(conn)
        return conn

    async def post(self, body: bytes, timeout: float) -> Response:
        """POST ``body``; the deadline ``timeout`` (seconds) covers connect, send and the whole response."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        data = b"".join((self._head, str(len(body)).encode(), b"\r\n\r\n", body))
        for fresh_only in (False, True):
            conn = None
            while self._idle and not fresh_only:
                c = self._idle.pop()
                if not c.closed:
                    conn = c
                    break
                self._open.discard(c)
            reused = conn is not None
            if conn is None:
                left = deadline - loop.time()
                if left <= 0:
                    raise asyncio.TimeoutError()
                try:
                    conn = await asyncio.wait_for(self._connect(loop), left)
                except _ssl.SSLError as exc:
                    raise ConnectionError(f"TLS error: {exc}") from exc
            fut = conn.send(data, loop)
            timer = loop.call_at(deadline, _expire, fut)
            try:
                resp = await fut
            except ConnectionError:
                self._open.discard(conn)
                conn.abort()
                if reused and not conn.received and loop.time() < deadline:
                    continue  # stale keep-alive connection: once more on a fresh one
                raise
            except BaseException:  # timeout or cancellation: the connection state is unknown
                self._open.discard(conn)
                conn.abort()
                raise
            finally:
                timer.cancel()
            if conn.closed:
                self._open.discard(conn)
            elif len(self._idle) < self.max_idle:
                self._idle.append(conn)
            else:
                self._open.discard(conn)
                conn.close()
            return resp
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        for c in list(self._open):
            c.close()
        self._open.clear()
        self._idle.clear()


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(asyncio.TimeoutError())


__all__ = ["Pool", "Response", "HTTPProtocolError"]
