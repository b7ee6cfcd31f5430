"""A TCP proxy on loopback in front of a NameNode that loses the answer to a ``delete`` call, as a dropped
connection does after the NameNode acted.

Hadoop's RPC framing: the client opens with a 7-byte connection header (``hrpc``, version, service class,
auth protocol); then every call is a 4-byte big-endian length and that many bytes, whose request header
(``RequestHeaderProto``) names the method in field 1. After forwarding a ``delete`` call, the proxy waits for
the NameNode to act, then closes both connections without relaying the answer. Every other byte passes
unchanged.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from contextlib import contextmanager

_DELETE = b"\x0a\x06delete"  # RequestHeaderProto.methodName = "delete"


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


class LosingProxy:
    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.lose_deletes = 0  # how many delete answers to lose, from now on
        self.lost = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            mute = threading.Event()  # set: the NameNode's answers are no longer relayed
            threading.Thread(target=self._calls, args=(client, server, mute), daemon=True).start()
            threading.Thread(target=self._relay, args=(server, client, mute), daemon=True).start()

    def _calls(self, client: socket.socket, server: socket.socket, mute: threading.Event) -> None:
        try:
            server.sendall(_read(client, 7))
            while True:
                head = _read(client, 4)
                body = _read(client, struct.unpack(">I", head)[0])
                losing = _DELETE in body and self.lose_deletes > 0
                if losing:
                    mute.set()
                server.sendall(head + body)
                if losing:
                    self.lose_deletes -= 1
                    time.sleep(0.5)  # the NameNode acts; its answer is never relayed
                    self.lost += 1
                    for s in (client, server):
                        s.close()
                    return
        except OSError:
            for s in (client, server):
                s.close()

    @staticmethod
    def _relay(src: socket.socket, dst: socket.socket, mute: threading.Event) -> None:
        try:
            while chunk := src.recv(65536):
                if not mute.is_set():
                    dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.close()
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()


@contextmanager
def losing_proxy(namenode_url: str):
    """A proxy in front of ``hdfs://host:port``; yields it (``proxy.port``, ``proxy.lose_deletes``)."""
    host, _, port = namenode_url[len("hdfs://"):].partition("/")[0].rpartition(":")
    proxy = LosingProxy((host, int(port)))
    try:
        yield proxy
    finally:
        proxy.close()
