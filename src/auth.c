/* auth.c - bearer credentials for the API server, kept fresh (see auth.h). */

#include "auth.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbuf.h"
#include "log.h"
#include "str.h"
#include "ytree.h"

extern char **environ;

typedef struct auth_waiter {
    auth_cb cb;
    void *ud;
} auth_waiter;

struct auth {
    uv_loop_t *loop;
    const log_sink *log;
    char *token;       /* static, from the kubeconfig */
    char *token_file;
    char *current;     /* the token in use (from the file or the plugin) */
    time_t fetched;    /* when current was read (token file) */
    time_t expires;    /* plugin credential expiry; 0 none */
    int stale;         /* a 401 said current is no good */
    unsigned generation; /* bumped with each new credential */
    kubeconfig_exec *exec;
    /* a running plugin */
    int running;
    uv_process_t proc;
    uv_pipe_t out;
    dbuf output; /* what the plugin printed (a secret: wiped) */
    int64_t exit_status;
    int pipe_open, proc_open, exited;
    uv_timer_t timer; /* the plugin's deadline */
    int timer_open, ticks, timed_out;
    auth_waiter *waiters;
    size_t nwaiters, capwaiters;
    unsigned exec_runs;
    int freeing;
};

static kubeconfig_exec *auth_copy_exec(const kubeconfig_exec *e)
{
    kubeconfig_exec *c = calloc(1, sizeof *c);

    if (c == NULL)
        return NULL;
    c->api_version = str_dup(e->api_version);
    c->command = str_dup(e->command);
    c->interactive_mode = str_dup(e->interactive_mode);
    c->provide_cluster_info = e->provide_cluster_info;
    c->args = calloc(e->nargs + 1, sizeof *c->args);
    c->env = calloc(2 * e->nenv + 1, sizeof *c->env);
    if (c->args)
        for (size_t i = 0; i < e->nargs; i++, c->nargs++)
            c->args[i] = str_dup(e->args[i]);
    if (c->env)
        for (size_t i = 0; i < 2 * e->nenv; i += 2, c->nenv++) {
            c->env[i] = str_dup(e->env[i]);
            c->env[i + 1] = str_dup(e->env[i + 1]);
        }
    return c;
}

static void auth_free_exec(kubeconfig_exec *e)
{
    if (e == NULL)
        return;
    free(e->api_version);
    free(e->command);
    free(e->interactive_mode);
    for (size_t i = 0; i < e->nargs; i++)
        free(e->args[i]);
    for (size_t i = 0; i < 2 * e->nenv; i++)
        free(e->env[i]);
    free(e->args);
    free(e->env);
    free(e);
}

auth *auth_new(uv_loop_t *loop, const kubeconfig *kc, const log_sink *log)
{
    auth *a = calloc(1, sizeof *a);

    if (a == NULL)
        return NULL;
    a->loop = loop;
    a->log = log;
    a->token = str_dup(kc->token);
    a->token_file = str_dup(kc->token_file);
    if (kc->exec && (a->exec = auth_copy_exec(kc->exec)) == NULL) {
        auth_free(a);
        return NULL;
    }
    return a;
}

int auth_refreshable(const auth *a)
{
    return a->exec != NULL || (a->token == NULL && a->token_file != NULL);
}

unsigned auth_exec_runs(const auth *a)
{
    return a->exec_runs;
}

unsigned auth_generation(const auth *a)
{
    return a->generation;
}

void auth_invalidate(auth *a, unsigned generation)
{
    if (generation == a->generation)
        a->stale = 1;
}

/* ---- token file --------------------------------------------------------- */

static const char *auth_from_file(auth *a, char *err, size_t errlen)
{
    time_t now = time(NULL);
    dbuf b = {0};
    int e;

    if (a->current && !a->stale && now - a->fetched < AUTH_TOKEN_FILE_TTL)
        return a->current;
    e = dbuf_read_file(&b, a->token_file, AUTH_TOKEN_FILE_MAX);
    if (e == 0 && dbuf_reserve(&b, 0) != 0)
        e = ENOMEM;
    if (e != 0) {
        if (e == EFBIG)
            snprintf(err, errlen, "token file %s is larger than %d bytes", a->token_file, AUTH_TOKEN_FILE_MAX);
        else
            snprintf(err, errlen, "token file %s: %s", a->token_file, strerror(e));
        dbuf_free(&b);
        return NULL;
    }
    while (b.len > 0 && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r' || b.data[b.len - 1] == ' '))
        b.len--;
    b.data[b.len] = '\0';
    str_free_secret(&a->current);
    a->current = b.len ? strdup(b.data) : NULL;
    memset(b.data, 0, b.cap); /* a secret */
    dbuf_free(&b);
    if (a->current == NULL) {
        snprintf(err, errlen, "token file %s is empty", a->token_file);
        return NULL;
    }
    a->fetched = now;
    a->stale = 0;
    a->generation++;
    return a->current;
}

/* ---- exec plugin --------------------------------------------------------- */

/* Seconds since the epoch of an RFC 3339 time; -1 if malformed. */
static time_t auth_parse_time(const char *s)
{
    int y, mo, d, h, mi, sec, n = 0;
    long off = 0;

    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
        return -1;
    s += n;
    if (*s == '.')
        while (*++s >= '0' && *s <= '9')
            ;
    if (*s == '+' || *s == '-') {
        int oh, om;
        if (sscanf(s + 1, "%2d:%2d", &oh, &om) != 2)
            return -1;
        off = (oh * 3600L + om * 60L) * (*s == '-' ? -1 : 1);
    } else if (*s != 'Z' && *s != 'z') {
        return -1;
    }
    /* days from civil (Howard Hinnant's algorithm) */
    y -= mo <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153L * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    long days = era * 146097 + doe - 719468;
    return (time_t)(days * 86400L + h * 3600L + mi * 60L + sec - off);
}

static void auth_notify(auth *a, const char *bearer, const char *err)
{
    auth_waiter *w = a->waiters;
    size_t n = a->nwaiters;

    a->waiters = NULL;
    a->nwaiters = a->capwaiters = 0;
    for (size_t i = 0; i < n; i++)
        w[i].cb(bearer, err, w[i].ud);
    free(w);
}

/* Read the ExecCredential the plugin printed: JSON, which is YAML, read
 * with libyaml (ytree.c) like the kubeconfig. */
static void auth_exec_parse(auth *a, char *err, size_t errlen)
{
    char yerr[160];
    ytree *doc;
    const ytree *status;
    const char *kind, *version, *token, *expires;

    if (a->output.len == 0) {
        snprintf(err, errlen, "exec plugin %s printed no ExecCredential JSON (no output)", a->exec->command);
        return;
    }
    doc = ytree_parse(a->output.data, a->output.len, yerr, sizeof yerr);
    if (doc == NULL || doc->kind != YTREE_MAP) {
        snprintf(err, errlen, "exec plugin %s printed no ExecCredential JSON (%s)", a->exec->command,
                 doc ? "not an object" : yerr);
        goto out;
    }
    kind = ytree_str(ytree_get(doc, "kind"));
    version = ytree_str(ytree_get(doc, "apiVersion"));
    if (kind == NULL || strcmp(kind, "ExecCredential") != 0) {
        snprintf(err, errlen, "exec plugin %s printed kind %s, not ExecCredential", a->exec->command,
                 kind ? kind : "(none)");
        goto out;
    }
    if (version == NULL || strcmp(version, a->exec->api_version) != 0) {
        snprintf(err, errlen, "exec plugin %s printed apiVersion %s, but the kubeconfig asks for %s",
                 a->exec->command, version ? version : "(none)", a->exec->api_version);
        goto out;
    }
    status = ytree_get(doc, "status");
    if (status == NULL || status->kind != YTREE_MAP) {
        snprintf(err, errlen, "exec plugin %s printed an ExecCredential without status", a->exec->command);
        goto out;
    }
    token = ytree_str(ytree_get(status, "token"));
    if (token == NULL || token[0] == '\0' || ytree_is_null(ytree_get(status, "token"))) {
        snprintf(err, errlen, "exec plugin %s printed no status.token (client certificates from plugins "
                 "are not supported yet)", a->exec->command);
        goto out;
    }
    str_free_secret(&a->current);
    a->current = strdup(token);
    a->expires = 0;
    expires = ytree_str(ytree_get(status, "expirationTimestamp"));
    if (expires && !ytree_is_null(ytree_get(status, "expirationTimestamp"))) {
        time_t t = auth_parse_time(expires);
        if (t < 0) {
            snprintf(err, errlen, "exec plugin %s printed a malformed status.expirationTimestamp",
                     a->exec->command);
            str_free_secret(&a->current);
            goto out;
        }
        a->expires = t;
    }
    a->stale = 0;
    a->generation++;
out:
    ytree_free(doc);
}

/* Forget the plugin's output, wiped first: it holds a token. */
static void auth_output_wipe(auth *a)
{
    if (a->output.data)
        memset(a->output.data, 0, a->output.cap);
    dbuf_free(&a->output);
}

static void auth_exec_finish(auth *a)
{
    char err[400] = "";

    if (a->pipe_open || a->proc_open || a->timer_open)
        return; /* every handle must be closed first */
    a->running = 0;
    if (a->freeing) {
        auth_notify(a, NULL, "shutting down");
        auth_output_wipe(a);
        free(a);
        return;
    }
    if (a->timed_out)
        snprintf(err, sizeof err, "exec plugin %s did not answer within %d s (killed)", a->exec->command,
                 AUTH_EXEC_TIMEOUT);
    else if (a->exit_status != 0)
        snprintf(err, sizeof err, "exec plugin %s exited with status %lld", a->exec->command,
                 (long long)a->exit_status);
    else
        auth_exec_parse(a, err, sizeof err);
    auth_output_wipe(a);
    auth_notify(a, err[0] ? NULL : a->current, err[0] ? err : NULL);
}

static void auth_pipe_closed(uv_handle_t *h)
{
    auth *a = h->data;

    a->pipe_open = 0;
    auth_exec_finish(a);
}

static void auth_proc_closed(uv_handle_t *h)
{
    auth *a = h->data;

    a->proc_open = 0;
    auth_exec_finish(a);
}

static void auth_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    auth *a = h->data;

    if (dbuf_reserve(&a->output, suggested) != 0) {
        buf->base = NULL;
        buf->len = 0;
        return;
    }
    buf->base = a->output.data + a->output.len;
    buf->len = a->output.cap - a->output.len - 1; /* the NUL's room */
}

static void auth_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    auth *a = s->data;

    (void)buf;
    if (n > 0) {
        a->output.len += (size_t)n;
        a->output.data[a->output.len] = '\0';
    } else if (n < 0) {
        uv_close((uv_handle_t *)&a->out, auth_pipe_closed);
    }
}

static void auth_timer_closed(uv_handle_t *h)
{
    auth *a = h->data;

    a->timer_open = 0;
    auth_exec_finish(a);
}

static void auth_stop_timer(auth *a)
{
    if (a->timer_open && !uv_is_closing((uv_handle_t *)&a->timer))
        uv_close((uv_handle_t *)&a->timer, auth_timer_closed);
}

static void auth_exit(uv_process_t *p, int64_t status, int signal)
{
    auth *a = p->data;

    a->exit_status = signal ? 128 + signal : status;
    a->exited = 1;
    uv_close((uv_handle_t *)&a->proc, auth_proc_closed);
    auth_stop_timer(a);
}

/* Every second while the plugin runs: say that luaop waits on it, and past
 * its deadline kill it (and stop reading, in case a child of its keeps the
 * pipe open). The loop never waits on a plugin. */
static void auth_exec_tick(uv_timer_t *t)
{
    auth *a = t->data;
    const char *cmd = a->exec ? a->exec->command : "(gone)";
    log_field f[] = {
        {"plugin", LOG_STR, .v.str = {cmd, strlen(cmd)}},
        {"seconds", LOG_INT, .v.i = ++a->ticks},
    };

    if (a->ticks == AUTH_EXEC_WARN)
        log_sink_write(a->log, LOG_INFO, "auth", "waiting for the exec plugin to print a credential", f, 2);
    if (a->ticks < AUTH_EXEC_TIMEOUT)
        return;
    log_sink_write(a->log, LOG_ERROR, "auth", "the exec plugin did not answer in time: killing it", f, 2);
    a->timed_out = 1;
    if (a->proc_open && !a->exited)
        uv_process_kill(&a->proc, SIGKILL);
    if (a->pipe_open && !uv_is_closing((uv_handle_t *)&a->out))
        uv_close((uv_handle_t *)&a->out, auth_pipe_closed);
    auth_stop_timer(a);
}

static void auth_exec_start(auth *a)
{
    kubeconfig_exec *e = a->exec;
    size_t nenv = 0;
    char **env, **argv, info[512];
    uv_process_options_t o = {0};
    uv_stdio_container_t stdio[3];
    int rc;

    while (environ[nenv])
        nenv++;
    env = calloc(nenv + e->nenv + 2, sizeof *env);
    argv = calloc(e->nargs + 2, sizeof *argv);
    if (env == NULL || argv == NULL) {
        free(env);
        free(argv);
        auth_notify(a, NULL, "out of memory");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        env[k++] = environ[i];
    for (size_t i = 0; i < e->nenv; i++) {
        size_t len = strlen(e->env[2 * i]) + strlen(e->env[2 * i + 1]) + 2;
        env[k] = malloc(len);
        if (env[k])
            snprintf(env[k++], len, "%s=%s", e->env[2 * i], e->env[2 * i + 1]);
    }
    snprintf(info, sizeof info,
             "KUBERNETES_EXEC_INFO={\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":false}}",
             e->api_version);
    env[k++] = info;
    argv[0] = e->command;
    for (size_t i = 0; i < e->nargs; i++)
        argv[i + 1] = e->args[i];

    uv_pipe_init(a->loop, &a->out, 0);
    a->out.data = a;
    a->proc.data = a;
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&a->out;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    o.file = e->command;
    o.args = argv;
    o.env = env;
    o.stdio = stdio;
    o.stdio_count = 3;
    o.exit_cb = auth_exit;
    a->running = 1;
    a->exited = 0;
    a->exec_runs++;
    a->pipe_open = 1;
    a->ticks = 0;
    a->timed_out = 0;
    uv_timer_init(a->loop, &a->timer);
    a->timer.data = a;
    a->timer_open = 1;
    rc = uv_spawn(a->loop, &a->proc, &o);
    for (size_t i = nenv; i + 1 < k; i++)
        free(env[i]);
    free(env);
    free(argv);
    if (rc != 0) {
        char err[400];
        snprintf(err, sizeof err, "exec plugin %s could not start: %s", e->command, uv_strerror(rc));
        a->proc_open = 1;
        uv_close((uv_handle_t *)&a->proc, NULL);
        a->proc_open = 0;
        a->exit_status = -1;
        auth_stop_timer(a);
        uv_close((uv_handle_t *)&a->out, auth_pipe_closed);
        /* auth_exec_finish reports exit -1 generically; say why now. */
        auth_notify(a, NULL, err);
        return;
    }
    a->proc_open = 1;
    uv_timer_start(&a->timer, auth_exec_tick, 1000, 1000);
    uv_read_start((uv_stream_t *)&a->out, auth_alloc, auth_read);
}

/* ---- the one entry point ---------------------------------------------- */

void auth_get(auth *a, auth_cb cb, void *ud)
{
    char err[400];

    if (a->token && !a->stale) {
        cb(a->token, NULL, ud);
        return;
    }
    if (a->exec) {
        time_t now = time(NULL);
        if (a->current && !a->stale && (a->expires == 0 || now < a->expires - 10)) {
            cb(a->current, NULL, ud);
            return;
        }
        if (a->nwaiters == a->capwaiters) {
            size_t cap = a->capwaiters ? 2 * a->capwaiters : 8;
            auth_waiter *w = realloc(a->waiters, cap * sizeof *w);
            if (w == NULL) {
                cb(NULL, "out of memory", ud);
                return;
            }
            a->waiters = w;
            a->capwaiters = cap;
        }
        a->waiters[a->nwaiters++] = (auth_waiter){cb, ud};
        if (!a->running)
            auth_exec_start(a);
        return;
    }
    if (a->token_file) {
        const char *t = auth_from_file(a, err, sizeof err);
        cb(t, t ? NULL : err, ud);
        return;
    }
    if (a->token) { /* stale, but nothing can renew it */
        cb(a->token, NULL, ud);
        return;
    }
    cb(NULL, NULL, ud);
}

void auth_free(auth *a)
{
    if (a == NULL)
        return;
    str_free_secret(&a->token);
    str_free_secret(&a->current);
    free(a->token_file);
    auth_free_exec(a->exec);
    a->exec = NULL;
    if (a->running) {
        /* Let the plugin's handles close; auth_exec_finish frees the rest. */
        a->freeing = 1;
        if (a->proc_open && !a->exited)
            uv_process_kill(&a->proc, SIGTERM);
        return;
    }
    free(a->waiters);
    auth_output_wipe(a);
    free(a);
}
