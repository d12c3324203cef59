/* kubeconfig.c - resolve where the API server is and how to authenticate to
 * it, as kubectl and controller-runtime do (see kubeconfig.h). */

#include "kubeconfig.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "b64.h"
#include "dbuf.h"
#include "str.h"
#include "ytree.h"

#define KC_MAX_FILES 32
#define KC_MAX_FILE_SIZE (16 * 1024 * 1024)

typedef struct kc_file {
    char *path;
    char *dir;
    ytree *doc;
} kc_file;

typedef struct kc_loader {
    kc_file files[KC_MAX_FILES];
    size_t n;
    char *err;
    size_t errlen;
} kc_loader;

/* Where in a file a section is, for messages: "users[alice].user". */
typedef struct kc_where {
    const kc_file *file;
    const ytree *node;
    char path[160];
} kc_where;

static int kc_fail(kc_loader *l, const kc_file *f, const ytree *at, const char *fmt, ...)
{
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (f && at)
        snprintf(l->err, l->errlen, "kubeconfig %s: line %d: %s", f->path, at->line, msg);
    else if (f)
        snprintf(l->err, l->errlen, "kubeconfig %s: %s", f->path, msg);
    else
        snprintf(l->err, l->errlen, "%s", msg);
    return -1;
}

static char *kc_read(const char *path, size_t *len, int *errnum)
{
    dbuf b = {0};

    *errnum = dbuf_read_file(&b, path, KC_MAX_FILE_SIZE);
    if (*errnum == 0 && dbuf_reserve(&b, 0) != 0) /* an empty file: still a string */
        *errnum = ENOMEM;
    if (*errnum) {
        dbuf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.data;
}

static char *kc_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');

    if (slash == NULL)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* Add a file to the merge. 0 added (or a duplicate), 1 skipped (missing and
 * may be), -1 error. */
static int kc_add(kc_loader *l, const char *path, int must_exist)
{
    kc_file *f = &l->files[l->n];
    char perr[200];
    size_t len;
    int errnum = 0;
    char *data;

    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(l->files[i].path, path) == 0)
            return 0;
    }
    if (l->n == KC_MAX_FILES)
        return kc_fail(l, NULL, NULL, "more than %d kubeconfig files", KC_MAX_FILES);
    data = kc_read(path, &len, &errnum);
    if (data == NULL) {
        if (errnum == ENOENT && !must_exist)
            return 1;
        return kc_fail(l, NULL, NULL, "kubeconfig %s: %s", path, strerror(errnum));
    }
    f->path = strdup(path);
    f->dir = kc_dirname(path);
    f->doc = ytree_parse(data, len, perr, sizeof perr);
    free(data);
    l->n++;
    if (f->path == NULL || f->dir == NULL)
        return kc_fail(l, NULL, NULL, "out of memory");
    if (f->doc == NULL)
        return kc_fail(l, f, NULL, "%s", perr);
    if (f->doc->kind != YTREE_MAP)
        return kc_fail(l, f, f->doc, "the top level must be a mapping");
    return 0;
}

static void kc_loader_free(kc_loader *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->files[i].path);
        free(l->files[i].dir);
        ytree_free(l->files[i].doc);
    }
}

static void kc_file_list(const kc_loader *l, char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < l->n && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", l->files[i].path);
}

/* Find the entry called `name` in the list `list` ("clusters") and its
 * section `inner` ("cluster"). 1 found, 0 not found, -1 error. */
static int kc_find(kc_loader *l, const char *list, const char *inner, const char *name, kc_where *w)
{
    for (size_t i = 0; i < l->n; i++) {
        const kc_file *f = &l->files[i];
        const ytree *seq = ytree_get(f->doc, list);
        if (ytree_is_null(seq))
            continue;
        if (seq->kind != YTREE_SEQ)
            return kc_fail(l, f, seq, "%s must be a list", list);
        for (size_t j = 0; j < seq->len; j++) {
            const ytree *item = seq->items[j];
            if (item->kind != YTREE_MAP)
                return kc_fail(l, f, item, "%s[%zu] must be a mapping", list, j);
            const ytree *nm = ytree_get(item, "name");
            if (ytree_str(nm) == NULL)
                return kc_fail(l, f, item, "%s[%zu].name is missing", list, j);
            if (strcmp(nm->str, name) != 0)
                continue;
            const ytree *sec = ytree_get(item, inner);
            if (ytree_is_null(sec))
                return kc_fail(l, f, item, "%s[%s].%s is missing", list, name, inner);
            if (sec->kind != YTREE_MAP)
                return kc_fail(l, f, sec, "%s[%s].%s must be a mapping", list, name, inner);
            w->file = f;
            w->node = sec;
            snprintf(w->path, sizeof w->path, "%s[%s].%s", list, name, inner);
            return 1;
        }
    }
    return 0;
}

/* A string field; *out NULL when absent. 0 ok, -1 error. */
static int kc_str(kc_loader *l, const kc_where *w, const char *field, char **out)
{
    const ytree *v = ytree_get(w->node, field);

    *out = NULL;
    if (ytree_is_null(v))
        return 0;
    if (v->kind != YTREE_SCALAR)
        return kc_fail(l, w->file, v, "%s.%s must be a string", w->path, field);
    *out = strdup(v->str);
    return *out ? 0 : kc_fail(l, NULL, NULL, "out of memory");
}

static char *kc_resolve(const char *dir, const char *p)
{
    size_t n;
    char *out;

    if (p[0] == '/' || p[0] == '\0')
        return strdup(p);
    n = strlen(dir) + strlen(p) + 2;
    out = malloc(n);
    if (out)
        snprintf(out, n, "%s/%s", dir, p);
    return out;
}

/* A path field, resolved against the directory of its file. */
static int kc_path(kc_loader *l, const kc_where *w, const char *field, char **out)
{
    char *raw;

    *out = NULL;
    if (kc_str(l, w, field, &raw) != 0)
        return -1;
    if (raw == NULL)
        return 0;
    *out = kc_resolve(w->file->dir, raw);
    free(raw);
    return *out ? 0 : kc_fail(l, NULL, NULL, "out of memory");
}

static int kc_bool(kc_loader *l, const kc_where *w, const char *field, int *out)
{
    const ytree *v = ytree_get(w->node, field);

    *out = 0;
    if (ytree_is_null(v))
        return 0;
    if (v->kind == YTREE_SCALAR && !v->quoted) {
        if (strcmp(v->str, "true") == 0 || strcmp(v->str, "True") == 0 || strcmp(v->str, "TRUE") == 0) {
            *out = 1;
            return 0;
        }
        if (strcmp(v->str, "false") == 0 || strcmp(v->str, "False") == 0 || strcmp(v->str, "FALSE") == 0)
            return 0;
    }
    return kc_fail(l, w->file, v, "%s.%s must be true or false", w->path, field);
}

static int kc_data(kc_loader *l, const kc_where *w, const char *field, kubeconfig_bytes *out)
{
    const ytree *v = ytree_get(w->node, field);

    out->data = NULL;
    out->len = 0;
    if (ytree_is_null(v))
        return 0;
    if (v->kind != YTREE_SCALAR)
        return kc_fail(l, w->file, v, "%s.%s must be a base64 string", w->path, field);
    out->data = b64_decode(v->str, v->len, &out->len);
    if (out->data == NULL)
        return kc_fail(l, w->file, v, "%s.%s is not valid base64", w->path, field);
    return 0;
}

static int kc_exec(kc_loader *l, const kc_where *user, kubeconfig *kc)
{
    const ytree *node = ytree_get(user->node, "exec");
    kc_where w = {user->file, node, ""};
    kubeconfig_exec *ex;

    if (ytree_is_null(node))
        return 0;
    snprintf(w.path, sizeof w.path, "%.150s.exec", user->path);
    if (node->kind != YTREE_MAP)
        return kc_fail(l, w.file, node, "%s must be a mapping", w.path);
    ex = kc->exec = calloc(1, sizeof *ex);
    if (ex == NULL)
        return kc_fail(l, NULL, NULL, "out of memory");
    if (kc_str(l, &w, "apiVersion", &ex->api_version) || kc_str(l, &w, "command", &ex->command) ||
        kc_str(l, &w, "interactiveMode", &ex->interactive_mode) ||
        kc_bool(l, &w, "provideClusterInfo", &ex->provide_cluster_info))
        return -1;
    if (ex->command == NULL || ex->command[0] == '\0')
        return kc_fail(l, w.file, node, "%s.command is missing", w.path);
    if (ex->api_version == NULL)
        return kc_fail(l, w.file, node, "%s.apiVersion is missing", w.path);
    if (strcmp(ex->api_version, "client.authentication.k8s.io/v1") != 0 &&
        strcmp(ex->api_version, "client.authentication.k8s.io/v1beta1") != 0)
        return kc_fail(l, w.file, ytree_get(node, "apiVersion"),
                       "%s.apiVersion %s is not supported (use client.authentication.k8s.io/v1 or v1beta1)",
                       w.path, ex->api_version);
    /* A command with a slash in it is a path, relative to the file. */
    if (strchr(ex->command, '/') && ex->command[0] != '/') {
        char *abs = kc_resolve(w.file->dir, ex->command);
        if (abs == NULL)
            return kc_fail(l, NULL, NULL, "out of memory");
        free(ex->command);
        ex->command = abs;
    }

    const ytree *args = ytree_get(node, "args");
    if (!ytree_is_null(args)) {
        if (args->kind != YTREE_SEQ)
            return kc_fail(l, w.file, args, "%s.args must be a list", w.path);
        ex->args = calloc(args->len + 1, sizeof *ex->args);
        if (ex->args == NULL)
            return kc_fail(l, NULL, NULL, "out of memory");
        for (size_t i = 0; i < args->len; i++) {
            if (args->items[i]->kind != YTREE_SCALAR)
                return kc_fail(l, w.file, args->items[i], "%s.args[%zu] must be a string", w.path, i);
            if ((ex->args[ex->nargs++] = strdup(args->items[i]->str)) == NULL)
                return kc_fail(l, NULL, NULL, "out of memory");
        }
    }

    const ytree *env = ytree_get(node, "env");
    if (!ytree_is_null(env)) {
        if (env->kind != YTREE_SEQ)
            return kc_fail(l, w.file, env, "%s.env must be a list", w.path);
        ex->env = calloc(2 * env->len + 1, sizeof *ex->env);
        if (ex->env == NULL)
            return kc_fail(l, NULL, NULL, "out of memory");
        for (size_t i = 0; i < env->len; i++) {
            const ytree *e = env->items[i];
            const char *name = ytree_str(ytree_get(e, "name"));
            const ytree *value = ytree_get(e, "value");
            if (e->kind != YTREE_MAP || name == NULL || name[0] == '\0')
                return kc_fail(l, w.file, e, "%s.env[%zu] needs a name", w.path, i);
            if (!ytree_is_null(value) && value->kind != YTREE_SCALAR)
                return kc_fail(l, w.file, value, "%s.env[%zu].value must be a string", w.path, i);
            ex->env[2 * i] = strdup(name);
            ex->env[2 * i + 1] = strdup(ytree_is_null(value) ? "" : value->str);
            ex->nenv++;
            if (ex->env[2 * i] == NULL || ex->env[2 * i + 1] == NULL)
                return kc_fail(l, NULL, NULL, "out of memory");
        }
    }
    return 0;
}

static int kc_cluster(kc_loader *l, const kc_where *w, kubeconfig *kc)
{
    if (kc_str(l, w, "server", &kc->server) || kc_path(l, w, "certificate-authority", &kc->ca_file) ||
        kc_data(l, w, "certificate-authority-data", &kc->ca_data) ||
        kc_bool(l, w, "insecure-skip-tls-verify", &kc->insecure) ||
        kc_str(l, w, "tls-server-name", &kc->tls_server_name) || kc_str(l, w, "proxy-url", &kc->proxy_url))
        return -1;
    if (kc->server == NULL || kc->server[0] == '\0')
        return kc_fail(l, w->file, w->node, "%s.server is missing", w->path);
    if (strncmp(kc->server, "https://", 8) != 0 && strncmp(kc->server, "http://", 7) != 0) {
        char shown[512];
        return kc_fail(l, w->file, ytree_get(w->node, "server"), "%s.server %s must start with https:// or http://",
                       w->path, str_redact_url(kc->server, shown, sizeof shown));
    }
    if (kc->insecure && (kc->ca_file || kc->ca_data.data))
        return kc_fail(l, w->file, w->node,
                       "%s: insecure-skip-tls-verify cannot be combined with a certificate authority",
                       w->path);
    return 0;
}

static int kc_user(kc_loader *l, const kc_where *w, kubeconfig *kc)
{
    const ytree *ap = ytree_get(w->node, "auth-provider");

    if (!ytree_is_null(ap))
        return kc_fail(l, w->file, ap,
                       "%s.auth-provider is not supported; use an exec credential plugin", w->path);
    if (kc_path(l, w, "client-certificate", &kc->cert_file) ||
        kc_data(l, w, "client-certificate-data", &kc->cert_data) ||
        kc_path(l, w, "client-key", &kc->key_file) || kc_data(l, w, "client-key-data", &kc->key_data) ||
        kc_str(l, w, "token", &kc->token) || kc_path(l, w, "tokenFile", &kc->token_file) ||
        kc_str(l, w, "username", &kc->username) || kc_str(l, w, "password", &kc->password) ||
        kc_exec(l, w, kc))
        return -1;
    int cert = kc->cert_file || kc->cert_data.data, key = kc->key_file || kc->key_data.data;
    if (cert != key)
        return kc_fail(l, w->file, w->node, "%s has a client %s but no client %s", w->path,
                       cert ? "certificate" : "key", cert ? "key" : "certificate");
    return 0;
}

/* The first current-context set in the merged files. */
static const char *kc_current_context(kc_loader *l, const kc_file **from)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *s = ytree_str(ytree_get(l->files[i].doc, "current-context"));
        if (s && s[0]) {
            *from = &l->files[i];
            return s;
        }
    }
    return NULL;
}

static int kc_from_files(kc_loader *l, const kubeconfig_opts *o, kubeconfig *kc)
{
    char files[512];
    const kc_file *from = NULL;
    const char *name = o->context && o->context[0] ? o->context : kc_current_context(l, &from);
    kc_where ctx, cl, us;
    int r;

    kc_file_list(l, files, sizeof files);
    if (name == NULL)
        return kc_fail(l, NULL, NULL,
                       "kubeconfig %s: no current-context is set; choose one with --context", files);
    if ((kc->context = strdup(name)) == NULL)
        return kc_fail(l, NULL, NULL, "out of memory");
    r = kc_find(l, "contexts", "context", name, &ctx);
    if (r < 0)
        return -1;
    if (r == 0)
        return kc_fail(l, NULL, NULL, "kubeconfig %s: context \"%s\" not found", files, name);
    if ((kc->source = strdup(ctx.file->path)) == NULL)
        return kc_fail(l, NULL, NULL, "out of memory");
    if (kc_str(l, &ctx, "cluster", &kc->cluster_name) || kc_str(l, &ctx, "user", &kc->user_name) ||
        kc_str(l, &ctx, "namespace", &kc->namespace))
        return -1;
    if (kc->cluster_name == NULL || kc->cluster_name[0] == '\0')
        return kc_fail(l, ctx.file, ctx.node, "%s.cluster is missing", ctx.path);

    r = kc_find(l, "clusters", "cluster", kc->cluster_name, &cl);
    if (r < 0)
        return -1;
    if (r == 0)
        return kc_fail(l, ctx.file, ctx.node, "%s.cluster: cluster \"%s\" not found in %s", ctx.path,
                       kc->cluster_name, files);
    if (kc_cluster(l, &cl, kc) != 0)
        return -1;

    if (kc->user_name && kc->user_name[0]) {
        r = kc_find(l, "users", "user", kc->user_name, &us);
        if (r < 0)
            return -1;
        if (r == 0)
            return kc_fail(l, ctx.file, ctx.node, "%s.user: user \"%s\" not found in %s", ctx.path,
                           kc->user_name, files);
        if (kc_user(l, &us, kc) != 0)
            return -1;
    }
    return 0;
}

static char *kc_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int kc_exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/* In a Pod: 1 configured, 0 not in a cluster, -1 error. */
static int kc_in_cluster(kc_loader *l, const kubeconfig_opts *o, kubeconfig *kc)
{
    const char *sa = o->sa_dir ? o->sa_dir : KUBECONFIG_SA_DIR;
    const char *host = o->service_host, *port = o->service_port;
    char *token_file, *ns_file;
    size_t n;

    if (!host || !host[0] || !port || !port[0])
        return 0;
    token_file = kc_join(sa, "token");
    if (token_file == NULL)
        return kc_fail(l, NULL, NULL, "out of memory");
    if (!kc_exists(token_file)) {
        free(token_file);
        return 0;
    }
    kc->in_cluster = 1;
    kc->token_file = token_file;
    kc->source = strdup("in-cluster");
    kc->ca_file = kc_join(sa, "ca.crt");
    n = strlen(host) + strlen(port) + 16;
    kc->server = malloc(n);
    if (kc->server)
        snprintf(kc->server, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
    ns_file = kc_join(sa, "namespace");
    if (ns_file) {
        int errnum;
        size_t len;
        char *ns = kc_read(ns_file, &len, &errnum);
        if (ns) {
            while (len > 0 && (ns[len - 1] == '\n' || ns[len - 1] == ' ' || ns[len - 1] == '\r'))
                ns[--len] = '\0';
            if (len > 0)
                kc->namespace = ns;
            else
                free(ns);
        }
        free(ns_file);
    }
    if (!kc->source || !kc->ca_file || !kc->server || !ns_file)
        return kc_fail(l, NULL, NULL, "out of memory");
    return 1;
}

static int kc_load(kc_loader *l, const kubeconfig_opts *o, kubeconfig *kc)
{
    int r;

    if (o->kubeconfig && o->kubeconfig[0]) {
        if (kc_add(l, o->kubeconfig, 1) < 0)
            return -1;
        return kc_from_files(l, o, kc);
    }
    if (o->env_kubeconfig && o->env_kubeconfig[0]) {
        char *list = strdup(o->env_kubeconfig), *save = NULL;
        if (list == NULL)
            return kc_fail(l, NULL, NULL, "out of memory");
        for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
            if (kc_add(l, p, 0) < 0) {
                free(list);
                return -1;
            }
        }
        free(list);
        if (l->n == 0)
            return kc_fail(l, NULL, NULL, "KUBECONFIG=%s: none of these files exists", o->env_kubeconfig);
        return kc_from_files(l, o, kc);
    }
    r = kc_in_cluster(l, o, kc);
    if (r != 0)
        return r < 0 ? -1 : 0;
    if (o->home && o->home[0]) {
        char *path = kc_join(o->home, ".kube/config");
        if (path == NULL)
            return kc_fail(l, NULL, NULL, "out of memory");
        r = kc_add(l, path, 0);
        free(path);
        if (r < 0)
            return -1;
        if (r == 0)
            return kc_from_files(l, o, kc);
    }
    return kc_fail(l, NULL, NULL,
                   "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, create "
                   "~/.kube/config, or run in a Pod");
}

int kubeconfig_load(const kubeconfig_opts *o, kubeconfig **out, char *err, size_t errlen)
{
    kc_loader l = {.err = err, .errlen = errlen};
    kubeconfig *kc = calloc(1, sizeof *kc);

    *out = NULL;
    err[0] = '\0';
    if (kc == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (kc_load(&l, o, kc) != 0)
        goto fail;
    if (o->namespace && o->namespace[0]) {
        free(kc->namespace);
        kc->namespace = strdup(o->namespace);
    } else if (kc->namespace == NULL || kc->namespace[0] == '\0') {
        free(kc->namespace);
        kc->namespace = strdup("default");
    }
    if (kc->namespace == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    kc_loader_free(&l);
    *out = kc;
    return 0;
fail:
    kc_loader_free(&l);
    kubeconfig_free(kc);
    return -1;
}

static void kc_free_bytes(kubeconfig_bytes *b, int secret)
{
    if (b->data && secret)
        memset(b->data, 0, b->len);
    free(b->data);
}

void kubeconfig_free(kubeconfig *kc)
{
    if (kc == NULL)
        return;
    free(kc->source);
    free(kc->context);
    free(kc->cluster_name);
    free(kc->user_name);
    free(kc->namespace);
    free(kc->server);
    free(kc->ca_file);
    kc_free_bytes(&kc->ca_data, 0);
    free(kc->tls_server_name);
    free(kc->proxy_url);
    free(kc->cert_file);
    kc_free_bytes(&kc->cert_data, 0);
    free(kc->key_file);
    kc_free_bytes(&kc->key_data, 1);
    str_free_secret(&kc->token);
    free(kc->token_file);
    free(kc->username);
    str_free_secret(&kc->password);
    if (kc->exec) {
        kubeconfig_exec *ex = kc->exec;
        free(ex->api_version);
        free(ex->command);
        for (size_t i = 0; i < ex->nargs; i++)
            free(ex->args[i]);
        free(ex->args);
        for (size_t i = 0; i < 2 * ex->nenv; i++)
            free(ex->env[i]);
        free(ex->env);
        free(ex->interactive_mode);
        free(ex);
    }
    free(kc);
}
