"""A fake API server for the HTTP layer's unit specs (spec/unit/http_spec.lua).

Usage: fake_apiserver.py PORT_FILE LOG_FILE [CERT KEY]
With CERT and KEY it speaks HTTPS (HTTP/1.1 only: no HTTP/2). Listens on
127.0.0.1 (a free port, written to PORT_FILE) and appends one
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
  hold        answers after 0.3 seconds
  held-NAME   waits until the client goes away (then logs "gone NAME") or
              for 10 seconds
/arrived/NAME is 200 once held-NAME was asked for, /gone/NAME once its
client went away, else 404; /stats
answers {"connections": N, "max_connections": M}: the connections open
now, and the most open at once since the last /stats?reset.
The collection itself (GET .../configmaps?limit=2[&continue=N]) lists five
ConfigMaps two a page (all five when no limit is asked for) at resourceVersion 7, its metadata after its items as
for custom resources (a watch with sendInitialEvents=true is refused, 422,
as a server with the WatchList feature gate off refuses it); watched
(?watch=true...), it sends one ADDED event
(ConfigMap "new", resourceVersion 40 + W) and one BOOKMARK (resourceVersion
50 + W) on the W-th watch, then ends, as a watch ends at its timeout.
With labelSelector=deep, the list is "cm-a", "cm-deep" and "cm-b", and the
watch sends ADDED "watch-deep" then ADDED "watch-after" (resourceVersion
60 + W): the deep ones' data are nested 10,300 levels, more than luaop
decodes (and than the API server would ever send). With labelSelector=malformed
the list is the five as above, and the first five watches each send one
malformed event (an object null, a string, an unknown type, no metadata,
no name), then ADDED "never-seen"; later ones ADDED "watch-after".
Other label selectors name faults of the watch, the LIST staying the five
(and a streamed list refused, 422, but with noend):
  gone        every watch sends an ERROR event, 410 Expired
  status500   every watch sends an ERROR event, 500 InternalError (and the
              streamed list is refused with a 400, not a 422)
  noend       a watch with sendInitialEvents=true sends ADDED "streamed" and
              then nothing, never its initial-events-end bookmark, for 20 s
  endless     the first watch sends one line of 200 MiB (no newline), the
              later ones ADDED "watch-after"
  later       the first watch is answered 429 with Retry-After: 2, the
              later ones ADDED "watch-after"
  flood       every watch sends 200,000 ADDED events of 300 bytes (60 MB)
              as fast as it can, then ends
  stalllist   the first LIST's first page answers after 20 s (or when
              the client goes), the later ones at once
  badlist     the first seven LISTs answer pages no API server sends (no
              metadata; items a string, an object, missing; an item whose
              namespace is an object; a Status with 200; a continue token
              that comes again), each with "never-listed"; then the five
  badwatch    the first four watches send an event no API server sends
              (a namespace that is an object; another namespace than the
              one watched; an empty name; a DELETED cut in half), then
              ADDED "never-seen"; later ones ADDED "watch-after"
  slowstream  a watch with sendInitialEvents=true streams "s-0".."s-9", one
              every 0.3 s, then the initial-events-end bookmark, then
              nothing for 20 s
  spread      every watch sends ADDED "plain" (namespace default), ADDED
              "deep" (namespace elsewhere, nested past the decoder's
              limit), MODIFIED "escaped" (namespace d\\u0065fault), a
              BOOKMARK
  stallwatch  the first watch sends its headers, then nothing for 20 s
              (or until the client goes), the later ones ADDED
              "watch-after"
/control/times answers [[PATH, T], ...]: when each GET arrived (time.time()).
/api/v1 is the discovery of configmaps; /control/discovery?mode=M&times=N
makes its next N answers faulty: mode shape (a resource with no name) or
stall (no answer until the client goes, 60 s at most).
Leases (/apis/coordination.k8s.io/v1/namespaces/default/leases, with
its discovery) are kept: created (POST), read, replaced (PUT, a Conflict
when the resourceVersion is not the stored one), patched (as is) and
deleted; /control/hold-lease/NAME makes the Lease NAME held by "another"
(as a live leader's), /control/drop-lease/NAME deletes it;
/control/hold-lease/NAME?duration=D&delay=S holds it for
leaseDurationSeconds D (default 60) and answers each GET of it S seconds
late (&renew=T: its renewTime, T as given); /control/delay-lease/NAME?delay=S only delays them (its holder
kept). /control/writes answers [[METHOD, PATH, T], ...]: every write
request as it arrived (/control/slow-body?delay=S: each later write's
body is read only S seconds after its headers, as far as it comes, and
logged "body GOT/LENGTH"; a write whose body did not all come is not
answered). /control/leases answers every Lease (a list); a LIST of the Leases takes
labelSelector=K=V (a shard ring's). /control/lease-log answers [[WHAT, HOLDER, T], ...]: each GET of a
Lease answered ("GET", the holder it showed) and each write taken ("PUT"
or "POST", the holder written), T the server's time.time() when answered.
Any other path is a 404 Status. Requests without "Authorization: Bearer
good-token" (logged bearer-ok), "Bearer next-token" (a rotated one, logged
bearer-next) or alice's basic credentials get a 401 Status.
"""
import base64
import email.utils
import gzip
import json
import urllib.parse
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "/api/v1/namespaces/default/configmaps/"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
leases = {}  # name -> Lease
lease_delay = {}  # name -> seconds each GET of it waits
lease_log = []  # [what, holder, time answered]
writes = []  # [method, path, time arrived]: every write request
times = []  # [path, time arrived] of each GET
lease_rv = [100]
counts = {}
gone = set()
slow_body = [0.0]  # /control/slow-body: seconds a write's body waits to be read
discovery_fault = {"mode": None, "left": 0}  # /control/discovery: the next answers of /api/v1
arrived = set()
conns = {"now": 0, "max": 0}
lock = threading.Lock()


def log_line(text):
    """One line of the request log (sys.argv[2]); the caller holds lock."""
    with open(sys.argv[2], "a") as f:
        f.write(text + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: without this, Nagle's algorithm
    # and the client's delayed ACK hold every answer back by 40 ms
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        with lock:
            conns["now"] += 1
            conns["max"] = max(conns["max"], conns["now"])

    def finish(self):
        with lock:
            conns["now"] -= 1
        super().finish()

    def wait_gone(self, name, seconds=10):
        # the client's end closes (a read returns nothing) before we answer
        self.connection.settimeout(0.01)
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                if self.connection.recv(1, socket.MSG_PEEK) == b"":
                    with lock:
                        gone.add(name)
                        log_line("gone %s" % name)
                    self.close_connection = True
                    return True
            except socket.timeout:
                pass
            except OSError:
                return True
        self.connection.settimeout(None)
        return False

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

    def stream(self, lines):
        """A watch's answer: each line (JSON text) a chunk, then the end."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for text in lines:
            line = (text + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.write(b"0\r\n\r\n")

    def stream_fast(self, lines):
        """A watch's answer: the lines in chunks of about 64 KiB, then the end."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        buf = []
        size = 0
        try:
            for text in lines:
                buf.append(text + "\n")
                size += len(text) + 1
                if size >= 65536:
                    data = "".join(buf).encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    buf, size = [], 0
            data = "".join(buf).encode()
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def hold(self, lines, seconds):
        """Lines, then nothing until the client goes or seconds pass."""
        yield from lines
        self.wfile.flush()
        self.wait_gone("hold", seconds)

    def endless_line(self, mib):
        """A watch's answer of one line of mib MiB that never ends (the
        client is expected to give up first)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b'{"type":"ADDED","object":{"metadata":{"name":"' + b"x" * (1 << 20)
        try:
            for _ in range(mib):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def status(self, code, reason, message, headers=None):
        self.reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                          "reason": reason, "message": message, "code": code}, headers)

    # Writes: logged like GETs; Events (luaop's Warnings) are taken, any
    # other write is refused.
    def do_POST(self):
        self.write_request()

    def do_PATCH(self):
        self.write_request()

    def do_PUT(self):
        self.write_request()

    def do_DELETE(self):
        self.write_request()

    def lease_write(self, body):
        path = self.path.split("?", 1)[0]
        try:
            obj = json.loads(body or b"{}")
        except ValueError:
            return self.status(400, "BadRequest", "not JSON")
        with lock:
            if path == LEASES and self.command == "POST":
                name = (obj.get("metadata") or {}).get("name")
                if name in leases:
                    return self.status(409, "AlreadyExists", 'leases.coordination.k8s.io "%s" already exists' % name)
                lease_rv[0] += 1
                obj.setdefault("metadata", {})["resourceVersion"] = str(lease_rv[0])
                leases[name] = obj
                lease_log.append(["POST", (obj.get("spec") or {}).get("holderIdentity"), time.time()])
                return self.reply(201, obj)
            name = path[len(LEASES) + 1:]
            old = leases.get(name)
            if old is None:
                return self.status(404, "NotFound", 'leases.coordination.k8s.io "%s" not found' % name)
            if self.command == "DELETE":
                del leases[name]
                return self.reply(200, old)
            if self.command == "PATCH":
                return self.reply(200, old)
            if (obj.get("metadata") or {}).get("resourceVersion") != old["metadata"]["resourceVersion"]:
                return self.status(409, "Conflict", "the object has been modified")
            lease_rv[0] += 1
            obj["metadata"]["resourceVersion"] = str(lease_rv[0])
            leases[name] = obj
            lease_log.append(["PUT", (obj.get("spec") or {}).get("holderIdentity"), time.time()])
            return self.reply(200, obj)

    def write_request(self):
        n = int(self.headers.get("Content-Length") or 0)
        with lock:
            delay = slow_body[0]
        if delay:
            time.sleep(delay)
            got = []
            left = n
            while left > 0:
                try:
                    part = self.rfile.read1(min(left, 1 << 16))
                except OSError:
                    part = b""
                if not part:
                    break
                got.append(part)
                left -= len(part)
            with lock:
                log_line("%s %s body %d/%d" % (self.command, self.path, n - left, n))
            if left:
                self.close_connection = True
                return
            body = b"".join(got)
        else:
            body = self.rfile.read(n) if n else b"{}"
        with lock:
            log_line("%s %s write" % (self.command, self.path))
            writes.append([self.command, self.path, time.time()])
        if self.path.startswith("/apis/events.k8s.io/v1/"):
            return self.raw(201 if self.command == "POST" else 200, body)
        if self.path.split("?", 1)[0] == LEASES or self.path.startswith(LEASES + "/"):
            return self.lease_write(body)
        return self.status(405, "MethodNotAllowed", "the fake API server takes no writes")

    def do_GET(self):
        auth = self.headers.get("Authorization")
        basic = "Basic " + base64.b64encode(b"alice:s3cr3t-pw").decode()
        kind = {None: "none", "Bearer good-token": "bearer-ok", "Bearer next-token": "bearer-next",
                basic: "basic-ok"}.get(auth, "bad")
        with lock:
            log_line("%s %s %s" % (self.command, self.path, kind))
            counts[self.path] = counts.get(self.path, 0) + 1
            n = counts[self.path]
            times.append([self.path, time.time()])
        if kind not in ("bearer-ok", "bearer-next", "basic-ok"):
            return self.status(401, "Unauthorized", "Unauthorized")
        path = self.path
        if path.startswith("http://"):  # asked as a proxy
            path = "/" + path.split("/", 3)[3]
        name = path[len(PREFIX):] if path.startswith(PREFIX) else None
        if path.startswith("/stats"):
            with lock:
                body = {"connections": conns["now"], "max_connections": conns["max"]}
                if path.endswith("?reset"):
                    conns["max"] = conns["now"]
            return self.reply(200, body)
        for prefix, names in (("/gone/", gone), ("/arrived/", arrived)):
            if path.startswith(prefix):
                with lock:
                    seen = path[len(prefix):] in names
                return self.status(200 if seen else 404, "", "yes" if seen else "not yet")
        if path == "/apis/coordination.k8s.io/v1":
            return self.reply(200, {"kind": "APIResourceList", "groupVersion": "coordination.k8s.io/v1",
                                    "resources": [{"name": "leases", "namespaced": True, "kind": "Lease",
                                                   "verbs": ["create", "delete", "get", "patch", "update"]}]})
        if path == "/control/times":
            with lock:
                return self.reply(200, times)
        if path == "/control/writes":
            with lock:
                return self.reply(200, writes)
        if path.startswith("/control/slow-body?delay="):
            with lock:
                slow_body[0] = float(path.split("=", 1)[1])
            return self.reply(200, {})
        if path.startswith("/control/delay-lease/"):
            path, _, q = path.partition("?")
            opts = dict(kv.split("=", 1) for kv in q.split("&") if "=" in kv)
            with lock:
                lease_delay[path.rsplit("/", 1)[1]] = float(opts.get("delay", "0"))
            return self.reply(200, {})
        if path == "/control/leases":
            with lock:
                return self.reply(200, list(leases.values()))
        if path == "/control/lease-log":
            with lock:
                return self.reply(200, lease_log)
        if path.startswith("/control/hold-lease/") or path.startswith("/control/drop-lease/"):
            path, _, q = path.partition("?")
            opts = dict(kv.split("=", 1) for kv in q.split("&") if "=" in kv)
            name = path.rsplit("/", 1)[1]
            with lock:
                if path.startswith("/control/drop-lease/"):
                    leases.pop(name, None)
                else:
                    lease_rv[0] += 1
                    lease_delay[name] = float(opts.get("delay", "0"))
                    leases[name] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                    "metadata": {"name": name, "namespace": "default",
                                                 "resourceVersion": str(lease_rv[0])},
                                    "spec": {"holderIdentity": "another",
                                             "leaseDurationSeconds": int(opts.get("duration", "60")),
                                             "renewTime": opts.get("renew", "%.6f" % time.time())}}
            return self.reply(200, {})
        if path.split("?", 1)[0] == LEASES:  # a LIST, by labelSelector k=v (a shard ring's)
            query = dict(kv.split("=", 1) for kv in path.split("?", 1)[1].split("&")) if "?" in path else {}
            sel = urllib.parse.unquote(query.get("labelSelector", ""))
            k, _, v = sel.partition("=")
            with lock:
                items = [l for l in leases.values()
                         if not sel or ((l.get("metadata") or {}).get("labels") or {}).get(k) == v]
                rv = str(lease_rv[0])
            return self.reply(200, {"kind": "LeaseList", "apiVersion": "coordination.k8s.io/v1",
                                    "metadata": {"resourceVersion": rv}, "items": items})
        if path.startswith(LEASES + "/"):
            name = path[len(LEASES) + 1:]
            time.sleep(lease_delay.get(name, 0))
            with lock:
                lease = leases.get(name)
                if lease is not None:
                    lease_log.append(["GET", lease["spec"].get("holderIdentity"), time.time()])
            if lease is None:
                return self.status(404, "NotFound", "no such lease")
            return self.reply(200, lease)
        if path.startswith("/control/discovery?"):
            opts = dict(kv.split("=", 1) for kv in path.split("?", 1)[1].split("&") if "=" in kv)
            with lock:
                discovery_fault["mode"], discovery_fault["left"] = opts.get("mode"), int(opts.get("times", "1"))
            return self.reply(200, {})
        if path == "/api/v1":
            with lock:
                mode = discovery_fault["mode"] if discovery_fault["left"] > 0 else None
                discovery_fault["left"] -= 1
            if mode == "stall":
                self.wait_gone("discovery", 60)
                return None
            resource = {"name": "configmaps", "namespaced": True, "kind": "ConfigMap", "verbs": ["get", "list"]}
            if mode == "shape":
                del resource["name"]
            return self.reply(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [resource]})
        if path == PREFIX[:-1] or path.startswith(PREFIX[:-1] + "?"):
            query = dict(kv.split("=", 1) for kv in path.split("?", 1)[1].split("&")) if "?" in path else {}
            deep = query.get("labelSelector") == "deep"
            fault = query.get("labelSelector")
            watching = query.get("watch") in ("true", "1")
            if fault == "noend" and query.get("sendInitialEvents") == "true":
                return self.stream(self.hold(['{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1",'
                                              '"metadata":{"name":"streamed","namespace":"default",'
                                              '"resourceVersion":"5"}}}'], 20))
            if fault == "slowstream" and query.get("sendInitialEvents") == "true":
                # a streamed list of ten ConfigMaps "s-0".."s-9", one every
                # 0.3 s, then the end bookmark, then nothing for 20 s
                def slow():
                    for i in range(10):
                        yield ('{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":'
                               '{"name":"s-%d","namespace":"default","resourceVersion":"%d"}}}' % (i, 100 + i))
                        time.sleep(0.3)
                    yield ('{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":'
                           '{"resourceVersion":"200","annotations":{"k8s.io/initial-events-end":"true"}}}}')
                    self.wfile.flush()
                    self.wait_gone("slowstream", 20)
                try:
                    self.stream(slow())
                except OSError:
                    self.close_connection = True
                return None
            if query.get("sendInitialEvents") == "true":
                # as a server whose WatchList feature gate is off: a LIST
                # and a watch instead (the informer falls back); with
                # status500, a 400 (as an older server's)
                if fault == "status500":
                    return self.status(400, "BadRequest", "sendInitialEvents is not supported")
                return self.status(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: '
                                   "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList "
                                   "feature gate is enabled")
            if fault in ("gone", "status500") and watching:
                code = 410 if fault == "gone" else 500
                st = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                      "reason": "Expired" if code == 410 else "InternalError",
                      "message": "too old resource version: 7 (80)" if code == 410 else "etcd is unhappy"}
                return self.stream([json.dumps({"type": "ERROR", "object": st})])
            if fault == "flood" and watching:
                def flood():
                    pad = "p" * 200
                    for i in range(200000):
                        yield ('{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":'
                               '{"name":"f-%d","namespace":"default","resourceVersion":"%d"},"data":{"p":"%s"}}}'
                               % (i, 100 + i, pad))
                return self.stream_fast(flood())
            if fault == "badlist" and not watching:
                # the W-th LIST's first page, W <= 7, a page no API server
                # sends (then a page of "never-listed"); later ones as usual
                with lock:
                    if "continue" not in query:
                        counts["list"] = counts.get("list", 0) + 1
                    w = counts["list"]
                item = '{"metadata":{"name":"never-listed","namespace":"default"}}'
                bad = ['{"kind":"ConfigMapList","items":[%s]}' % item,
                       '{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":"oops"}',
                       '{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":{"a":%s}}' % item,
                       '{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"}}',
                       '{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[%s,'
                       '{"metadata":{"name":"x","namespace":{"a":1}}}]}' % item,
                       '{"kind":"Status","apiVersion":"v1","status":"Failure","code":500,"message":"a Status with 200"}',
                       # a continue token given again: a loop
                       '{"kind":"ConfigMapList","metadata":{"continue":"same","resourceVersion":"7"},"items":[%s]}'
                       % item]
                if w <= len(bad):
                    return self.raw(200, bad[w - 1].encode())
            if fault == "badwatch" and watching:
                # the W-th watch, W <= 4: an event no API server sends, then
                # ADDED "never-seen" (not to be taken after it); later ones
                # ADDED "watch-after"
                with lock:
                    counts["watch"] = counts.get("watch", 0) + 1
                    w = counts["watch"]

                def ev(typ, md):
                    return json.dumps({"type": typ, "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}})
                bad = [ev("ADDED", {"name": "ns-table", "namespace": {"x": 1}, "resourceVersion": "31"}),
                       ev("ADDED", {"name": "intruder", "namespace": "kube-system", "resourceVersion": "32"}),
                       ev("ADDED", {"name": "", "namespace": "default", "resourceVersion": "33"}),
                       # a DELETED cut in half: its line ends early
                       ev("DELETED", {"name": "cm-0", "namespace": "default", "resourceVersion": "34"})[:60]]
                later = ev("ADDED", {"name": "never-seen", "namespace": "default", "resourceVersion": str(35 + w)})
                if w <= len(bad):
                    return self.stream([bad[w - 1], later])
                return self.stream([ev("ADDED", {"name": "watch-after", "namespace": "default",
                                                  "resourceVersion": str(40 + w)})])
            if fault == "spread" and watching:
                # objects of namespaces for a sharded watch to filter: one
                # of "default"; one of "elsewhere" nested past what the
                # decoder takes; one whose namespace is written with an
                # escape (it decodes to "default"); a BOOKMARK
                return self.stream([
                    '{"type":"ADDED","object":{"metadata":{"name":"plain","namespace":"default","resourceVersion":"71"}}}',
                    '{"type":"ADDED","object":{"metadata":{"name":"deep","namespace":"elsewhere","resourceVersion":"72"},'
                    '"data":' + '{"a":' * 10300 + '1' + '}' * 10300 + '}}',
                    '{"type":"MODIFIED","object":{"metadata":{"name":"escaped","namespace":"d\\u0065fault",'
                    '"resourceVersion":"73"}}}',
                    '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"74"}}}'])
            if fault == "gzip" and watching:
                # one ADDED saying whether the watch asked for gzip (a
                # v1.37 API server gzips a watch when asked)
                asked = "gzip" in self.headers.get("Accept-Encoding", "")
                return self.stream([json.dumps({"type": "ADDED", "object": {
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                        "name": "asked-" + ("gzip" if asked else "identity"), "namespace": "default",
                        "resourceVersion": "60"}}})])
            if fault == "stalllist" and not watching and "continue" not in query:
                with lock:
                    counts["list"] = counts.get("list", 0) + 1
                    first = counts["list"] == 1
                if first:
                    self.wait_gone("stalllist", 20)
                    return None
            if fault in ("endless", "later", "stallwatch", "stalllist") and watching:
                with lock:
                    counts["watch"] = counts.get("watch", 0) + 1
                    w = counts["watch"]
                if w == 1 and fault == "stallwatch":
                    return self.stream(self.hold([], 20))
                if w == 1 and fault == "later":
                    return self.status(429, "TooManyRequests", "come back later", {"Retry-After": "2"})
                if w == 1:
                    return self.endless_line(200)
                return self.stream(['{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":'
                                    '{"name":"watch-after","namespace":"default","resourceVersion":"%d"}}}' % (40 + w)])

            def cm(name, rv=None, nested=False):
                md = {"name": name, "namespace": "default"}
                if rv:
                    md["resourceVersion"] = rv
                text = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": md})
                if nested:
                    text = text[:-1] + ',"data":' + '{"a":' * 10300 + '1' + '}' * 10300 + '}'
                return text

            if query.get("labelSelector") == "malformed" and query.get("watch") in ("true", "1"):
                # the W-th watch: W <= 5, a malformed event and then an
                # object that must not be taken after it; then "watch-after"
                with lock:
                    counts["watch"] = counts.get("watch", 0) + 1
                    w = counts["watch"]
                bad = ['{"type":"ADDED","object":null}', '{"type":"MODIFIED","object":"a string"}',
                       '{"type":"SURPRISE","object":%s}' % cm("surprise", str(30 + w)),
                       '{"type":"ADDED","object":{"kind":"ConfigMap"}}',
                       '{"type":"DELETED","object":{"metadata":{"namespace":"default"}}}']
                lines = ([bad[w - 1], '{"type":"ADDED","object":%s}' % cm("never-seen", str(30 + w))]
                         if w <= len(bad) else ['{"type":"ADDED","object":%s}' % cm("watch-after", str(40 + w))])
                return self.stream(lines)
            if deep and query.get("watch") in ("true", "1"):
                with lock:
                    counts["watch"] = counts.get("watch", 0) + 1
                    w = counts["watch"]
                return self.stream('{"type":"ADDED","object":%s}' % obj
                                   for obj in (cm("watch-deep", str(59 + w), True), cm("watch-after", str(60 + w))))
            if deep:
                body = '{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[%s]}' % (
                    ",".join((cm("cm-a"), cm("cm-deep", None, True), cm("cm-b"))))
                return self.raw(200, body.encode())
            if query.get("watch") in ("true", "1"):
                with lock:
                    counts["watch"] = counts.get("watch", 0) + 1
                    w = counts["watch"]
                events = [
                    {"type": "ADDED", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                        "name": "new", "namespace": "default", "resourceVersion": str(40 + w)}}},
                    {"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                        "resourceVersion": str(50 + w)}}},
                ]
                return self.stream(json.dumps(ev) for ev in events)
            start = int(query.get("continue", "0"))
            size = 2 if "limit" in query else 5  # (no limit asked for: all five at once)
            items = [{"metadata": {"name": "cm-%d" % i, "namespace": "default", "uid": "uid-cm-%d" % i,
                                   "annotations": {"note": '"continue": "%d"}]' % i}}, "data": {"n": str(i)}}
                     for i in range(start, min(start + size, 5))]
            body = '{"apiVersion":"v1","items":%s,"kind":"ConfigMapList","metadata":{%s"resourceVersion":"7"}}' % (
                json.dumps(items), '"continue":"%d",' % (start + size) if start + size < 5 else "")
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
        if name == "hold":
            time.sleep(0.3)
            return self.reply(200, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
        if name and name.startswith("held-"):
            with lock:
                arrived.add(name[5:])
            if self.wait_gone(name[5:]):
                return None
            return self.status(200, "", "late")
        if name == "slow":
            time.sleep(3)
            return self.status(200, "", "late")
        return self.status(404, "NotFound", "no such thing")


class Server(ThreadingHTTPServer):
    # socketserver's listen backlog is 5: a sixth connection at once has its
    # SYN dropped and retried a second later
    request_queue_size = 128
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
if len(sys.argv) > 4:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(sys.argv[3], sys.argv[4])
    server.socket = tls.wrap_socket(server.socket, server_side=True)
with open(sys.argv[1], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
