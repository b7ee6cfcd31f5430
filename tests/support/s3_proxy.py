"""A fault-injecting S3 proxy on loopback, in front of the SeaweedFS test server.

Requests are forwarded unchanged (method, path, headers with the same Host, body), so their signatures
still verify upstream. Faults a real store has and SeaweedFS does not show: ``slow_down(n)`` answers the
next n requests (of chosen kinds) ``503 SlowDown``; ``fail_keys`` makes a DeleteObjects report chosen keys
as errors (the proxy then deletes the other keys of that request with a DeleteObjects of its own, and
answers for them); ``before_delete_objects`` runs just before a DeleteObjects goes on, as another process would;
``lose_answers`` lets a DeleteObject of chosen keys go through and then answers it ``500 InternalError`` (or late),
as a store under load or a dropped connection does.
``sent`` counts requests by kind: LIST, DELETE (DeleteObjects), DELETE_ONE, HEAD, GET, PUT.

``header_dropping_proxy`` is a store that ignores chosen headers (``If-None-Match`` on PutObject): the client
signed them, so it signs each request again (SigV4, botocore's signer) with the same keys before it goes on.
"""

from __future__ import annotations

import collections
import http.client
import threading
import time
import urllib.parse
from urllib.parse import urlsplit
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from xml.sax.saxutils import escape

_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class FaultyS3:
    def __init__(self, upstream: str, settings: dict):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.settings = settings
        self.lock = threading.Lock()
        self.sent: collections.Counter[str] = collections.Counter()
        self.slowdowns_left = 0
        self.slowdown_kinds: frozenset[str] | None = None
        self.slowdowns_sent = 0
        self.failing: dict[str, int] = {}  # key -> how many more DeleteObjects report it failed
        self.fail_codes: dict[str, str] = {}  # key -> the error code reported for it
        self.before_delete_objects: Callable[[list[str]], None] | None = None
        self.delete_requests: list[list[str]] = []  # the keys of every DeleteObjects, in order
        self.losing: dict[str, int] = {}  # key -> how many more DeleteObject answers are lost
        self.late_s: float | None = None  # lost answers come this late instead of as a 500
        self.url = ""
        self._client = None

    def slow_down(self, n: int, kinds=None) -> None:
        """Answer the next ``n`` requests (of ``kinds`` only, when given) ``503 SlowDown``."""
        with self.lock:
            self.slowdowns_left = n
            self.slowdown_kinds = None if kinds is None else frozenset(kinds)

    def fail_keys(self, keys, times: int = 1, code: str = "InternalError") -> None:
        with self.lock:
            for k in keys:
                self.failing[k] = times
                self.fail_codes[k] = code

    def lose_answers(self, keys, times: int = 1, *, late_s: float | None = None) -> None:
        """The next ``times`` DeleteObject requests of each key are carried out, then answered ``500
        InternalError`` (``late_s``: answered with the store's own reply that many seconds late)."""
        with self.lock:
            self.late_s = late_s
            for k in keys:
                self.losing[k] = times

    def client(self):
        if self._client is None:
            import botocore.config
            import botocore.session

            self._client = botocore.session.get_session().create_client(
                "s3", region_name=self.settings["AWS_REGION"], endpoint_url=self.settings["AWS_ENDPOINT_URL"],
                aws_access_key_id=self.settings["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=self.settings["AWS_SECRET_ACCESS_KEY"],
                config=botocore.config.Config(s3={"addressing_style": "path"}))
        return self._client


def _kind(method: str, path: str, query: dict) -> str:
    if method == "POST" and "delete" in query:
        return "DELETE"
    if method == "GET" and path.strip("/").count("/") == 0 and ("list-type" in query or "prefix" in query):
        return "LIST"
    return {"DELETE": "DELETE_ONE"}.get(method, method)


def _handler(state: FaultyS3):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _reply(self, status: int, body: bytes, headers=()) -> None:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            split = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
            kind = _kind(self.command, split.path, query)
            with state.lock:
                state.sent[kind] += 1
                slow = state.slowdowns_left > 0 and (state.slowdown_kinds is None or kind in state.slowdown_kinds)
                if slow:
                    state.slowdowns_left -= 1
                    state.slowdowns_sent += 1
            if slow:
                self._reply(503, b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                                 b"<Message>Please reduce your request rate.</Message></Error>",
                            [("Content-Type", "application/xml")])
                return
            if kind == "DELETE":
                keys = [o.findtext(f"{{{_NS}}}Key") for o in ET.fromstring(body).iter(f"{{{_NS}}}Object")]
                with state.lock:
                    state.delete_requests.append(keys)
                if state.before_delete_objects is not None:
                    state.before_delete_objects(keys)
                with state.lock:
                    failed = [k for k in keys if state.failing.get(k, 0) > 0]
                    for k in failed:
                        state.failing[k] -= 1
                if failed:
                    self._partial(split.path.strip("/").split("/")[0], keys, set(failed))
                    return
            if kind == "DELETE_ONE":
                key = urllib.parse.unquote(split.path).strip("/").partition("/")[2]
                with state.lock:
                    lose = state.losing.get(key, 0) > 0
                    if lose:
                        state.losing[key] -= 1
                if lose and state.late_s is None:
                    self._forward(body, answer=False)
                    self._reply(500, b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
                                     b"<Message>injected: the answer is lost</Message></Error>",
                                [("Content-Type", "application/xml")])
                    return
                if lose:
                    self._forward(body, delay_s=state.late_s)
                    return
            self._forward(body)

        def _partial(self, bucket: str, keys: list[str], failed: set[str]) -> None:
            ok = [k for k in keys if k not in failed]
            deleted = []
            if ok:
                resp = state.client().delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in ok]})
                deleted = [d["Key"] for d in resp.get("Deleted", ())]
            parts = [f"<Deleted><Key>{escape(k)}</Key></Deleted>" for k in deleted]
            parts += [f"<Error><Key>{escape(k)}</Key><Code>{state.fail_codes.get(k, 'InternalError')}</Code>"
                      "<Message>injected failure</Message></Error>" for k in keys if k in failed]
            xml = f'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult xmlns="{_NS}">{"".join(parts)}</DeleteResult>'
            self._reply(200, xml.encode(), [("Content-Type", "application/xml")])

        def _forward(self, body: bytes, *, answer: bool = True, delay_s: float = 0.0) -> None:
            conn = http.client.HTTPConnection(state.upstream.hostname, state.upstream.port, timeout=60)
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in self.headers.items():
                    if k.lower() not in _HOP:
                        conn.putheader(k, v)
                conn.endheaders(body if body else None)
                resp = conn.getresponse()
                data = resp.read()
                if not answer:
                    return
                time.sleep(delay_s)
                headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP | {"content-length"}]
                self.send_response(resp.status)
                for k, v in headers:
                    self.send_header(k, v)
                length = resp.getheader("Content-Length")
                self.send_header("Content-Length", length if self.command == "HEAD" and length else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    return Handler


@contextmanager
def faulty_s3(settings: dict):
    """A proxy in front of ``settings['AWS_ENDPOINT_URL']``; yields its ``FaultyS3`` (``.url`` is its endpoint)."""
    state = FaultyS3(settings["AWS_ENDPOINT_URL"], settings)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="faulty-s3", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# Headers of the client's signature, made again for the forwarded request.
_SIGNATURE = frozenset({"authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "host"})


def _signed(method: str, url: str, headers: dict, body: bytes | None, keys: tuple[str, str], region: str) -> dict:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method=method, url=url, data=body or b"",
                         headers={k: v for k, v in headers.items() if k.lower() not in _SIGNATURE})
    S3SigV4Auth(Credentials(*keys), "s3", region).add_auth(request)
    return dict(request.headers.items())


@contextmanager
def header_dropping_proxy(upstream: str, keys: tuple[str, str], region: str = "us-east-1",
                          drop: frozenset[str] = frozenset({"if-none-match"})):
    """Yield the proxy's endpoint URL; every request goes to ``upstream`` without the ``drop`` headers, signed
    again with ``keys`` (access key, secret key)."""
    target = urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = _signed(self.command, upstream.rstrip("/") + self.path,
                              {k: v for k, v in self.headers.items() if k.lower() not in drop}, body, keys, region)
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                # a HEAD's length is the object's, not the (empty) body's
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
