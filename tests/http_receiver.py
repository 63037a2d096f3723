#!/usr/bin/env python3
"""An HTTP receiver for the http sink's tests: takes POSTs and appends each to a log.

  http_receiver.py PORT_FILE LOG [--dedup] [--fail-every N]

Listens on a free port of 127.0.0.1 and writes it to PORT_FILE once it answers. Each POST is
one line of LOG (JSON: the Idempotency-Key, Onceflow-Message-Key and Onceflow-Producer headers,
the body, and whether it was kept), flushed before the answer. --dedup: a request whose
Idempotency-Key was taken before is answered 200 and not kept (as a receiver that honours the
key does).
--fail-every N: every Nth request is answered 503 without being taken (a busy receiver).
--refuse: every request is answered 400 "bad payload" (a receiver that rejects what it gets).
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file, log_path = sys.argv[1], sys.argv[2]
dedup = "--dedup" in sys.argv
refuse = "--refuse" in sys.argv
fail_every = int(sys.argv[sys.argv.index("--fail-every") + 1]) if "--fail-every" in sys.argv else 0
lock = threading.Lock()
seen = set()
requests = 0
log = open(log_path, "a", buffering=1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, text=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def do_POST(self):
        global requests
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        if len(body) < length:
            return  # the sender died mid-request: nothing was taken, and nothing is answered
        key = self.headers.get("Idempotency-Key", "")
        with lock:
            requests += 1
            if refuse:
                self.answer(400, b"bad payload")
                return
            if fail_every and requests % fail_every == 0:
                self.answer(503)
                return
            repeat = dedup and key and key in seen
            seen.add(key)
            log.write(json.dumps({"id": key, "key": self.headers.get("Onceflow-Message-Key"),
                                  "producer": self.headers.get("Onceflow-Producer"), "kept": not repeat,
                                  "body": body.decode("utf-8", "replace")}) + "\n")
        self.answer(200)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a sender killed mid-request (the tests kill -9 it)


server = Server(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
