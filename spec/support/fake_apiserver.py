"""A fake API server for the HTTP layer's unit specs (spec/unit/http_spec.lua).

Usage: fake_apiserver.py PORT_FILE LOG_FILE
Listens on 127.0.0.1 (a free port, written to PORT_FILE) and appends one
line per request to LOG_FILE: "METHOD PATH AUTH" where AUTH is "bearer-ok",
"basic-ok" (alice / s3cr3t-pw), "bad" or "none". A request in proxy form
(GET http://host/path) is served too, and logged with its absolute URL.
Paths (under /api/v1/namespaces/default/configmaps/):
  ok          200 with a ConfigMap
  flaky-N     429 with Retry-After: 0 for the first N requests, then 200
  busy        503 with Retry-After: 0 once, then 200
  dated       503 with Retry-After as an HTTP date (now) once, then 200
  broken      500 without Retry-After, always
  redirect    302 to /stolen on this server
  slow        answers after 3 seconds
  notjson     200 with a body that is not JSON
  later       429 with Retry-After: 5, always
The collection itself (GET .../configmaps?limit=2[&continue=N]) lists five
ConfigMaps two a page, its metadata after its items as for custom
resources; /api/v1 is the discovery of configmaps.
Any other path is a 404 Status. Requests without "Authorization: Bearer
good-token" or alice's basic credentials get a 401 Status.
"""
import base64
import email.utils
import gzip
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "/api/v1/namespaces/default/configmaps/"
counts = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: without this, Nagle's algorithm
    # and the client's delayed ACK hold every answer back by 40 ms
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def raw(self, code, data, headers=None):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def reply(self, code, body, headers=None):
        self.raw(code, json.dumps(body).encode(), headers)

    def status(self, code, reason, message, headers=None):
        self.reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                          "reason": reason, "message": message, "code": code}, headers)

    def do_GET(self):
        auth = self.headers.get("Authorization")
        basic = "Basic " + base64.b64encode(b"alice:s3cr3t-pw").decode()
        kind = {None: "none", "Bearer good-token": "bearer-ok", basic: "basic-ok"}.get(auth, "bad")
        with lock:
            with open(sys.argv[2], "a") as f:
                f.write("%s %s %s\n" % (self.command, self.path, kind))
            counts[self.path] = counts.get(self.path, 0) + 1
            n = counts[self.path]
        if kind not in ("bearer-ok", "basic-ok"):
            return self.status(401, "Unauthorized", "Unauthorized")
        path = self.path
        if path.startswith("http://"):  # asked as a proxy
            path = "/" + path.split("/", 3)[3]
        name = path[len(PREFIX):] if path.startswith(PREFIX) else None
        if path == "/api/v1":
            return self.reply(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "configmaps", "namespaced": True, "kind": "ConfigMap", "verbs": ["get", "list"]}]})
        if path.startswith(PREFIX[:-1] + "?"):
            query = dict(kv.split("=", 1) for kv in path.split("?", 1)[1].split("&"))
            start = int(query.get("continue", "0"))
            items = [{"metadata": {"name": "cm-%d" % i, "namespace": "default",
                                   "annotations": {"note": '"continue": "%d"}]' % i}}}
                     for i in range(start, min(start + 2, 5))]
            body = '{"apiVersion":"v1","items":%s,"kind":"ConfigMapList","metadata":{%s"resourceVersion":"7"}}' % (
                json.dumps(items), '"continue":"%d",' % (start + 2) if start + 2 < 5 else "")
            return self.raw(200, body.encode())
        if name == "later":
            return self.status(429, "TooManyRequests", "come back later", {"Retry-After": "5"})
        if name == "notjson":
            return self.raw(200, b'{"kind":]')
        if name == "ok" or (name and name.startswith("flaky-") and n > int(name[6:])) or (name in ("busy", "dated") and n > 1):
            return self.reply(200, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": name, "namespace": "default"}, "data": {"n": str(n)}})
        if name and name.startswith("flaky-"):
            return self.status(429, "TooManyRequests", "slow down", {"Retry-After": "0"})
        if name == "busy":
            return self.status(503, "ServiceUnavailable", "busy", {"Retry-After": "0"})
        if name == "dated":
            return self.status(503, "ServiceUnavailable", "busy",
                               {"Retry-After": email.utils.formatdate(time.time(), usegmt=True)})
        if name == "broken":
            return self.status(500, "InternalError", "broken")
        if name == "redirect":
            self.send_response(302)
            self.send_header("Location", "/stolen")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if name == "gzip":  # gzipped when the client asks for it
            asked = "gzip" in self.headers.get("Accept-Encoding", "")
            data = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                               "data": {"encoding": "gzip" if asked else "identity"}}).encode()
            if asked:
                return self.raw(200, gzip.compress(data), {"Content-Encoding": "gzip"})
            return self.raw(200, data)
        if name == "slow":
            time.sleep(3)
            return self.status(200, "", "late")
        return self.status(404, "NotFound", "no such thing")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
