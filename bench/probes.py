"""bench/probes.py METRICS_PORT PROBE_PORT SECONDS: the latency of /healthz,
/readyz and /metrics (a new connection each, as the kubelet and Prometheus
make them), first alone, then while a flood of bad clients holds the
servers (idle connections up to the per-address limit's edge, slow clients,
oversized headers, junk), with the reconciles a second from
controller_runtime_reconcile_total in each phase."""
import socket, sys, threading, time

mport, pport, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])

def get(port, path):
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return time.perf_counter() - t0, data

def reconciles():
    _, data = get(mport, "/metrics")
    n = 0
    for line in data.decode().splitlines():
        if line.startswith('controller_runtime_reconcile_total{controller="ticker"'):
            n += float(line.split()[-1])
    return n

def measure(label):
    lat = {"/healthz": [], "/readyz": [], "/metrics": []}
    r0, t0 = reconciles(), time.time()
    failed = 0
    while time.time() - t0 < secs:
        for path in lat:
            try:
                d, data = get(mport if path == "/metrics" else pport, path)
                if b" 200 " in data.split(b"\r\n", 1)[0]:
                    lat[path].append(d)
                else:
                    failed += 1
            except OSError:
                failed += 1
        time.sleep(0.01)
    rate = (reconciles() - r0) / (time.time() - t0)
    out = {}
    for path, xs in lat.items():
        xs.sort()
        if xs:
            out[path] = (xs[len(xs) // 2] * 1000, xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1000, len(xs))
    return out, rate, failed

stop = threading.Event()
def flood(port):
    held = []
    def conn():
        s = socket.socket(); s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port)); held.append(s); return s
        except OSError:
            return None
    for _ in range(40):
        conn()
    slow = [conn() for _ in range(10)]
    while not stop.is_set():
        for s in slow:
            try:
                if s: s.send(b"G")
            except OSError: pass
        for _ in range(5):
            s = conn()
            if s:
                try: s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n")
                except OSError: pass
        for _ in range(5):
            s = conn()
            if s:
                try: s.send(b"\x16\x03\x01junk\r\n\r\n\x00\xff" * 20)
                except OSError: pass
        while len(held) > 58:  # under the limit of 64 per address: the probes still get in
            try: held.pop(50).close()
            except OSError: pass
        time.sleep(0.2)
    for s in held:
        s.close()

base, base_rate, base_failed = measure("alone")
threads = [threading.Thread(target=flood, args=(p,)) for p in (mport, pport)]
for t in threads: t.start()
time.sleep(0.5)
flooded, flood_rate, flood_failed = measure("flood")
stop.set()
for t in threads: t.join()

print("%-10s %28s %28s %8s" % ("", "alone: p50 / p99 ms (n)", "flood: p50 / p99 ms (n)", "p99 x"))
for path in base:
    b, f = base[path], flooded.get(path, (float("nan"),) * 3)
    print("%-10s %12.3f / %7.3f (%4d) %12.3f / %7.3f (%4d) %8.2f" % (path, b[0], b[1], b[2], f[0], f[1], f[2], f[1] / b[1]))
print("reconciles/s: %.0f alone, %.0f during the flood (ratio %.2f); failed probes: %d alone, %d during the flood" %
      (base_rate, flood_rate, flood_rate / base_rate if base_rate else float("nan"), base_failed, flood_failed))
