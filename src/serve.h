/* serve.h - the metrics and health probe servers, as controller-runtime's
 * manager runs them: /metrics on --metrics-bind-address, /healthz and
 * /readyz on --health-probe-bind-address.
 *
 * Each is libmicrohttpd (plain HTTP, epoll) on a thread of its own, so a
 * scrape or a probe never waits for the loop and the loop never waits for
 * a client: /metrics reads the registry under its lock (metrics.h),
 * /healthz the scheduler's busy time (the watchdog's view) and a flag the
 * runtime sets when one of its tasks keeps dying, /readyz a flag
 * the runtime sets. /healthz fails (500) once one resume of a task has run
 * SERVE_STUCK seconds without waiting, which is when the watchdog
 * interrupts it, before it gives up on the process. Connections are bounded
 * in number (SERVE_MAX_CONNECTIONS, SERVE_MAX_PER_IP), memory (an oversized
 * request is refused) and idle time. The limit per address is small enough
 * that the addresses likely to reach a pod's port (its node's kubelet,
 * Prometheus, a few neighbours: 32 of them) cannot take every slot, so a
 * slow or idle flood from a few addresses never keeps the kubelet's probe
 * out; the idle timeout is well under a probe's period. */
#ifndef LUAOP_SERVE_H
#define LUAOP_SERVE_H

#include <stdatomic.h>
#include <stddef.h>

struct metrics;
struct sched;

#define SERVE_STUCK 5.0
#define SERVE_MAX_CONNECTIONS 256
#define SERVE_MAX_PER_IP 8 /* x 32 addresses = SERVE_MAX_CONNECTIONS */
#define SERVE_IDLE_TIMEOUT 3 /* seconds */
#define SERVE_MEMORY_LIMIT 16384 /* bytes per connection: its request's headers and all */

typedef struct serve serve;

/* What the servers answer from (all must outlive them). */
typedef struct serve_source {
    struct metrics *metrics;
    struct sched *sched;
    atomic_int *ready; /* non-zero: scripts loaded and caches synced */
    atomic_int *failing; /* non-zero: a supervised task keeps dying (luaop.supervisor) */
} serve_source;

/* Parse a bind address as controller-runtime takes it: "0" or "" (off:
 * *off set), ":PORT" (every interface), "HOST:PORT", "[IPV6]:PORT".
 * 0, or -1 with the reason in err. */
int serve_parse_address(const char *addr, int *off, char *host, size_t hostlen, char *port, size_t portlen,
                        char *err, size_t errlen);

/* A listening socket on addr (as serve_parse_address takes it, but not
 * off; "" host: every interface, IPv6 and IPv4 at once where the machine
 * has IPv6), non-blocking and close-on-exec; *bound_port the port it got.
 * -1 with the reason in err. tlsserve.c listens with it too. */
int serve_listen(const char *addr, int *bound_port, char *err, size_t errlen);

/* Start the servers whose addresses are not off (NULL: off). NULL with the
 * reason in err (an address in use, one that does not parse). */
serve *serve_start(const char *metrics_addr, const char *probe_addr, const serve_source *src, char *err,
                   size_t errlen);

/* The port a server listens on (after binding port 0): 0 when off. */
int serve_metrics_port(const serve *s);
int serve_probe_port(const serve *s);

/* Stop both servers and join their threads. */
void serve_stop(serve *s);

#endif
