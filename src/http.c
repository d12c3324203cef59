/* http.c - HTTP requests on the event loop (see http.h). */

#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "dbuf.h"
#include "list.h"
#include "str.h"

typedef enum http_state { HTTP_QUEUED, HTTP_RUNNING, HTTP_WAITING, HTTP_DONE } http_state;

struct http_request {
    http_client *c;
    http_state state;
    CURL *easy;
    struct curl_slist *headers;
    uv_timer_t retry_timer;
    http_request *next;               /* in the rate limiter's queue */
    int unlimited;                    /* http_spec.unlimited */
    list_node link; /* in http_client.live: every request not yet freed */
    /* the request, copied */
    char *method, *url, *content_type, *accept, *body, *bearer, *username, *password;
    size_t body_len, body_sent; /* body_sent: what the read callback has handed curl */
    uint64_t deadline; /* loop ms that timeout_ms ends at, retries included; 0: none */
    int (*on_data)(const char *, size_t, void *);
    int (*may_send)(void *);
    int refused; /* may_send said no */
    int paused;  /* on_data asked for a pause: no body is read until http_resume */
    http_done_cb done;
    void *ud;
    /* the response */
    dbuf resp;
    char *resp_type;
    double retry_after; /* seconds; < 0 when absent */
    int retries;
    const char *fail; /* set when it could not start; reported from the loop */
    char errbuf[CURL_ERROR_SIZE];
};

static int http_prereq_cb(void *ud, char *primary_ip, char *local_ip, int primary_port, int local_port);
static size_t http_read_cb(char *buf, size_t size, size_t nitems, void *ud);
static int http_seek_cb(void *ud, curl_off_t offset, int origin);

typedef struct http_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    http_client *c;
} http_sock;

struct http_client {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;    /* curl's timeout */
    uv_timer_t rl_timer; /* the rate limiter's refill */
    double qps, tokens;
    int burst;
    uint64_t last_refill; /* uv_now, ms */
    http_request *queue, *queue_tail;
    list_node *live; /* http_request.link */
    unsigned long started;
    int closing;
    int open_handles;
    /* TLS */
    char *ca_file, *cert_file, *key_file, *connect_to, *proxy;
    char *user_agent; /* NULL: "luaop" */
    struct curl_blob ca_blob, cert_blob, key_blob;
    int insecure;
    struct curl_slist *connect_to_list;
};

static int http_blob(struct curl_blob *b, const unsigned char *data, size_t len)
{
    b->data = NULL;
    b->len = 0;
    b->flags = CURL_BLOB_NOCOPY;
    if (data == NULL)
        return 0;
    b->data = malloc(len ? len : 1);
    if (b->data == NULL)
        return -1;
    memcpy(b->data, data, len);
    b->len = len;
    return 0;
}

static void http_client_free(http_client *c)
{
    curl_slist_free_all(c->connect_to_list);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->connect_to);
    free(c->proxy);
    free(c->user_agent);
    free(c->ca_blob.data);
    if (c->key_blob.data)
        memset(c->key_blob.data, 0, c->key_blob.len);
    free(c->key_blob.data);
    free(c->cert_blob.data);
    free(c);
}

/* Every libuv handle of a client counts; the last one closed after
 * http_client_close frees the client. */
static void http_client_unref(http_client *c)
{
    if (--c->open_handles == 0 && c->closing)
        http_client_free(c);
}

/* ---- requests ----------------------------------------------------------- */

static void http_request_closed(uv_handle_t *h)
{
    http_request *r = h->data;
    http_client *c = r->c;

    if (r->easy)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    free(r->method);
    free(r->url);
    free(r->content_type);
    free(r->accept);
    free(r->body);
    str_free_secret(&r->bearer);
    free(r->username);
    str_free_secret(&r->password);
    dbuf_free(&r->resp);
    free(r->resp_type);
    free(r);
    http_client_unref(c);
}

static void http_request_free(http_request *r)
{
    http_client *c = r->c;

    r->state = HTTP_DONE;
    list_remove(&c->live, &r->link);
    uv_close((uv_handle_t *)&r->retry_timer, http_request_closed);
}

static size_t http_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    http_request *r = userdata;
    size_t n = size * nmemb;
    /* A streaming request hands over 2xx bodies as they come. */
    if (r->on_data) {
        long status = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            int rc = r->on_data(ptr, n, r->ud);
            if (rc == HTTP_DATA_PAUSE) {
                r->paused = 1;
                return CURL_WRITEFUNC_PAUSE;
            }
            return rc == 0 ? n : 0;
        }
    }
    if (dbuf_append(&r->resp, ptr, n) != 0)
        return 0;
    return n;
}

static size_t http_header_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
    http_request *r = userdata;
    size_t n = size * nitems;

    if (n > 12 && strncasecmp(buf, "retry-after:", 12) == 0) {
        char tmp[32];
        size_t len = n - 12 < sizeof tmp - 1 ? n - 12 : sizeof tmp - 1;
        memcpy(tmp, buf + 12, len);
        tmp[len] = '\0';
        char *end;
        double v = strtod(tmp, &end);
        if (end != tmp && v >= 0) {
            r->retry_after = v; /* seconds */
        } else {
            time_t when = curl_getdate(tmp, NULL); /* or an HTTP date */
            if (when != -1)
                r->retry_after = when > time(NULL) ? (double)(when - time(NULL)) : 0;
        }
    }
    return n;
}

static int http_header(http_request *r, const char *line)
{
    struct curl_slist *l = curl_slist_append(r->headers, line);

    if (l == NULL)
        return -1; /* r->headers is intact: freed with the request */
    r->headers = l;
    return 0;
}

static int http_setup(http_request *r)
{
    http_client *c = r->c;
    CURL *e = r->easy;
    char line[256];

    curl_easy_reset(e);
    curl_slist_free_all(r->headers);
    r->headers = NULL;
    dbuf_clear(&r->resp);
    r->retry_after = -1;
    r->errbuf[0] = '\0';

    curl_easy_setopt(e, CURLOPT_URL, r->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, http_write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, http_header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (r->may_send) {
        curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, http_prereq_cb);
        curl_easy_setopt(e, CURLOPT_PREREQDATA, r);
    }
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* Over TLS, ALPN tells at the handshake whether a connection can carry
     * more streams, so a request waits for that rather than opening another.
     * Plain HTTP is HTTP/1.1 here, which curl only learns from the first
     * answer's headers: waiting would hold every request behind a watch. */
    if (strncmp(r->url, "https://", 8) == 0)
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    /* Compressed answers, but not streams: from v1.37 the API server gzips
     * a watch when asked, and this libcurl cannot pause a transfer it is
     * decoding (the pause fails it as a write error, CURLE_WRITE_ERROR), so
     * every streamed sync and watch ended at once. */
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, r->on_data ? NULL : "");
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent ? c->user_agent : "luaop");
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
    if (strcmp(r->method, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    if (r->deadline) {
        /* what is left of the caller's timeout after earlier attempts */
        uint64_t now = uv_now(r->c->loop);
        long left = r->deadline > now ? (long)(r->deadline - now) : 1;
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, left);
    }
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);

    if (r->body) {
        /* Read, not POSTFIELDS: curl sends a body after the headers, in a
         * later turn of the loop, so may_send is asked again before it. */
        r->body_sent = 0;
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, http_read_cb);
        curl_easy_setopt(e, CURLOPT_READDATA, r);
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, http_seek_cb);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, r);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    }
    snprintf(line, sizeof line, "Accept: %s", r->accept ? r->accept : "application/json");
    if (http_header(r, line) != 0)
        return -1;
    if (r->content_type) {
        snprintf(line, sizeof line, "Content-Type: %s", r->content_type);
        if (http_header(r, line) != 0)
            return -1;
    }
    /* No "Expect: 100-continue" round trip before a body. */
    if (r->body && http_header(r, "Expect:") != 0)
        return -1;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);

    /* Credentials: curl sends them only to this request's host. */
    if (r->bearer) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(e, CURLOPT_XOAUTH2_BEARER, r->bearer);
    } else if (r->username) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(e, CURLOPT_USERNAME, r->username);
        curl_easy_setopt(e, CURLOPT_PASSWORD, r->password ? r->password : "");
    }

    if (c->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (c->ca_blob.data) {
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &c->ca_blob);
    } else if (c->ca_file) {
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
    }
    if (c->cert_blob.data) {
        curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &c->cert_blob);
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (c->cert_file) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file);
    }
    if (c->key_blob.data) {
        curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &c->key_blob);
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (c->key_file) {
        curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file);
    }
    if (c->connect_to_list)
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to_list);
    if (c->proxy)
        curl_easy_setopt(e, CURLOPT_PROXY, c->proxy);
    else
        curl_easy_setopt(e, CURLOPT_NOPROXY, "*"); /* proxies come from kubeconfig only */
    return 0;
}

static void http_fail_cb(uv_timer_t *t)
{
    http_request *r = t->data;
    http_response resp = {0, r->fail, "", 0, NULL, r->retries, 0, 0, 0};

    r->state = HTTP_DONE;
    r->done(&resp, r->ud);
    http_request_free(r);
}

static void http_timeout_cb(uv_timer_t *t);

/* Put a request just added on the wire now, not on the loop's next turn: a
 * task that asks for a page and then decodes the last one has the server
 * working meanwhile. Transfers this finishes are reported from the loop
 * (the timer below), never from inside http_submit. */
static void http_kick(http_client *c)
{
    int running;

    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    uv_timer_start(&c->timer, http_timeout_cb, 0, 0);
}

static void http_start(http_request *r)
{
    http_client *c = r->c;

    if (r->easy == NULL)
        r->easy = curl_easy_init();
    if (r->easy == NULL || http_setup(r) != 0 || curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) {
        /* Report it from the loop, never from inside http_submit. */
        r->fail = "could not start the request (out of memory)";
        r->state = HTTP_WAITING;
        uv_timer_start(&r->retry_timer, http_fail_cb, 0, 0);
        return;
    }
    r->state = HTTP_RUNNING;
    c->started++;
}

/* ---- rate limiting ------------------------------------------------------ */

static void http_refill(http_client *c)
{
    uint64_t now = uv_now(c->loop);

    c->tokens += (double)(now - c->last_refill) / 1000.0 * c->qps;
    if (c->tokens > c->burst)
        c->tokens = c->burst;
    c->last_refill = now;
}

static void http_rl_cb(uv_timer_t *t);

static void http_drain(http_client *c)
{
    int started = 0;

    http_refill(c);
    while (c->queue && c->tokens >= 1.0) {
        http_request *r = c->queue;
        c->queue = r->next;
        if (c->queue == NULL)
            c->queue_tail = NULL;
        c->tokens -= 1.0;
        http_start(r);
        started = 1;
    }
    if (started)
        http_kick(c);
    if (c->queue) {
        double ms = (1.0 - c->tokens) / c->qps * 1000.0;
        uint64_t wait = ms < 86400e3 ? (uint64_t)ms + 1 : 86400000;
        uv_timer_start(&c->rl_timer, http_rl_cb, wait, 0);
    }
}

static void http_rl_cb(uv_timer_t *t)
{
    http_drain(t->data);
}

static void http_enqueue(http_request *r)
{
    http_client *c = r->c;

    if (c->qps <= 0 || r->unlimited) {
        http_start(r);
        http_kick(c);
        return;
    }
    r->state = HTTP_QUEUED;
    r->next = NULL;
    if (c->queue_tail)
        c->queue_tail->next = r;
    else
        c->queue = r;
    c->queue_tail = r;
    http_drain(c);
}

/* ---- completion --------------------------------------------------------- */

static void http_retry_cb(uv_timer_t *t)
{
    http_request *r = t->data;

    http_enqueue(r);
}

/* Right before a request leaves (CURLOPT_PREREQFUNCTION): its may_send. */
static int http_prereq_cb(void *ud, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
    http_request *r = ud;

    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    if (r->may_send(r->ud))
        return CURL_PREREQFUNC_OK;
    r->refused = 1;
    return CURL_PREREQFUNC_ABORT;
}

/* The body's next bytes, each part only while may_send says yes */
static size_t http_read_cb(char *buf, size_t size, size_t nitems, void *ud)
{
    http_request *r = ud;
    size_t n = size * nitems, left = r->body_len - r->body_sent;

    if (left > 0 && r->may_send && !r->may_send(r->ud)) {
        r->refused = 1;
        return CURL_READFUNC_ABORT;
    }
    if (n > left)
        n = left;
    memcpy(buf, r->body + r->body_sent, n);
    r->body_sent += n;
    return n;
}

/* curl rewinding the body (a request sent again on a new connection) */
static int http_seek_cb(void *ud, curl_off_t offset, int origin)
{
    http_request *r = ud;

    if (origin != SEEK_SET || offset < 0 || (curl_off_t)r->body_len < offset)
        return CURL_SEEKFUNC_FAIL;
    r->body_sent = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

static void http_finish(http_request *r, CURLcode result)
{
    http_response resp = {0};
    long status = 0;
    char *ct = NULL;

    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    /* 429, or a 5xx that says when to come back: wait, then try again,
     * unless the caller's timeout ends first (then this answer is it). A
     * stream too (a watch): only 2xx bodies stream, so nothing of this
     * answer reached its caller. */
    double wait = r->retry_after >= 0 ? r->retry_after : 1.0;
    if (wait > 60)
        wait = 60;
    if (result == CURLE_OK && r->retries < HTTP_MAX_RETRIES &&
        (status == 429 || (status >= 500 && r->retry_after >= 0)) &&
        (r->deadline == 0 || uv_now(r->c->loop) + (uint64_t)(wait * 1000.0) < r->deadline)) {
        r->retries++;
        r->state = HTTP_WAITING;
        uv_timer_start(&r->retry_timer, http_retry_cb, (uint64_t)(wait * 1000.0), 0);
        return;
    }
    curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct);
    if (ct)
        r->resp_type = strdup(ct);
    resp.status = result == CURLE_OK ? status : 0;
    if (result != CURLE_OK)
        resp.error = r->errbuf[0] ? r->errbuf : curl_easy_strerror(result);
    resp.refused = r->refused;
    resp.body = r->resp.data ? r->resp.data : "";
    resp.body_len = r->resp.len;
    resp.content_type = r->resp_type;
    resp.retries = r->retries;
    long version = 0;
    curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &version);
    resp.http_version = version == CURL_HTTP_VERSION_2_0 ? 2 : version ? 1 : 0;
    long connects = 0;
    curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &connects);
    resp.new_connection = connects > 0;
    r->state = HTTP_DONE;
    r->done(&resp, r->ud);
    http_request_free(r);
}

static void http_check_done(http_client *c)
{
    CURLMsg *msg;
    int pending;

    while ((msg = curl_multi_info_read(c->multi, &pending))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        http_request *r;
        CURL *e = msg->easy_handle;
        CURLcode result = msg->data.result;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
        curl_multi_remove_handle(c->multi, e);
        http_finish(r, result);
    }
}

/* ---- libuv glue (curl's docs/examples/multi-uv.c) ----------------------- */

static void http_sock_closed(uv_handle_t *h)
{
    http_sock *s = h->data;
    http_client *c = s->c;

    free(s);
    http_client_unref(c);
}

static void http_poll_cb(uv_poll_t *p, int status, int events)
{
    http_sock *s = p->data;
    http_client *c = s->c;
    int flags = 0, running;

    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (!status && (events & UV_READABLE))
        flags |= CURL_CSELECT_IN;
    if (!status && (events & UV_WRITABLE))
        flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(c->multi, s->fd, flags, &running);
    http_check_done(c);
}

static int http_socket_cb(CURL *e, curl_socket_t fd, int action, void *userp, void *socketp)
{
    http_client *c = userp;
    http_sock *s = socketp;
    int events = 0;

    (void)e;
    if (action == CURL_POLL_REMOVE) {
        if (s) {
            uv_poll_stop(&s->poll);
            uv_close((uv_handle_t *)&s->poll, http_sock_closed);
            curl_multi_assign(c->multi, fd, NULL);
        }
        return 0;
    }
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        if (s == NULL || uv_poll_init_socket(c->loop, &s->poll, fd) != 0) {
            free(s);
            return -1;
        }
        s->fd = fd;
        s->c = c;
        s->poll.data = s;
        c->open_handles++;
        curl_multi_assign(c->multi, fd, s);
    }
    if (action != CURL_POLL_IN)
        events |= UV_WRITABLE;
    if (action != CURL_POLL_OUT)
        events |= UV_READABLE;
    uv_poll_start(&s->poll, events, http_poll_cb);
    return 0;
}

static void http_timeout_cb(uv_timer_t *t)
{
    http_client *c = t->data;
    int running;

    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    http_check_done(c);
}

static int http_timer_cb(CURLM *m, long timeout_ms, void *userp)
{
    http_client *c = userp;

    (void)m;
    if (timeout_ms < 0)
        uv_timer_stop(&c->timer);
    else
        uv_timer_start(&c->timer, http_timeout_cb, (uint64_t)timeout_ms, 0); /* 0: on the next loop iteration */
    return 0;
}

/* ---- the client ---------------------------------------------------------- */

http_client *http_client_new(uv_loop_t *loop, const http_tls *tls, double qps, int burst)
{
    static int global_init;
    http_client *c;

    if (!global_init) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return NULL;
        global_init = 1;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->loop = loop;
    c->qps = qps;
    c->burst = burst > 0 ? burst : 1;
    c->tokens = c->burst;
    c->last_refill = uv_now(loop);
    if (tls) {
        c->insecure = tls->insecure;
        c->ca_file = str_dup(tls->ca_file);
        c->cert_file = str_dup(tls->cert_file);
        c->key_file = str_dup(tls->key_file);
        c->connect_to = str_dup(tls->connect_to);
        c->proxy = str_dup(tls->proxy);
        if (http_blob(&c->ca_blob, tls->ca_data, tls->ca_len) || http_blob(&c->cert_blob, tls->cert_data, tls->cert_len) ||
            http_blob(&c->key_blob, tls->key_data, tls->key_len))
            goto err;
        if (c->connect_to && (c->connect_to_list = curl_slist_append(NULL, c->connect_to)) == NULL)
            goto err;
    }
    c->multi = curl_multi_init();
    if (c->multi == NULL)
        goto err;
    uv_timer_init(loop, &c->timer);
    uv_timer_init(loop, &c->rl_timer);
    c->timer.data = c;
    c->rl_timer.data = c;
    c->open_handles = 2;
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, http_socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, http_timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* Over TLS (where HTTP/2 is negotiated), streams beyond what a
     * connection allows wait for one to free up rather than each opening
     * (and TLS-handshaking) a connection of its own; a few connections leave
     * room for watches. Plain HTTP is HTTP/1.1, one request a connection:
     * no cap there, or long watches would starve everything else. */
    if (tls && tls->limit_connections)
        curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)HTTP_MAX_HOST_CONNECTIONS);
    return c;
err:
    if (c->multi) {
        curl_multi_cleanup(c->multi);
        c->multi = NULL;
    }
    http_client_close(c);
    return NULL;
}

http_request *http_submit(http_client *c, const http_spec *s, http_done_cb done, void *ud)
{
    http_request *r;

    if (c->closing)
        return NULL;
    r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->c = c;
    r->done = done;
    r->ud = ud;
    r->on_data = s->on_data;
    r->may_send = s->may_send;
    r->unlimited = s->unlimited;
    r->deadline = s->timeout_ms > 0 ? uv_now(c->loop) + (uint64_t)s->timeout_ms : 0;
    r->retry_after = -1;
    r->method = str_dup(s->method ? s->method : "GET");
    r->url = str_dup(s->url);
    r->content_type = str_dup(s->content_type);
    r->accept = str_dup(s->accept);
    r->bearer = str_dup(s->bearer);
    r->username = str_dup(s->username);
    r->password = str_dup(s->password);
    if (s->body) {
        r->body = str_ndup(s->body, s->body_len);
        if (r->body)
            r->body_len = s->body_len;
    }
    uv_timer_init(c->loop, &r->retry_timer);
    r->retry_timer.data = r;
    c->open_handles++;
    list_push(&c->live, &r->link);
    if (!r->method || !r->url || (s->body && !r->body) || (s->bearer && !r->bearer) ||
        (s->content_type && !r->content_type) || (s->accept && !r->accept) ||
        (s->username && !r->username) || (s->password && !r->password)) {
        http_request_free(r);
        return NULL;
    }
    http_enqueue(r);
    return r;
}

void http_cancel(http_request *r)
{
    http_client *c = r->c;

    switch (r->state) {
    case HTTP_RUNNING:
        curl_multi_remove_handle(c->multi, r->easy);
        break;
    case HTTP_QUEUED:
        for (http_request **p = &c->queue; *p; p = &(*p)->next) {
            if (*p == r) {
                *p = r->next;
                break;
            }
        }
        c->queue_tail = NULL;
        for (http_request *q = c->queue; q; q = q->next)
            c->queue_tail = q;
        break;
    case HTTP_WAITING:
        uv_timer_stop(&r->retry_timer);
        break;
    case HTTP_DONE:
        return;
    }
    http_request_free(r);
}

void http_resume(http_request *r)
{
    if (r->state != HTTP_RUNNING || !r->paused)
        return;
    r->paused = 0;
    curl_easy_pause(r->easy, CURLPAUSE_CONT); /* may deliver the held chunk at once */
}

unsigned long http_requests_total(const http_client *c)
{
    return c->started;
}

static void http_client_timer_closed(uv_handle_t *h)
{
    http_client_unref(h->data);
}

int http_client_set_user_agent(http_client *c, const char *ua)
{
    char *p = strdup(ua);

    if (p == NULL)
        return -1;
    free(c->user_agent);
    c->user_agent = p;
    return 0;
}

void http_client_close(http_client *c)
{
    if (c == NULL || c->closing)
        return;
    c->closing = 1;
    if (c->multi == NULL) { /* never fully made: no handles yet */
        http_client_free(c);
        return;
    }
    /* Requests still around are cancelled; each frees itself. */
    while (c->live)
        http_cancel(list_entry(c->live, http_request, link));
    /* Closing cached connections may call http_socket_cb: do it while the
     * client and its loop are alive. */
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    uv_close((uv_handle_t *)&c->timer, http_client_timer_closed);
    uv_close((uv_handle_t *)&c->rl_timer, http_client_timer_closed);
}
