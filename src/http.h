/* http.h - HTTP requests on the event loop: libcurl's multi interface driven
 * by libuv (socket and timer callbacks, as curl's docs/examples/multi-uv.c).
 *
 * Keep-alive and HTTP/2 multiplexing over shared connections, gzip, TLS
 * verified unless told otherwise, a token-bucket rate limit (qps/burst) in
 * front of every request, 429 and 5xx-with-Retry-After retried after the
 * server's delay (at most HTTP_MAX_RETRIES times), a timeout per request.
 * Redirects are never followed, so credentials never cross to another host.
 * Credentials are never logged. */
#ifndef LUAOP_HTTP_H
#define LUAOP_HTTP_H

#include <stddef.h>

#include <uv.h>

#define HTTP_MAX_RETRIES 10
#define HTTP_MAX_HOST_CONNECTIONS 8

typedef struct http_client http_client;
typedef struct http_request http_request;

/* TLS and proxy settings for every request of a client. Blobs and paths are
 * copied. */
typedef struct http_tls {
    const char *ca_file;
    const unsigned char *ca_data;
    size_t ca_len;
    const char *cert_file;
    const unsigned char *cert_data;
    size_t cert_len;
    const char *key_file;
    const unsigned char *key_data;
    size_t key_len;
    int insecure;           /* skip verification (kubeconfig said so) */
    const char *connect_to; /* curl CONNECT_TO entry, for tls-server-name */
    const char *proxy;
    int limit_connections; /* at most HTTP_MAX_HOST_CONNECTIONS per host */
} http_tls;

typedef struct http_spec {
    const char *method; /* GET, POST, PUT, PATCH, DELETE */
    const char *url;
    const char *content_type; /* for a body */
    const char *accept;       /* NULL: application/json */
    const char *body;
    size_t body_len;
    const char *bearer; /* Authorization: Bearer ... */
    const char *username, *password;
    long timeout_ms; /* 0: none */
    /* Streaming (watch): called with each chunk as it arrives; the final
     * callback then gets only what was not delivered. Return 0 to go on,
     * HTTP_DATA_PAUSE to take none of this chunk and read no more until
     * http_resume (the same chunk comes again then: backpressure), anything
     * else to abort the transfer. */
    int (*on_data)(const char *data, size_t len, void *ud);
    /* Asked (with the request's ud) the moment before the request leaves,
     * after its connection is ready, at each try, and again before each
     * part of its body (which curl sends after the headers, in a later
     * turn of the loop): non-zero sends it, 0 stops it (a body cut short:
     * the server stores nothing), and it fails with http_response.refused
     * set. NULL: always sent. */
    int (*may_send)(void *ud);
    /* Not held behind the client's rate limiter (the Leases of leader
     * election and of a shard ring: client-go's election has a client of
     * its own for it), so that its renewals are never late for the work
     * queued behind the limit. */
    int unlimited;
} http_spec;

typedef struct http_response {
    long status;        /* 0 when no HTTP response came */
    const char *error;  /* transport error (connect, TLS, timeout), or NULL */
    const char *body;   /* NUL-terminated */
    size_t body_len;
    const char *content_type;
    int retries; /* how often 429/5xx made it wait and retry */
    int http_version; /* 1 (HTTP/1.x) or 2; 0 when no response came */
    int new_connection; /* it opened a connection rather than reusing one */
    int refused; /* may_send said no: nothing, or no whole request, was sent */
} http_response;

typedef void (*http_done_cb)(const http_response *r, void *ud);

/* qps <= 0 disables rate limiting. NULL on failure. */
http_client *http_client_new(uv_loop_t *loop, const http_tls *tls, double qps, int burst);

/* Start a request; `done` runs once, on the loop, unless cancelled. NULL if
 * it could not be started (out of memory). */
http_request *http_submit(http_client *c, const http_spec *s, http_done_cb done, void *ud);

/* Stop a request; its callback will not run. */
void http_cancel(http_request *r);

/* on_data's answer that pauses a streaming request (see http_spec). */
#define HTTP_DATA_PAUSE 2

/* Read a paused streaming request's body again (nothing when it is not
 * paused). on_data may run before this returns. */
void http_resume(http_request *r);

/* Requests started (including retries) per method and status code class are
 * counted; this is the total. */
unsigned long http_requests_total(const http_client *c);

/* Cancel everything and free the client once its handles are closed. */
/* The User-Agent header of the requests started from now on (copied);
 * "luaop" until set. 0, or -1 when out of memory. */
int http_client_set_user_agent(http_client *c, const char *ua);

void http_client_close(http_client *c);

#endif
