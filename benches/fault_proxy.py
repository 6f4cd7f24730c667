"""A fault-injecting HTTP proxy in front of an S3 server (moto): every storage fault of issue 58.

Each request is classified by S3 operation:

    get        GET of an object (ranged or not)
    head       HEAD
    put        PUT of an object (no precondition)
    cput       conditional PUT: `If-None-Match: *` or `If-Match` (manifest commits, the writer lease)
    list       GET on the bucket with `list-type=2` / `prefix=` (ListObjects)
    delete     DELETE of an object, and the multi-object delete `POST ?delete`
    multipart  POST `?uploads`, PUT with `partNumber`, POST `?uploadId` (and DELETE `?uploadId`)

and, when a rule (kind, op, rate) matches, answered with one of these faults:

    reset-before      the client connection is reset (RST) without forwarding the request
    reset-during      forwarded; the status line and half the body (half the headers when the body is
                      empty) are sent, then the connection is reset
    timeout           nothing forwarded; the connection is held open `timeout_delay` seconds (35: past
                      object_store's 30 s request timeout), then closed
    500               500 InternalError (S3's XML error), not forwarded
    503               503 ServiceUnavailable, not forwarded
    slowdown          503 with `<Code>SlowDown</Code>`, not forwarded
    drip              forwarded; the body sent `drip_bytes` bytes every 100 ms (the rest at once after
                      `drip_max` seconds)
    lost-after-write  forwarded (the write lands in the store), then the connection is reset without
                      any response

A rule fires on a matching request with probability `rate` (a `random.Random(seed)`: the same
request sequence gives the same injections), or exactly on the `nth` matching request, and at most
`max_inject` times (0: no limit). Counts requests per op and injections per (kind, op).

    proxy = FaultProxy(upstream_port)             # forwards everything
    proxy.set_rules([Rule("reset-during", "cput", rate=0.3)])
    ...; proxy.set_rules([])                      # the fault off
    proxy.requests, proxy.injected                # {op: n}, {(kind, op): n}

Standalone: `python benches/fault_proxy.py --upstream 127.0.0.1:5000 --kind 503 --op get --rate 0.2`.
"""
import argparse, http.client, random, socket, struct, threading, time, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KINDS = ("reset-before", "reset-during", "timeout", "500", "503", "slowdown", "drip", "lost-after-write")
OPS = ("get", "head", "put", "cput", "list", "delete", "multipart")
WRITE_OPS = ("put", "cput", "delete", "multipart")

ERRORS = {
    "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "Service Unavailable", "ServiceUnavailable", "Service is unable to handle request."),
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}


def classify(method, path, headers):
    """The S3 operation of a path-style request (`/bucket/key?query`)."""
    u = urllib.parse.urlsplit(path)
    q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
    key = u.path.lstrip("/").partition("/")[2]
    if method == "HEAD":
        return "head"
    if method == "GET":
        if not key and ("list-type" in q or "prefix" in q or "delimiter" in q or not q):
            return "list"
        return "get"
    if method == "PUT":
        if "partNumber" in q or "uploadId" in q:
            return "multipart"
        if headers.get("if-none-match") or headers.get("if-match"):
            return "cput"
        return "put"
    if method == "POST":
        if "delete" in q:
            return "delete"
        if "uploads" in q or "uploadId" in q:
            return "multipart"
        return "put"
    if method == "DELETE":
        return "multipart" if "uploadId" in q else "delete"
    return method.lower()


class Rule:
    def __init__(self, kind, op, rate=1.0, nth=0, max_inject=0, seed=7):
        assert kind in KINDS, kind
        self.kind, self.op, self.rate, self.nth, self.max_inject = kind, op, rate, nth, max_inject
        self.rng, self.seen, self.fired = random.Random(seed), 0, 0

    def fire(self, op):
        if op != self.op and self.op != "any":
            return False
        self.seen += 1
        if self.max_inject and self.fired >= self.max_inject:
            return False
        hit = self.seen == self.nth if self.nth else self.rng.random() < self.rate
        self.fired += hit
        return hit

    def __repr__(self):
        how = f"nth={self.nth}" if self.nth else f"rate={self.rate}"
        return f"{self.kind}×{self.op} {how}" + (f" max={self.max_inject}" if self.max_inject else "")


class FaultProxy:
    def __init__(self, upstream_port, timeout_delay=35.0, drip_bytes=64, drip_max=10.0, upstream_host="127.0.0.1"):
        self.upstream = (upstream_host, upstream_port)
        self.timeout_delay, self.drip_bytes, self.drip_max = timeout_delay, drip_bytes, drip_max
        self.lock = threading.Lock()
        self.rules, self.requests, self.injected, self.log = [], {}, {}, []
        self.held = []  # sockets held open by `timeout`
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def finish(self):
                try:
                    super().finish()
                except OSError:
                    pass

            def _body(self):
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    data = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("content-length") or 0)
                return self.rfile.read(n) if n else b""

            def _reset(self):
                """Close the client connection with an RST (SO_LINGER 0), not a FIN."""
                self.close_connection = True
                try:
                    self.wfile.flush()
                except OSError:
                    pass
                try:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                except OSError:
                    pass

            def _forward(self, body):
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                    hdrs = [(k, v) for k, v in r.getheaders()
                            if k.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date")]
                    clen = r.getheader("content-length") if self.command == "HEAD" else str(len(data))
                    return r.status, r.reason, hdrs, clen or "0", data
                finally:
                    conn.close()

            def _head_bytes(self, status, reason, hdrs, clen):
                lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in hdrs] + [f"Content-Length: {clen}"]
                return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

            def _any(self):
                body = self._body()
                op = classify(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
                kind = None
                with proxy.lock:
                    proxy.requests[op] = proxy.requests.get(op, 0) + 1
                    for rule in proxy.rules:
                        if rule.fire(op):
                            kind = rule.kind
                            proxy.injected[(kind, op)] = proxy.injected.get((kind, op), 0) + 1
                            n = sum(proxy.injected.values())
                            proxy.log.append((time.time(), kind, op, self.command, self.path[:200]))
                            break
                if kind is None:
                    return self._send(*self._forward(body))
                if kind == "reset-before":
                    return self._reset()
                if kind == "timeout":
                    with proxy.lock:
                        proxy.held.append(self.connection)
                    time.sleep(proxy.timeout_delay)
                    return self._reset()
                if kind in ERRORS:
                    status, reason, code, msg = ERRORS[kind]
                    payload = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{msg}'
                               f'</Message><RequestId>faults-{n}</RequestId></Error>').encode()
                    self.send_response(status, reason)
                    self.send_header("content-type", "application/xml")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return
                status, reason, hdrs, clen, data = self._forward(body)
                if kind == "lost-after-write":
                    return self._reset()
                head = self._head_bytes(status, reason, hdrs, clen)
                if kind == "reset-during":
                    if self.command != "HEAD" and data:
                        self.wfile.write(head + data[: len(data) // 2])
                    else:  # no body to cut: cut the headers
                        self.wfile.write(head[: max(len(head) // 2, 16)])
                    return self._reset()
                if kind == "drip":
                    self.wfile.write(head)
                    self.wfile.flush()
                    if self.command == "HEAD":
                        return
                    t0, i = time.time(), 0
                    try:
                        while i < len(data):
                            if time.time() - t0 > proxy.drip_max:
                                self.wfile.write(data[i:])
                                break
                            self.wfile.write(data[i:i + proxy.drip_bytes])
                            self.wfile.flush()
                            i += proxy.drip_bytes
                            time.sleep(0.1)
                    except OSError:
                        self.close_connection = True
                    return

            def _send(self, status, reason, hdrs, clen, data):
                self.send_response(status, reason)
                for k, v in hdrs:
                    self.send_header(k, v)
                self.send_header("content-length", clen)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):  # resets and closed clients are the point
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def set_rules(self, rules):
        with self.lock:
            self.rules = list(rules)

    def reset_counts(self):
        with self.lock:
            self.requests, self.injected, self.log = {}, {}, []

    def stop(self):
        self.server.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True, help="host:port of the S3 server")
    ap.add_argument("--kind", choices=KINDS)
    ap.add_argument("--op", choices=(*OPS, "any"), default="any")
    ap.add_argument("--rate", type=float, default=0.1)
    ap.add_argument("--nth", type=int, default=0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout-delay", type=float, default=35)
    a = ap.parse_args()
    host, port = a.upstream.rsplit(":", 1)
    p = FaultProxy(int(port), a.timeout_delay, upstream_host=host)
    if a.kind:
        p.set_rules([Rule(a.kind, a.op, a.rate, a.nth, seed=a.seed)])
    print(f"listening on {p.endpoint}", flush=True)
    try:
        while True:
            time.sleep(10)
            print(f"requests {p.requests} injected {p.injected}", flush=True)
    except KeyboardInterrupt:
        p.stop()


if __name__ == "__main__":
    main()
