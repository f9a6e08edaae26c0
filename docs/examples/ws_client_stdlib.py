"""A client of `sapo-gym env serve`'s OpenEnv WebSocket (/ws) in the standard library only (docs/remote.md).

It speaks the minimum of RFC 6455 a client needs: the upgrade handshake, masked text frames out, unmasked frames
in (with continuation frames, pings answered), and the close handshake. Over that socket go OpenEnv's JSON
frames: {"type": "reset", "data": {...}}, {"type": "step", "data": {"text": ...}}, {"type": "state"},
{"type": "close"}; each answer is {"type": "observation" | "state" | "error", "data": {...}}.

    python docs/examples/ws_client_stdlib.py http://127.0.0.1:8765 --seed 0 --task-index 3

plays one episode with the privileged expert (the server must run without --public-only) and prints one JSON
line per answer frame (the reset's, each step's, then the state's).
"""

import argparse
import base64
import hashlib
import json
import os
import socket
import struct
from urllib.parse import urlsplit

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, section 1.3
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA


class WebSocket:
    """One WebSocket connection (one server session)."""

    def __init__(self, url: str, timeout_s: float = 60.0):
        parts = urlsplit(url)  # http://host:port, ws://host:port or either with a path
        path = parts.path if parts.path.endswith("/ws") else parts.path.rstrip("/") + "/ws"
        path += f"?{parts.query}" if parts.query else ""  # /ws?session_id=... attaches to an HTTP session
        self.sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout_s)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port or 80}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"no handshake answer from {url}")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if lines[0].split()[1:2] != ["101"] or headers.get("sec-websocket-accept") != accept:
            raise ConnectionError(f"handshake refused: {lines[0]}")

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def send_frame(self, opcode: int, payload: bytes) -> None:
        """One final frame; a client masks every frame it sends (RFC 6455, section 5.3)."""
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv_message(self) -> tuple[int, bytes]:
        """The next data or close message (opcode, payload), continuation frames joined, pings answered."""
        opcode, payload = None, b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None  # servers do not mask; accept it anyway
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            op = b0 & 0x0F
            if op == PING:
                self.send_frame(PONG, data)
                continue
            if op == PONG:
                continue
            if op == CLOSE:
                return CLOSE, data
            opcode = op if opcode is None else opcode  # a continuation frame (opcode 0) extends the message
            payload += data
            if b0 & 0x80:  # FIN
                return opcode, payload

    def call(self, frame: dict) -> dict:
        """Send one JSON frame, return the server's JSON answer."""
        self.send_frame(TEXT, json.dumps(frame).encode())
        opcode, payload = self.recv_message()
        if opcode == CLOSE:
            raise ConnectionError(f"closed by the server: {payload[2:].decode(errors='replace')}")
        return json.loads(payload)

    def close(self) -> None:
        """End the session ({"type": "close"}, answered by the server's close frame) and the connection."""
        try:
            self.send_frame(TEXT, json.dumps({"type": "close"}).encode())
            while self.recv_message()[0] != CLOSE:
                pass
            self.send_frame(CLOSE, struct.pack("!H", 1000))  # echo the close: normal closure
        except (ConnectionError, OSError):
            pass
        finally:
            self.sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8765")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task-index", type=int, default=0)
    args = parser.parse_args()
    ws = WebSocket(args.url)
    try:
        answer = ws.call({"type": "reset", "data": {"seed": args.seed, "options": {"task_index": args.task_index}}})
        print(json.dumps(answer))
        while answer["type"] == "observation" and not answer["data"]["done"]:
            action = (
                f"<think>the expert says so</think><action>{answer['data']['observation']['expert_action']}</action>"
            )
            answer = ws.call({"type": "step", "data": {"text": action}})
            print(json.dumps(answer))
        print(json.dumps(ws.call({"type": "state"})))
    finally:
        ws.close()


if __name__ == "__main__":
    main()
