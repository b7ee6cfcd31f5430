"""A loopback HTTP proxy in front of a real S3 endpoint that drops chosen request headers: a store that ignores
``If-None-Match`` on PutObject, built from SeaweedFS (which honours it) without mocking the client.

The test server checks every signature, and the client signed the headers the proxy drops, so the proxy signs
each request again (SigV4, botocore's signer) with the same keys before it goes on, as a client of the store."""

from __future__ import annotations

import http.client
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


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
