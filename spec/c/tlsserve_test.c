/* tlsserve_test.c - the HTTPS server (src/tlsserve.c) driven from C, this
 * thread playing the loop: requests from many client threads at once
 * crossing to it and their replies back; requests held by the loop when
 * the server stops (their replies refused, released after, nothing freed
 * twice or left behind: ASan and LeakSanitizer watch); the errors of a
 * start; plain HTTP's raw 400. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "tap.h"
#include "tlsserve.h"

static int wake[2]; /* the server thread's notify: a byte per queued request */

static void notify(void *arg)
{
    char c = 1;

    (void)arg;
    if (write(wake[1], &c, 1) < 0)
        perror("write");
}

static int connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {10, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* GET path over TLS (a POST of post bytes when not 0; no verification:
 * the certificate is self-signed): the status, and the body in body; -1
 * when no answer came. */
static int request(int port, const char *path, size_t post, char *body, size_t bodylen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    int fd = connect_to(port), status = -1, n;
    char req[128], buf[8192];
    size_t got = 0;

    if (ssl == NULL || fd < 0 || !SSL_set_fd(ssl, fd) || SSL_connect(ssl) != 1)
        goto out;
    snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
             post ? "POST" : "GET", path, post);
    if (SSL_write(ssl, req, (int)strlen(req)) <= 0)
        goto out;
    for (size_t sent = 0; sent < post; sent += sizeof buf / 2) {
        memset(buf, 'x', sizeof buf / 2);
        if (SSL_write(ssl, buf, (int)(post - sent < sizeof buf / 2 ? post - sent : sizeof buf / 2)) <= 0)
            goto out;
    }
    while (got < sizeof buf - 1 && (n = SSL_read(ssl, buf + got, (int)(sizeof buf - 1 - got))) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        status = -1;
    if (body && bodylen) {
        const char *b = strstr(buf, "\r\n\r\n");
        snprintf(body, bodylen, "%s", b ? b + 4 : "");
    }
out:
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    if (fd >= 0)
        close(fd);
    return status;
}

typedef struct client {
    pthread_t t;
    int port, status;
    size_t post;
    char path[32], body[64];
} client;

static void *client_run(void *arg)
{
    client *c = arg;

    c->status = request(c->port, c->path, c->post, c->body, sizeof c->body);
    return NULL;
}

/* The next request, waiting for the server's notify (at most 10 s). */
static tlsserve_req *next(tlsserve *s)
{
    for (int i = 0; i < 100; i++) {
        struct pollfd p = {.fd = wake[0], .events = POLLIN};
        tlsserve_req *r = tlsserve_next(s);
        char drop[64];
        if (r)
            return r;
        if (poll(&p, 1, 100) > 0 && read(wake[0], drop, sizeof drop) < 0)
            perror("read");
    }
    return NULL;
}

#define N 16

int main(void)
{
    tlsserve_opts o = {.name = "test", .address = "127.0.0.1:0", .notify = notify};
    client cs[N];
    tlsserve_req *held[N];
    char err[512], serial[96], addr[32];
    tlsserve *s, *again;
    int ok = 1, port, fd;

    if (pipe(wake) != 0)
        return 1;
    s = tlsserve_start(&o, err, sizeof err);
    TAP_OK(s != NULL, "a server starts with a self-signed certificate when given no files");
    if (s == NULL) {
        printf("# %s\n", err);
        return tap_done();
    }
    port = tlsserve_port(s);
    tlsserve_serial(s, serial, sizeof serial);
    TAP_OK(port > 0 && strlen(serial) >= 16 && strspn(serial, "0123456789abcdef") == strlen(serial),
           "it says the port it got and the certificate's serial, in lowercase hex");

    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    o.address = addr;
    again = tlsserve_start(&o, err, sizeof err);
    TAP_OK(again == NULL && strstr(err, "cannot listen on") != NULL, "a second server on its port is refused, saying why");
    tlsserve_stop(again);
    o.address = "127.0.0.1:0";
    o.cert = "/nonexistent/tls.crt";
    o.key = "/nonexistent/tls.key";
    again = tlsserve_start(&o, err, sizeof err);
    TAP_OK(again == NULL && strstr(err, "/nonexistent/tls.crt") != NULL, "a certificate that does not read is refused, naming it");
    o.cert = o.key = NULL;

    /* N clients at once; this thread answers each with its path */
    for (int i = 0; i < N; i++) {
        cs[i] = (client){.port = port};
        snprintf(cs[i].path, sizeof cs[i].path, "/r%d", i);
        pthread_create(&cs[i].t, NULL, client_run, &cs[i]);
    }
    for (int i = 0; i < N; i++) {
        tlsserve_req *r = next(s);
        const tlsserve_info *info = r ? tlsserve_req_info(r) : NULL;
        if (r && tlsserve_reply_rendered(r, 200, NULL) != 0)
            ok = 0; /* no render: nothing to render with */
        if (r == NULL || strcmp(info->method, "GET") != 0 || tlsserve_reply(r, 200, "text/plain", info->path,
                                                                            strlen(info->path)) != 1)
            ok = 0;
        if (r && tlsserve_reply(r, 200, "text/plain", "twice", 5) != 0)
            ok = 0; /* answered once only */
        tlsserve_release(r);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(cs[i].t, NULL);
        if (cs[i].status != 200 || strcmp(cs[i].body, cs[i].path) != 0)
            ok = 0;
    }
    TAP_OK(ok, "16 requests at once each reach the loop and get their own reply, once (none rendered: no render)");

    /* N requests held by the loop when the server stops */
    ok = 1;
    for (int i = 0; i < N; i++) {
        cs[i] = (client){.port = port};
        snprintf(cs[i].path, sizeof cs[i].path, "/held%d", i);
        pthread_create(&cs[i].t, NULL, client_run, &cs[i]);
    }
    for (int i = 0; i < N; i++)
        if ((held[i] = next(s)) == NULL)
            ok = 0;
    TAP_OK(ok, "16 more requests reach the loop, which holds them");
    tlsserve_stop(s);
    ok = 1;
    for (int i = 0; i < N; i++) {
        pthread_join(cs[i].t, NULL);
        if (cs[i].status != -1)
            ok = 0;
    }
    TAP_OK(ok, "stopping the server closes their connections: no client gets an answer");
    ok = 1;
    for (int i = 0; i < N; i++) {
        if (held[i] && (tlsserve_reply(held[i], 200, NULL, "late", 4) != 0 ||
                        strncmp(tlsserve_req_info(held[i])->path, "/held", 5) != 0))
            ok = 0;
        tlsserve_release(held[i]);
    }
    TAP_OK(ok, "the held requests stay readable after the stop, their replies refused, then released");

    /* at most max_held bytes of bodies held: over it, 503 until released */
    o.max_held = 1000;
    s = tlsserve_start(&o, err, sizeof err);
    port = s ? tlsserve_port(s) : 0;
    cs[0] = (client){.port = port, .post = 600, .path = "/a"};
    pthread_create(&cs[0].t, NULL, client_run, &cs[0]);
    held[0] = next(s);
    cs[1] = (client){.port = port, .post = 600, .path = "/b"};
    client_run(&cs[1]);
    ok = held[0] != NULL && tlsserve_req_info(held[0])->body_len == 600 && cs[1].status == 503;
    tlsserve_reply(held[0], 200, NULL, "a", 1);
    tlsserve_release(held[0]);
    pthread_join(cs[0].t, NULL);
    cs[1] = (client){.port = port, .post = 600, .path = "/c"};
    pthread_create(&cs[1].t, NULL, client_run, &cs[1]);
    held[1] = next(s);
    tlsserve_reply(held[1], 200, NULL, "c", 1);
    tlsserve_release(held[1]);
    pthread_join(cs[1].t, NULL);
    TAP_OK(ok && cs[0].status == 200 && cs[1].status == 200,
           "bodies held past max_held bytes are refused 503, and served again once released");
    tlsserve_stop(s);
    o.max_held = 0;

    /* plain HTTP: Go's raw 400 */
    s = tlsserve_start(&o, err, sizeof err);
    port = s ? tlsserve_port(s) : 0;
    fd = connect_to(port);
    {
        char buf[256] = "";
        ssize_t n;
        size_t got = 0;
        if (fd >= 0 && write(fd, "GET / HTTP/1.1\r\nHost: t\r\n\r\n", 27) == 27)
            while (got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
                got += (size_t)n;
        buf[got] = '\0';
        TAP_OK(strncmp(buf, "HTTP/1.0 400 Bad Request\r\n", 26) == 0 &&
                   strstr(buf, "Client sent an HTTP request to an HTTPS server.") != NULL,
               "plain HTTP on its port gets Go's raw 400");
    }
    if (fd >= 0)
        close(fd);
    tlsserve_stop(s);
    close(wake[0]);
    close(wake[1]);
    return tap_done();
}
