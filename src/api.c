/* api.c - requests to one API server (see api.h). */

#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "auth.h"
#include "log.h"
#include "metrics.h"
#include "shard.h"
#include "str.h"

struct api {
    uv_loop_t *loop;
    const log_sink *log;
    struct metrics *metrics; /* rest_client_requests_total, when set */
    char host[256];          /* the server's host[:port], its label */
    /* fencing (api_fence): writes leave only before write_until, but the
     * election's own (api_spec.lease) */
    int fenced;
    uint64_t write_until; /* uv_hrtime */
    char *lease_path;     /* /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME */
    /* sharding (api_shard_fence): a write made for a key (api_spec.shard)
     * leaves only while the key's hash is in held */
    int sharded;
    shard_set held;
    http_client *http;
    auth *auth;
    char *server; /* without a trailing slash */
    char *namespace;
    char *username, *password;
    list_node *live; /* calls not yet done or cancelled (api_call.link) */
};

struct api_call {
    api *a;
    http_request *req; /* while the request is in flight */
    int cancelled;
    unsigned generation; /* of the credential the request went with */
    list_node link; /* in api.live */
    int (*on_data)(const char *, size_t, void *);
    char *method, *path, *content_type, *accept, *body;
    size_t body_len;
    long timeout_ms;
    int lease; /* api_spec.lease: the election's own request */
    int keyed; /* api_spec.keyed: made for a key whose hash is shard */
    uint64_t shard;
    const char *refusal; /* why api_may_send held it back */
    int refreshed;
    uint64_t started; /* uv_hrtime */
    http_done_cb done;
    void *ud;
    uv_idle_t defer; /* reports a failure to start from the loop */
    int deferred;
    char *fail;
};

api *api_new(uv_loop_t *loop, const kubeconfig *kc, double qps, int burst, const log_sink *log, char *err,
             size_t errlen)
{
    api *a = calloc(1, sizeof *a);
    http_tls tls = {0};
    char *connect_to = NULL;
    size_t n;

    if (a == NULL)
        goto oom;
    a->loop = loop;
    a->log = log;
    a->server = str_dup(kc->server);
    a->namespace = str_dup(kc->namespace);
    a->username = str_dup(kc->username);
    a->password = str_dup(kc->password);
    if (!a->server || !a->namespace)
        goto oom;
    n = strlen(a->server);
    while (n > 0 && a->server[n - 1] == '/')
        a->server[--n] = '\0';

    tls.ca_file = kc->ca_file;
    tls.ca_data = kc->ca_data.data;
    tls.ca_len = kc->ca_data.len;
    tls.cert_file = kc->cert_file;
    tls.cert_data = kc->cert_data.data;
    tls.cert_len = kc->cert_data.len;
    tls.key_file = kc->key_file;
    tls.key_data = kc->key_data.data;
    tls.key_len = kc->key_data.len;
    tls.insecure = kc->insecure;
    tls.proxy = kc->proxy_url;
    tls.limit_connections = strncmp(a->server, "https://", 8) == 0;
    if (kc->tls_server_name && kc->tls_server_name[0]) {
        /* Verify the certificate for tls-server-name while connecting to the
         * server's address: ask for that name, connect to the real host. */
        char host[256], rest[1024];
        int port = 443;
        const char *p = a->server + (strncmp(a->server, "https://", 8) == 0 ? 8 : 7);
        if (sscanf(p, "%255[^:/]:%d", host, &port) < 1) {
            char shown[512];
            snprintf(err, errlen, "cannot parse the server URL %s",
                     str_redact_url(a->server, shown, sizeof shown));
            goto fail;
        }
        const char *path = strchr(p, '/');
        snprintf(rest, sizeof rest, "%s", path ? path : "");
        n = strlen(kc->tls_server_name) + strlen(host) + 64;
        connect_to = malloc(n);
        char *server = malloc(n + strlen(rest));
        if (!connect_to || !server) {
            free(server);
            goto oom;
        }
        snprintf(connect_to, n, "%s:%d:%s:%d", kc->tls_server_name, port, host, port);
        snprintf(server, n + strlen(rest), "https://%s:%d%s", kc->tls_server_name, port, rest);
        free(a->server);
        a->server = server;
        tls.connect_to = connect_to;
    }
    a->http = http_client_new(loop, &tls, qps, burst);
    free(connect_to);
    connect_to = NULL;
    if (a->http == NULL)
        goto oom;
    a->auth = auth_new(loop, kc, log);
    if (a->auth == NULL)
        goto oom;
    return a;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    free(connect_to);
    api_free(a);
    return NULL;
}

static void api_call_free(api_call *c)
{
    /* A cancelled call left the live list already, and its api may be gone. */
    if (!c->cancelled)
        list_remove(&c->a->live, &c->link);
    free(c->method);
    free(c->path);
    free(c->content_type);
    free(c->accept);
    free(c->body);
    free(c->fail);
    free(c);
}

static void api_defer_closed(uv_handle_t *h)
{
    api_call_free(h->data);
}

static void api_defer_cb(uv_idle_t *h)
{
    api_call *c = h->data;
    http_response r = {0};

    uv_idle_stop(h);
    r.error = c->fail ? c->fail : "out of memory";
    r.body = "";
    c->done(&r, c->ud);
    uv_close((uv_handle_t *)h, api_defer_closed);
}

/* Report a failure from the loop, never from inside api_request. */
static void api_fail(api_call *c, const char *msg)
{
    c->deferred = 1;
    c->fail = strdup(msg ? msg : "failed");
    uv_idle_init(c->a->loop, &c->defer);
    c->defer.data = c;
    uv_idle_start(&c->defer, api_defer_cb);
}

static void api_send(api_call *c);

/* rest_client_requests_total{code, method, host}, as client-go counts a
 * request: by its status, "<error>" when there was none. */
static void api_count(api *a, const char *method, long status)
{
    char code[24], err[64];
    const char *values[3] = {code, method, a->host};
    metrics_series *s;

    if (a->metrics == NULL)
        return;
    if (status > 0)
        snprintf(code, sizeof code, "%ld", status);
    else
        snprintf(code, sizeof code, "<error>");
    s = metrics_get(a->metrics, NULL, "rest_client_requests_total", values, 3, err, sizeof err);
    if (s) {
        metrics_add(a->metrics, s, 1);
        metrics_release(a->metrics, s);
    }
}

/* luaop_rest_client_retries_total{method}: the 429s and 5xx with
 * Retry-After that http.c waited out and sent again. */
static void api_count_retries(api *a, const char *method, int retries)
{
    char err[64];
    metrics_series *s;

    if (a->metrics == NULL || retries <= 0)
        return;
    s = metrics_get(a->metrics, NULL, "luaop_rest_client_retries_total", &method, 1, err, sizeof err);
    if (s) {
        metrics_add(a->metrics, s, retries);
        metrics_release(a->metrics, s);
    }
}

void api_set_metrics(api *a, struct metrics *m)
{
    const char *p = strstr(a->server, "://");
    size_t n;

    a->metrics = m;
    p = p ? p + 3 : a->server;
    n = strcspn(p, "/");
    snprintf(a->host, sizeof a->host, "%.*s", (int)(n < sizeof a->host ? n : sizeof a->host - 1), p);
}

int api_set_user_agent(api *a, const char *ua)
{
    return http_client_set_user_agent(a->http, ua);
}

int api_fence(api *a, const char *lease_path)
{
    char *p = str_dup(lease_path);

    if (p == NULL)
        return -1;
    free(a->lease_path);
    a->lease_path = p;
    a->fenced = 1;
    a->write_until = 0;
    return 0;
}

void api_fence_until(api *a, uint64_t until)
{
    a->write_until = until;
}

int api_shard_fence(api *a, const shard_range *r, size_t n)
{
    if (shard_set_assign(&a->held, r, n) != 0)
        return -1;
    a->sharded = 1;
    return 0;
}

/* Whether call c is one of the election's own writes: made as one
 * (api_spec.lease, which only the holder of api.fence's key can set), and
 * a PUT of the lease (its query aside) or a POST to its collection. The
 * mark decides; the path only narrows what a marked request may be. */
static int api_is_election(const api *a, const api_call *c)
{
    size_t n = strcspn(c->path, "?"), ln;
    const char *slash;

    if (!c->lease || a->lease_path == NULL)
        return 0;
    ln = strlen(a->lease_path);
    slash = strrchr(a->lease_path, '/');
    if (strcmp(c->method, "PUT") == 0)
        return n == ln && strncmp(c->path, a->lease_path, n) == 0;
    return strcmp(c->method, "POST") == 0 && slash && n == (size_t)(slash - a->lease_path) &&
           strncmp(c->path, a->lease_path, n) == 0;
}

/* Whether a request is a POST of a review: TokenReview, SubjectAccessReview
 * and the rest of authentication.k8s.io's and authorization.k8s.io's
 * create-only kinds, which the API server answers and keeps nothing of, so
 * that no state changes (a standby answers its secure /metrics' callers
 * with them: luaop.reviews). The path decides, its query aside; a
 * namespace only for localsubjectaccessreviews. */
static int api_is_review(const api_call *c)
{
    static const char *const reviews[] = {
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
    };
    static const char ns_prefix[] = "/apis/authorization.k8s.io/v1/namespaces/";
    static const char local[] = "/localsubjectaccessreviews";
    size_t n = strcspn(c->path, "?"), i;
    const char *name;

    if (strcmp(c->method, "POST") != 0)
        return 0;
    for (i = 0; i < sizeof reviews / sizeof reviews[0]; i++)
        if (n == strlen(reviews[i]) && strncmp(c->path, reviews[i], n) == 0)
            return 1;
    if (n <= sizeof ns_prefix - 1 + sizeof local - 1 || strncmp(c->path, ns_prefix, sizeof ns_prefix - 1) != 0)
        return 0;
    name = c->path + sizeof ns_prefix - 1; /* NS/localsubjectaccessreviews: one segment, then the kind */
    return strncmp(c->path + n - (sizeof local - 1), local, sizeof local - 1) == 0 &&
           memchr(name, '/', (size_t)(c->path + n - (sizeof local - 1) - name)) == NULL;
}

/* http's may_send: checked the moment before a request leaves. */
static int api_may_send(void *ud)
{
    api_call *c = ud;
    api *a = c->a;

    if (!a->fenced || strcmp(c->method, "GET") == 0 || strcmp(c->method, "HEAD") == 0)
        return 1;
    if (api_is_election(a, c) || api_is_review(c))
        return 1;
    if (uv_hrtime() >= a->write_until) {
        c->refusal = a->sharded ? "not sent: this replica's shard ring lease has lapsed (fenced), so no write leaves it"
                                : "not sent: this process does not hold the leader election lease (fenced), so no "
                                  "write leaves it";
        return 0;
    }
    if (a->sharded && c->keyed && !shard_set_contains(&a->held, c->shard)) {
        c->refusal = "not sent: this replica does not hold the shard of the reconcile's key (fenced), so no write "
                     "for that key leaves it";
        return 0;
    }
    return 1;
}

static void api_done(const http_response *r, void *ud)
{
    api_call *c = ud;
    http_response fenced;

    c->req = NULL;
    if (r->refused) {
        fenced = *r;
        fenced.status = 0;
        fenced.error = c->refusal ? c->refusal : "not sent (fenced)";
        r = &fenced;
    }
    api_count(c->a, c->method, r->status);
    api_count_retries(c->a, c->method, r->retries);
    if (r->status == 401 && !c->refreshed && auth_refreshable(c->a->auth)) {
        c->refreshed = 1;
        auth_invalidate(c->a->auth, c->generation);
        api_send(c);
        return;
    }
    if (log_sink_enabled(c->a->log, LOG_TRACE)) {
        /* Method, path, status and time: never headers or bodies. */
        double ms = (double)((uv_hrtime() - c->started) / 1000) / 1000.0; /* to the microsecond */
        log_field f[] = {
            {"method", LOG_STR, .v.str = {c->method, strlen(c->method)}},
            {"path", LOG_STR, .v.str = {c->path, strlen(c->path)}},
            {"status", LOG_INT, .v.i = r->status},
            {"ms", LOG_NUM, .v.d = ms},
            {"retries", LOG_INT, .v.i = r->retries},
            {"http", LOG_INT, .v.i = r->http_version},
            {"newConnection", LOG_BOOL, .v.b = r->new_connection},
        };
        log_sink_write(c->a->log, LOG_TRACE, "client", r->error ? r->error : "response", f, 7);
    }
    c->done(r, c->ud);
    api_call_free(c);
}

/* Streamed chunks go to the caller with the caller's ud. */
static int api_on_data(const char *data, size_t len, void *ud)
{
    api_call *c = ud;

    return c->on_data(data, len, c->ud);
}

static void api_with_credential(const char *bearer, const char *err, void *ud)
{
    api_call *c = ud;
    api *a;
    http_spec s = {0};
    size_t n;
    char *url;

    if (c->cancelled) { /* cancelled (or shut down) while the credential came */
        api_call_free(c);
        return;
    }
    a = c->a;
    n = strlen(a->server) + strlen(c->path) + 1;
    if (err) {
        api_fail(c, err);
        return;
    }
    url = malloc(n);
    if (url == NULL) {
        api_fail(c, "out of memory");
        return;
    }
    snprintf(url, n, "%s%s", a->server, c->path);
    s.method = c->method;
    s.url = url;
    s.content_type = c->content_type;
    s.accept = c->accept;
    s.body = c->body;
    s.body_len = c->body_len;
    s.timeout_ms = c->timeout_ms;
    s.on_data = c->on_data ? api_on_data : NULL;
    s.may_send = api_may_send;
    s.unlimited = c->lease; /* the election's or the ring's own Lease requests */
    c->generation = auth_generation(a->auth);
    s.bearer = bearer;
    if (!bearer && a->username) {
        s.username = a->username;
        s.password = a->password;
    }
    c->req = http_submit(a->http, &s, api_done, c);
    if (c->req == NULL) {
        api_fail(c, "out of memory");
    } else if (c->on_data && log_sink_enabled(a->log, LOG_TRACE)) {
        /* a stream's "response" line comes when it ends, minutes later:
         * its start too (method and path only, as there) */
        log_field f[] = {
            {"method", LOG_STR, .v.str = {c->method, strlen(c->method)}},
            {"path", LOG_STR, .v.str = {c->path, strlen(c->path)}},
        };
        log_sink_write(a->log, LOG_TRACE, "client", "stream started", f, 2);
    }
    free(url);
}

static void api_send(api_call *c)
{
    auth_get(c->a->auth, api_with_credential, c);
}

void api_cancel(api_call *c)
{
    if (c->cancelled)
        return;
    c->cancelled = 1;
    /* Off the live list now; freed below, or when its credential comes. */
    list_remove(&c->a->live, &c->link);
    if (c->req) {
        http_cancel(c->req);
        api_call_free(c);
    } else if (c->deferred) {
        uv_idle_stop(&c->defer);
        uv_close((uv_handle_t *)&c->defer, api_defer_closed);
    }
    /* else waiting for a credential: freed when it comes */
}

void api_resume(api_call *c)
{
    if (!c->cancelled && c->req)
        http_resume(c->req);
}

api_call *api_request(api *a, const api_spec *s, http_done_cb done, void *ud)
{
    api_call *c = calloc(1, sizeof *c);

    if (c == NULL)
        return NULL;
    c->a = a;
    c->done = done;
    c->ud = ud;
    c->started = uv_hrtime();
    c->method = str_dup(s->method ? s->method : "GET");
    c->path = str_dup(s->path);
    c->content_type = str_dup(s->content_type);
    c->accept = str_dup(s->accept);
    c->timeout_ms = s->timeout_ms;
    c->on_data = s->on_data;
    c->lease = s->lease != 0;
    c->keyed = s->keyed != 0;
    c->shard = s->shard;
    if (s->body) {
        c->body = str_ndup(s->body, s->body_len);
        c->body_len = s->body_len;
    }
    list_push(&a->live, &c->link);
    if (!c->method || !c->path || (s->body && !c->body)) {
        api_call_free(c);
        return NULL;
    }
    api_send(c);
    return c;
}

const char *api_server(const api *a)
{
    return a->server;
}

const char *api_namespace(const api *a)
{
    return a->namespace;
}

unsigned long api_requests_total(const api *a)
{
    return http_requests_total(a->http);
}

unsigned api_exec_runs(const api *a)
{
    return auth_exec_runs(a->auth);
}

void api_free(api *a)
{
    if (a == NULL)
        return;
    /* No callback runs after this: calls waiting for a credential are freed
     * when auth_free hands it (or its failure) over. */
    while (a->live)
        api_cancel(list_entry(a->live, api_call, link));
    http_client_close(a->http);
    auth_free(a->auth);
    free(a->server);
    free(a->lease_path);
    shard_set_clear(&a->held);
    free(a->namespace);
    free(a->username);
    str_free_secret(&a->password);
    free(a);
}
