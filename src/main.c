/* main.c - luaop: wire the modules as the flags (flags.h) say: a runtime,
 * its API server, a Lua state running luaop.main, the servers, the signals
 * and the watchdog. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* glibc's mallopt, with no #ifdef: an #ifdef __GLIBC__ before the first
 * header that defines it once left mallopt out of the build unnoticed */
#include <malloc.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <uv.h>

#include "api.h"
#include "charge.h"
#include "flags.h"
#include "gcmem.h"
#include "kubeconfig.h"
#include "lbind.h"
#include "log.h"
#include "luaembed.h"
#include "sandbox.h"
#include "scheduler.h"
#include "version.h"
#include "pattern.h"
#include "str.h"
#include "runtime.h"
#include "serve.h"
#include "gcstep.h"
#include "watchdog.h"

typedef struct main_run {
    int status;
    int ended;
    int signum; /* the signal that ended it, when nobody drained */
    runtime *rt;
    uv_signal_t sigterm, sigint;
} main_run;

/* SIGTERM/SIGINT: controllers drain (their manager waits on
 * task.shutdown()); a program with nothing to drain stops at once. A second
 * signal stops at once too. */
static void main_signal(uv_signal_t *h, int signum)
{
    main_run *run = h->data;

    log_field f = {"signal", LOG_STR, .v.str = {signum == SIGTERM ? "SIGTERM" : "SIGINT", signum == SIGTERM ? 7 : 6}};
    log_sink_write(&run->rt->log, LOG_INFO, "setup", "stopping", &f, 1);
    if (run->signum == 0 && lbind_task_stop(run->rt) > 0) {
        run->signum = -1; /* draining */
        return;
    }
    run->signum = signum;
    run->status = 128 + signum;
    run->ended = 1;
    uv_stop(h->loop);
}

static void main_done(sched_task *t, lua_State *co, int ok, int nres, void *ud)
{
    main_run *run = ud;

    run->ended = 1;
    if (!ok) {
        log_field f = {"error", LOG_STR, .v.str = {sched_error(t), strlen(sched_error(t))}};
        log_sink_write(&run->rt->log, LOG_ERROR, "script", "script failed", &f, 1);
        run->status = 1;
        return;
    }
    /* The exit status: an integer returned, false is 1, anything else 0. */
    run->status = 0;
    if (nres > 0) {
        if (lua_isinteger(co, -nres))
            run->status = (int)lua_tointeger(co, -nres);
        else if (lua_isboolean(co, -nres) && !lua_toboolean(co, -nres))
            run->status = 1;
    }
}

/* The API server the kubeconfig names (flag, KUBECONFIG, in-cluster,
 * ~/.kube/config), on rt's loop; NULL after logging why not. */
static api *main_connect(const flags *o, runtime *rt, int *in_cluster)
{
    kubeconfig_opts ko = {0};
    kubeconfig *kc = NULL;
    api *a;
    char err[600];

    ko.kubeconfig = o->kubeconfig;
    ko.context = o->context;
    ko.namespace = o->namespace;
    ko.env_kubeconfig = getenv("KUBECONFIG");
    ko.home = getenv("HOME");
    ko.service_host = getenv("KUBERNETES_SERVICE_HOST");
    ko.service_port = getenv("KUBERNETES_SERVICE_PORT");
    ko.sa_dir = getenv("LUAOP_SERVICEACCOUNT_DIR"); /* NULL: the standard mount */
    if (kubeconfig_load(&ko, &kc, err, sizeof err) != 0) {
        log_field f = {"error", LOG_STR, .v.str = {err, strlen(err)}};
        log_write(LOG_ERROR, "setup", "cannot load the Kubernetes configuration", &f, 1);
        return NULL;
    }
    {
        char urlbuf[512];
        const char *server = str_redact_url(kc->server, urlbuf, sizeof urlbuf);
        log_field f[] = {
            {"source", LOG_STR, .v.str = {kc->source, strlen(kc->source)}},
            {"context", LOG_STR, .v.str = {kc->context ? kc->context : "", kc->context ? strlen(kc->context) : 0}},
            {"server", LOG_STR, .v.str = {server, strlen(server)}},
            {"namespace", LOG_STR, .v.str = {kc->namespace, strlen(kc->namespace)}},
        };
        log_write(LOG_DEBUG, "setup", "using Kubernetes configuration", f, 4);
    }
    *in_cluster = strcmp(kc->source, "in-cluster") == 0;
    a = api_new(&rt->loop, kc, o->qps, o->burst, &rt->log, err, sizeof err);
    kubeconfig_free(kc);
    if (a == NULL) {
        log_field f = {"error", LOG_STR, .v.str = {err, strlen(err)}};
        log_write(LOG_ERROR, "setup", "cannot set up the API client", &f, 1);
    }
    return a;
}

/* A Lua state for rt: the standard libraries (pattern matching budgeted),
 * luaop.core and the embedded Lua half preloaded, the sandbox for scripts,
 * and arg as the lua interpreter sets it. NULL after logging why not. */
static lua_State *main_lua(const flags *o, runtime *rt)
{
    lua_State *L = luaL_newstate();

    if (L == NULL) {
        log_write(LOG_ERROR, "setup", "cannot create a Lua state", NULL, 0);
        return NULL;
    }
    rt->scripts = !o->program && !o->test; /* specs are trusted, as programs */
    if (runtime_attach(rt, L) != 0) {
        log_write(LOG_ERROR, "setup", "out of memory", NULL, 0);
        lua_close(L);
        return NULL;
    }
    luaL_openlibs(L); /* its string library's pattern matching is budgeted (pattern.h) */
    charge_wrap(L);   /* and the rest of the libraries' C work (charge.h) */
    if (o->test)      /* a short-lived process: Lua's own pause, no trim at each cycle's end */
        lua_gc(L, LUA_GCINC, 200, 0, 0);
    else
        gcmem_attach(L); /* the collector's garbage given back as it goes */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_luaop_core);
    lua_setfield(L, -2, "luaop.core");
    lua_pop(L, 1);
    luaembed_preload(L);
    if (!o->program && !o->test)
        sandbox_apply(L); /* scripts: what no Lua code in this process may do */
    /* arg[0] the script, then its arguments */
    lua_createtable(L, o->script_argc, 1);
    lua_pushstring(L, o->program ? o->program : o->scripts[0]);
    lua_rawseti(L, -2, 0);
    for (int i = 0; i < o->script_argc; i++) {
        lua_pushstring(L, o->script_argv[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setglobal(L, "arg");
    return L;
}

/* Push the table leader election's and a shard ring's options share: the
 * Leases' namespace (ns, else the kubeconfig's or in-cluster one), this
 * process's identity and the durations of the --leader-elect-* flags. */
static void main_push_lease(lua_State *L, const flags *o, const char *id, const char *ns)
{
    lua_createtable(L, 0, 7);
    lua_pushstring(L, ns ? ns : api_namespace(runtime_of(L)->api));
    lua_setfield(L, -2, "namespace");
    lua_pushstring(L, id);
    lua_setfield(L, -2, "identity");
    lua_pushnumber(L, o->le_lease);
    lua_setfield(L, -2, "lease_duration");
    lua_pushnumber(L, o->le_renew);
    lua_setfield(L, -2, "renew_deadline");
    lua_pushnumber(L, o->le_retry);
    lua_setfield(L, -2, "retry_period");
}

/* Push options.identity, this process's name as the leader election's
 * holder and its Events' reportingInstance, as controller-runtime makes
 * it: the host name, "_", a random suffix; and, with --leader-elect,
 * options.leader: the Lease (namespace: the flag's, else the in-cluster
 * one) and its durations. */
static int main_identity(lua_State *L, const flags *o)
{
    char host[256] = "luaop", id[300];
    size_t hostlen = sizeof host;
    unsigned char rnd[8];
    size_t n;

    if (uv_os_gethostname(host, &hostlen) != 0)
        snprintf(host, sizeof host, "luaop");
    if (uv_random(NULL, NULL, rnd, sizeof rnd, 0, NULL) != 0) {
        log_write(LOG_ERROR, "setup", "cannot make an identity for this process: no randomness", NULL, 0);
        return -1;
    }
    n = (size_t)snprintf(id, sizeof id, "%s_", host);
    for (size_t i = 0; i < sizeof rnd && n + 2 < sizeof id; i++, n += 2)
        snprintf(id + n, sizeof id - n, "%02x", rnd[i]);
    lua_pushstring(L, id);
    lua_setfield(L, -2, "identity");
    if (runtime_of(L)->api) {
        /* as client-go's NAME/VERSION, and the process: which replica asked
         * is in the API server's audit log */
        char ua[400];
        snprintf(ua, sizeof ua, "luaop/%s (%s)", LUAOP_VERSION, id);
        if (api_set_user_agent(runtime_of(L)->api, ua) != 0)
            return -1;
    }
    if (o->shard_ring) {
        main_push_lease(L, o, id, o->shard_namespace ? o->shard_namespace : o->le_namespace);
        lua_pushstring(L, o->shard_ring);
        lua_setfield(L, -2, "ring");
        lua_setfield(L, -2, "shard");
    }
    if (!o->leader_elect)
        return 0;
    main_push_lease(L, o, id, o->le_namespace);
    lua_pushstring(L, o->le_id);
    lua_setfield(L, -2, "name");
    lua_setfield(L, -2, "leader");
    return 0;
}

/* DIR/NAME pushed */
static void main_push_path(lua_State *L, const char *dir, const char *name)
{
    size_t n = strlen(dir);

    if (name[0] == '/' || n == 0)
        lua_pushstring(L, name);
    else
        lua_pushfstring(L, "%s%s%s", dir, dir[n - 1] == '/' ? "" : "/", name);
}

/* options.webhook = {address =, cert =, key =} (the webhook server's,
 * for core.webhook.start; absent when --webhook-bind-address is 0), and
 * with --metrics-secure and a --metrics-bind-address, options.metrics_secure
 * = {address =, cert =, key =} (the files absent without
 * --metrics-cert-path: a self-signed certificate) */
static void main_tls_options(lua_State *L, const flags *o)
{
    if (o->webhook_addr) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, o->webhook_addr);
        lua_setfield(L, -2, "address");
        main_push_path(L, o->webhook_cert_path, o->webhook_cert_name);
        lua_setfield(L, -2, "cert");
        main_push_path(L, o->webhook_cert_path, o->webhook_cert_key);
        lua_setfield(L, -2, "key");
        lua_setfield(L, -2, "webhook");
    }
    if (o->metrics_secure && o->metrics_addr) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, o->metrics_addr);
        lua_setfield(L, -2, "address");
        if (o->metrics_cert_path) {
            main_push_path(L, o->metrics_cert_path, o->metrics_cert_name);
            lua_setfield(L, -2, "cert");
            main_push_path(L, o->metrics_cert_path, o->metrics_cert_key);
            lua_setfield(L, -2, "key");
        }
        lua_setfield(L, -2, "metrics_secure");
    }
}

/* Start luaop.main(options, program arguments...) as a task: it loads the
 * scripts (text only, each in its own environment) and runs them, as a
 * program or as the controllers they return. 0, or -1 after logging. */
static int main_start(lua_State *L, const flags *o, main_run *run)
{
    lua_getglobal(L, "require");
    lua_pushliteral(L, "luaop.main");
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        log_field f = {"error", LOG_STR, .v.str = {msg, strlen(msg)}};
        log_write(LOG_ERROR, "setup", "cannot load luaop.main", &f, 1);
        return -1;
    }
    lua_createtable(L, 0, 2);
    lua_createtable(L, o->nscripts, 0);
    for (int i = 0; i < o->nscripts; i++) {
        lua_pushstring(L, o->scripts[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "scripts");
    if (o->program) {
        lua_pushstring(L, o->program);
        lua_setfield(L, -2, "program");
    }
    if (o->check) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "check");
        lua_createtable(L, o->ncrds, 0);
        for (int i = 0; i < o->ncrds; i++) {
            lua_pushstring(L, o->crds[i]);
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, "crds");
    }
    lua_pushnumber(L, o->grace);
    lua_setfield(L, -2, "graceful_shutdown_timeout");
    if (main_identity(L, o) != 0)
        return -1;
    if (o->max_instructions) {
        lua_pushinteger(L, (lua_Integer)o->max_instructions);
        lua_setfield(L, -2, "max_instructions");
    }
    if (o->max_memory) {
        lua_pushinteger(L, (lua_Integer)o->max_memory);
        lua_setfield(L, -2, "max_memory");
    }
    if (o->max_tasks) {
        lua_pushinteger(L, (lua_Integer)o->max_tasks);
        lua_setfield(L, -2, "max_tasks");
    }
    main_tls_options(L, o);
    for (int i = 0; i < o->script_argc; i++)
        lua_pushstring(L, o->script_argv[i]);
    if (sched_spawn(L, o->script_argc + 1, main_done, run) == NULL) {
        log_write(LOG_ERROR, "setup", "out of memory", NULL, 0);
        return -1;
    }
    return 0;
}

/* Compile every script the flags name (luaop.script's precheck, as a task:
 * the file system is read on the thread pool). 0, or -1 after the script
 * logged what does not compile, with file and line. */
static int main_precheck(lua_State *L, const flags *o, runtime *rt)
{
    main_run pre = {.status = 1, .rt = rt};

    lua_getglobal(L, "require");
    lua_pushliteral(L, "luaop.script");
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        log_field f = {"error", LOG_STR, .v.str = {msg, strlen(msg)}};
        log_write(LOG_ERROR, "setup", "cannot load luaop.script", &f, 1);
        lua_pop(L, 1);
        return -1;
    }
    lua_getfield(L, -1, "precheck");
    lua_remove(L, -2);
    lua_createtable(L, o->nscripts, 0);
    for (int i = 0; i < o->nscripts; i++) {
        lua_pushstring(L, o->scripts[i]);
        lua_rawseti(L, -2, i + 1);
    }
    if (sched_spawn(L, 1, main_done, &pre) == NULL) {
        log_write(LOG_ERROR, "setup", "out of memory", NULL, 0);
        return -1;
    }
    while (!pre.ended && uv_run(&rt->loop, UV_RUN_ONCE))
        ;
    return pre.ended && pre.status == 0 ? 0 : -1;
}

/* The metrics and probe servers the flags ask for, reading rt (serve.h).
 * 0, or -1 after logging why not (an address in use). */
static int main_serve(const flags *o, runtime *rt, serve **srv)
{
    serve_source src = {.metrics = rt->metrics, .sched = rt->sched, .ready = &rt->ready, .failing = &rt->failing};
    /* --metrics-secure: /metrics is served over HTTPS by luaop.metrics_secure */
    const char *metrics_addr = o->metrics_secure ? NULL : o->metrics_addr;
    char err[300];

    if (metrics_addr == NULL && o->probe_addr == NULL)
        return 0;
    *srv = serve_start(metrics_addr, o->probe_addr, &src, err, sizeof err);
    if (*srv == NULL) {
        log_field f = {"error", LOG_STR, .v.str = {err, strlen(err)}};
        log_sink_write(&rt->log, LOG_ERROR, "setup", "cannot start the metrics and probe servers", &f, 1);
        return -1;
    }
    if (metrics_addr) {
        log_field f[] = {{"bindAddress", LOG_STR, .v.str = {o->metrics_addr, strlen(o->metrics_addr)}},
                         {"port", LOG_INT, .v.i = serve_metrics_port(*srv)},
                         {"secure", LOG_BOOL, .v.b = 0}};
        log_sink_write(&rt->log, LOG_INFO, "metrics", "Serving metrics server", f, 3);
    }
    if (o->probe_addr) {
        log_field f[] = {{"name", LOG_STR, .v.str = {"health probe", 12}},
                         {"addr", LOG_STR, .v.str = {o->probe_addr, strlen(o->probe_addr)}},
                         {"port", LOG_INT, .v.i = serve_probe_port(*srv)}};
        log_sink_write(&rt->log, LOG_INFO, "setup", "starting server", f, 3);
    }
    return 0;
}

/* --test: luaop.testing.runner.main(paths) on a trusted state with no API
 * server, outside any task (the test kit runs the loop itself, until idle,
 * at each step). Its exit status. */
static int main_test(const flags *o)
{
    runtime *rt = runtime_new();
    lua_State *L = rt ? main_lua(o, rt) : NULL;
    int status = 1;

    if (L == NULL) {
        if (rt == NULL)
            log_write(LOG_ERROR, "setup", "out of memory", NULL, 0);
        runtime_free(rt);
        return 1;
    }
    lua_getglobal(L, "require");
    lua_pushliteral(L, "luaop.testing.runner");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
        lua_getfield(L, -1, "main");
        lua_createtable(L, o->nscripts, 0);
        for (int i = 0; i < o->nscripts; i++) {
            lua_pushstring(L, o->scripts[i]);
            lua_rawseti(L, -2, i + 1);
        }
        lua_createtable(L, 0, 1); /* opts: {timeout = --test-timeout} */
        if (o->test_timeout > 0) {
            lua_pushnumber(L, o->test_timeout);
            lua_setfield(L, -2, "timeout");
        }
        if (lua_pcall(L, 2, 1, 0) == LUA_OK)
            status = (int)lua_tointeger(L, -1);
    }
    if (status != 0 && lua_type(L, -1) == LUA_TSTRING) {
        const char *msg = lua_tostring(L, -1);
        log_field f = {"error", LOG_STR, .v.str = {msg, strlen(msg)}};
        log_write(LOG_ERROR, "test", "luaop --test failed", &f, 1);
    }
    lbind_task_shutdown(rt);
    lbind_fs_shutdown(rt);
    lua_close(L);
    runtime_free(rt);
    return status;
}

/* Wiring: a runtime, its API server, a Lua state running luaop.main,
 * the signals and the watchdog; the loop until luaop.main ends; then
 * everything down again, in order. */
static int main_script(const flags *o)
{
    runtime *rt = runtime_new();
    lua_State *L = NULL;
    main_run run = {.status = 1, .rt = rt};
    serve *srv = NULL;
    int in_cluster = 0;

    if (rt == NULL) {
        log_write(LOG_ERROR, "setup", "out of memory", NULL, 0);
        return 1;
    }
    L = main_lua(o, rt);
    if (L == NULL)
        goto out;
    /* scripts that do not compile are the first thing to say, before a
     * kubeconfig that may be missing too; --check needs no API server */
    if (!o->program && !o->check && main_precheck(L, o, rt) != 0)
        goto out;
    if (!o->check) {
        rt->api = main_connect(o, rt, &in_cluster);
        if (rt->api == NULL)
            goto out;
        if (o->leader_elect && !o->le_namespace && !in_cluster) {
            log_write(LOG_ERROR, "setup", "--leader-elect needs --leader-election-namespace outside a cluster",
                      NULL, 0);
            goto out;
        }
        api_set_metrics(rt->api, rt->metrics);
    }
    if (main_serve(o, rt, &srv) != 0 || main_start(L, o, &run) != 0)
        goto out;
    uv_signal_init(&rt->loop, &run.sigterm);
    uv_signal_init(&rt->loop, &run.sigint);
    run.sigterm.data = run.sigint.data = &run;
    uv_signal_start(&run.sigterm, main_signal, SIGTERM);
    uv_signal_start(&run.sigint, main_signal, SIGINT);
    uv_unref((uv_handle_t *)&run.sigterm); /* signals alone keep nothing running */
    uv_unref((uv_handle_t *)&run.sigint);
    /* scripts are untrusted: a thread watches the loop (watchdog.h) */
    if ((!o->program || o->watchdog) && watchdog_start(rt->sched, o->grace, gcstep_ns) != 0)
        log_write(LOG_ERROR, "setup", "cannot start the watchdog", NULL, 0);
    while (!run.ended && uv_run(&rt->loop, UV_RUN_ONCE))
        ;
    watchdog_stop();
    uv_close((uv_handle_t *)&run.sigterm, NULL);
    uv_close((uv_handle_t *)&run.sigint, NULL);
    if (!run.ended) {
        log_write(LOG_ERROR, "script", "script is waiting for something that can never happen", NULL, 0);
        run.status = 1;
    }
out:
    serve_stop(srv); /* it reads the runtime's registry and scheduler */
    /* Tasks still waiting when the script ends are dropped, as goroutines
     * are when main returns: their timers stop, the Lua state closes (its
     * watches cancel), their requests are cancelled, handles close. */
    lbind_task_shutdown(rt);
    lbind_fs_shutdown(rt);
    if (L)
        lua_close(L);
    api_free(rt->api);
    runtime_free(rt);
    return run.status;
}

int main(int argc, char **argv)
{
    flags o;
    int r = flags_parse(argc, argv, &o);

    if (r != 0)
        return r - 1;
    /* A fixed mmap threshold: response bodies and the large buffers of a
     * LIST get pages of their own, given back when freed, instead of
     * raising glibc's dynamic threshold and fragmenting the heap that the
     * cache's small objects live in (-20% RSS for a 10k-object cache). */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    /* stderr buffered: log_write flushes at the end of each line, so a
     * line is one write, never seen half-written by whoever reads the log */
    setvbuf(stderr, NULL, _IOFBF, 1 << 16);
    log_setup(o.log_format, o.log_level, NULL);
    return o.test ? main_test(&o) : main_script(&o);
}
