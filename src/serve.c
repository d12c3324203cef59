/* serve.c - the metrics and health probe servers (see serve.h). */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "dbuf.h"
#include "log.h"
#include "metrics.h"
#include "scheduler.h"

typedef struct serve_daemon {
    struct MHD_Daemon *d;
    int fd;
    int port;
} serve_daemon;

struct serve {
    serve_source src;
    serve_daemon metrics, probes;
};

int serve_parse_address(const char *addr, int *off, char *host, size_t hostlen, char *port, size_t portlen,
                        char *err, size_t errlen)
{
    const char *colon, *h = addr;
    size_t hn;

    *off = addr == NULL || addr[0] == '\0' || strcmp(addr, "0") == 0;
    if (*off)
        return 0;
    colon = strrchr(addr, ':');
    if (colon == NULL || colon[1] == '\0') {
        snprintf(err, errlen, "bind address %s has no port: give HOST:PORT, :PORT or 0 (off)", addr);
        return -1;
    }
    hn = (size_t)(colon - addr);
    if (hn >= 2 && addr[0] == '[' && addr[hn - 1] == ']') {
        h = addr + 1;
        hn -= 2;
    } else if (memchr(addr, ':', hn)) {
        snprintf(err, errlen, "bind address %s: an IPv6 address goes in brackets, [ADDRESS]:PORT", addr);
        return -1;
    }
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9' || p - colon > 5) {
            snprintf(err, errlen, "bind address %s: the port must be a number from 0 to 65535", addr);
            return -1;
        }
    }
    if (atoi(colon + 1) > 65535 || hn >= hostlen || strlen(colon + 1) >= portlen) {
        snprintf(err, errlen, "bind address %s: the port must be a number from 0 to 65535", addr);
        return -1;
    }
    memcpy(host, h, hn);
    host[hn] = '\0';
    snprintf(port, portlen, "%s", colon + 1);
    return 0;
}

int serve_listen(const char *addr, int *bound_port, char *err, size_t errlen)
{
    char host[256], port[8];
    struct addrinfo hints = {0}, *res = NULL, *ai;
    int off, fd = -1, e = 0, one = 1, zero = 0;

    if (serve_parse_address(addr, &off, host, sizeof host, port, sizeof port, err, errlen) != 0)
        return -1;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    hints.ai_family = host[0] ? AF_UNSPEC : AF_INET6;
    e = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (e != 0 && !host[0]) { /* no IPv6 here */
        hints.ai_family = AF_INET;
        e = getaddrinfo(NULL, port, &hints, &res);
    }
    if (e != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, gai_strerror(e));
        return -1;
    }
    e = 0;
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6 && !host[0])
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(e));
        return -1;
    }
    {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        *bound_port = 0;
        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
            *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                         : ((struct sockaddr_in *)&ss)->sin_port);
    }
    return fd;
}

static enum MHD_Result serve_reply(struct MHD_Connection *c, unsigned status, dbuf *body, const char *type)
{
    struct MHD_Response *r;
    enum MHD_Result ok;

    /* the body's buffer passes to libmicrohttpd, which frees it */
    r = MHD_create_response_from_buffer(body->len, body->data ? body->data : (void *)"",
                                        body->data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        dbuf_free(body);
        return MHD_NO;
    }
    body->data = NULL;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result serve_text(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
    dbuf b = {0};
    va_list ap;
    char line[256];

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (dbuf_printf(&b, "%s\n", line) != 0) {
        dbuf_free(&b);
        return MHD_NO;
    }
    return serve_reply(c, status, &b, "text/plain; charset=utf-8");
}

/* Whether the request is a GET or HEAD with no body (first call: headers
 * only, *done notes it; libmicrohttpd calls again for the body). */
static int serve_method_ok(const char *method)
{
    return strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
}

static enum MHD_Result serve_metrics(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                     const char *version, const char *upload, size_t *upload_size, void **state)
{
    serve *s = cls;
    dbuf b = {0};

    (void)version;
    (void)upload;
    if (*state == NULL) { /* headers only so far */
        *state = s;
        return MHD_YES;
    }
    if (*upload_size) { /* a body: not read, not kept */
        *upload_size = 0;
        return MHD_YES;
    }
    if (!serve_method_ok(method))
        return serve_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD");
    if (strcmp(url, "/metrics") != 0)
        return serve_text(c, MHD_HTTP_NOT_FOUND, "404 page not found");
    if (metrics_write(s->src.metrics, metrics_now(), &b) != 0) {
        dbuf_free(&b);
        return serve_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    return serve_reply(c, MHD_HTTP_OK, &b, "text/plain; version=0.0.4; charset=utf-8");
}

static enum MHD_Result serve_probes(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                    const char *version, const char *upload, size_t *upload_size, void **state)
{
    serve *s = cls;

    (void)version;
    (void)upload;
    if (*state == NULL) {
        *state = s;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (!serve_method_ok(method))
        return serve_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD");
    if (strcmp(url, "/healthz") == 0) {
        uint64_t since = sched_busy_since(s->src.sched);
        double busy = since ? metrics_now() - (double)since / 1e9 : 0;
        if (busy > SERVE_STUCK)
            return serve_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "the loop is stuck: one task has run %.1f s without waiting", busy);
        if (s->src.failing && atomic_load(s->src.failing))
            return serve_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "a task of the runtime keeps failing (its log says which)");
        return serve_text(c, MHD_HTTP_OK, "ok");
    }
    if (strcmp(url, "/readyz") == 0) {
        if (!atomic_load(s->src.ready))
            return serve_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                              "not ready: scripts loading, or a cache not synced or not running");
        return serve_text(c, MHD_HTTP_OK, "ok");
    }
    return serve_text(c, MHD_HTTP_NOT_FOUND, "404 page not found");
}

/* libmicrohttpd's own messages (a client that misbehaved, a connection
 * refused at the limit): debug lines, so a flood cannot flood the log. */
static void serve_log(void *cls, const char *fmt, va_list ap)
{
    char msg[256];
    size_t n;

    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    log_write(LOG_DEBUG, "serve", msg, NULL, 0);
}

static int serve_daemon_start(serve_daemon *sd, const char *addr, MHD_AccessHandlerCallback handler, serve *s,
                              char *err, size_t errlen)
{
    sd->fd = serve_listen(addr, &sd->port, err, errlen);
    if (sd->fd < 0)
        return -1;
    sd->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                             handler, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)sd->fd,
                             MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVE_MAX_CONNECTIONS,
                             MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)SERVE_MAX_PER_IP,
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_IDLE_TIMEOUT,
                             MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVE_MEMORY_LIMIT,
                             MHD_OPTION_EXTERNAL_LOGGER, serve_log, NULL, MHD_OPTION_END);
    if (sd->d == NULL) {
        close(sd->fd);
        sd->fd = -1;
        snprintf(err, errlen, "cannot serve on %s: the HTTP server did not start", addr);
        return -1;
    }
    sd->fd = -1; /* libmicrohttpd's now: it closes it when stopped */
    return 0;
}

serve *serve_start(const char *metrics_addr, const char *probe_addr, const serve_source *src, char *err,
                   size_t errlen)
{
    serve *s = calloc(1, sizeof *s);
    char host[256], port[8];
    int off;

    if (s == NULL) {
        snprintf(err, errlen, "not enough memory");
        return NULL;
    }
    s->src = *src;
    s->metrics.fd = s->probes.fd = -1;
    if (metrics_addr && (serve_parse_address(metrics_addr, &off, host, sizeof host, port, sizeof port, err, errlen) != 0 ||
                         (!off && serve_daemon_start(&s->metrics, metrics_addr, serve_metrics, s, err, errlen) != 0)))
        goto fail;
    if (probe_addr && (serve_parse_address(probe_addr, &off, host, sizeof host, port, sizeof port, err, errlen) != 0 ||
                       (!off && serve_daemon_start(&s->probes, probe_addr, serve_probes, s, err, errlen) != 0)))
        goto fail;
    return s;
fail:
    serve_stop(s);
    return NULL;
}

int serve_metrics_port(const serve *s)
{
    return s && s->metrics.d ? s->metrics.port : 0;
}

int serve_probe_port(const serve *s)
{
    return s && s->probes.d ? s->probes.port : 0;
}

static void serve_daemon_stop(serve_daemon *sd)
{
    if (sd->d)
        MHD_stop_daemon(sd->d);
    if (sd->fd >= 0)
        close(sd->fd);
    sd->d = NULL;
    sd->fd = -1;
}

void serve_stop(serve *s)
{
    if (s == NULL)
        return;
    serve_daemon_stop(&s->metrics);
    serve_daemon_stop(&s->probes);
    free(s);
}
