"""bench/probes.py METRICS_PORT PROBE_PORT SECONDS: the latency of /healthz,
/readyz and /metrics (a new connection each and 1 s to answer, as the
kubelet and Prometheus make them), first alone, then while a flood of bad clients holds the
servers from four other addresses (every connection the server takes, each
a slow client sending a byte a second; oversized headers, junk), with the reconciles a second from
controller_runtime_reconcile_total in each phase."""
import socket, sys, threading, time

mport, pport, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])

def get(port, path):
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=1)  # the kubelet's timeoutSeconds
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
SOURCES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
def flood(port):
    """From four addresses other than the probes' (as pods beside the
    kubelet): every connection the server takes, each sending a byte a
    second (slowloris), and, every 0.2 s, five requests with 64 KiB of
    headers and five of junk."""
    held = []
    def conn(src):
        s = socket.socket(); s.settimeout(2)
        try:
            s.bind((src, 0)); s.connect(("127.0.0.1", port)); return s
        except OSError:
            s.close(); return None
    for src in SOURCES:
        for _ in range(64):
            s = conn(src)
            if s:
                held.append(s)
    last = 0
    while not stop.is_set():
        if time.time() - last >= 1:
            last = time.time()
            for s in held:
                try: s.send(b"G")
                except OSError: pass
        for src in SOURCES[:1]:
            for _ in range(5):
                s = conn(src)
                if s:
                    try: s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n")
                    except OSError: pass
                    s.close()
            for _ in range(5):
                s = conn(src)
                if s:
                    try: s.send(b"\x16\x03\x01junk\r\n\r\n\x00\xff" * 20)
                    except OSError: pass
                    s.close()
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
n_base = sum(v[2] for v in base.values())
n_flood = sum(v[2] for v in flooded.values())
print("reconciles/s: %.0f alone, %.0f during the flood (ratio %.2f)" %
      (base_rate, flood_rate, flood_rate / base_rate if base_rate else float("nan")))
print("answered 200 within 1 s: %d of %d alone (%.1f%%), %d of %d during the flood (%.1f%%)" %
      (n_base, n_base + base_failed, 100.0 * n_base / max(1, n_base + base_failed),
       n_flood, n_flood + flood_failed, 100.0 * n_flood / max(1, n_flood + flood_failed)))
