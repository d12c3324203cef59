/* main.c - luaop's command line: parse flags and wire the modules.
 *
 * `luaop --script FILE [-- args]` runs a script that defines no controller as
 * a program: top to bottom in a task, against the API server the kubeconfig
 * names, then exits with its status. */
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <uv.h>
#include <yaml.h>

#include "api.h"
#include "kubeconfig.h"
#include "lbind.h"
#include "log.h"
#include "luaembed.h"
#include "sandbox.h"
#include "sched.h"
#include "pattern.h"
#include "str.h"
#include "runtime.h"
#include "serve.h"
#include "watchdog.h"
#include "version.h"

static const char *main_usage =
    "Usage: luaop --script PATH [--script PATH...] [flags]\n"
    "       luaop --program FILE [flags] [-- program arguments]\n"
    "\n"
    "luaop runs Kubernetes operators written in Lua 5.4. Each script returns\n"
    "controller definitions; luaop runs them, each in a sandbox of its own\n"
    "under budgets, until SIGTERM or SIGINT, and reloads a script when its\n"
    "file changes. A program is trusted local Lua (tools, benchmarks, tests):\n"
    "it runs top to bottom with the whole standard library, its return value\n"
    "is the exit status, and controllers it returns run as scripts' do.\n"
    "\n"
    "Flags:\n"
    "      --script PATH        a Lua script, or a directory whose *.lua files are\n"
    "                           each one (a mounted ConfigMap); repeatable\n"
    "      --program FILE       run FILE as a trusted program instead\n"
    "      --watchdog           watch a program's loop as scripts' always is: a\n"
    "                           task that runs 5 s without waiting is interrupted\n"
    "      --kubeconfig FILE    kubeconfig to use (default: $KUBECONFIG, in-cluster,\n"
    "                           then ~/.kube/config)\n"
    "      --context NAME       kubeconfig context (default: current-context)\n"
    "  -n, --namespace NAME     namespace (default: the context's, else default)\n"
    "      --qps N              client-side requests per second; 0 disables (default 20)\n"
    "      --burst N            client-side burst (default 30)\n"
    "      --max-instructions N the most instructions a reconcile may declare\n"
    "                           (more is cut down to it; default 1000000000)\n"
    "      --max-memory BYTES   the most memory a reconcile may declare, as bytes\n"
    "                           or a quantity such as 512Mi (default 1Gi)\n"
    "      --graceful-shutdown-timeout DURATION\n"
    "                           on SIGTERM, how long running reconciles may take\n"
    "                           to finish before luaop exits 1 (default 30s)\n"
    "      --metrics-bind-address ADDRESS\n"
    "                           serve Prometheus metrics at /metrics on ADDRESS\n"
    "                           (:8080, 127.0.0.1:8080, [::1]:8080); 0 is off (default 0)\n"
    "      --health-probe-bind-address ADDRESS\n"
    "                           serve /healthz and /readyz on ADDRESS; 0 is off (default 0)\n"
    "      --leader-elect       run only while holding a Lease (others wait warm:\n"
    "                           caches synced, no reconcile)\n"
    "      --leader-election-id NAME\n"
    "                           the Lease's name (--leader-elect-resource-name)\n"
    "      --leader-election-namespace NAME\n"
    "                           the Lease's namespace (default: the Pod's, in a\n"
    "                           cluster; --leader-elect-resource-namespace)\n"
    "      --leader-elect-lease-duration DURATION   (default 15s)\n"
    "      --leader-elect-renew-deadline DURATION   (default 10s)\n"
    "      --leader-elect-retry-period DURATION     (default 2s)\n"
    "      --log-format FORMAT  text or json (default text)\n"
    "      --log-level LEVEL    error, info, debug, trace, or a number (default info)\n"
    "  -v, --v N                verbosity, as --log-level N\n"
    "  -h, --help               show this help and exit\n"
    "      --version            print the versions of luaop and its libraries, and exit\n";

#define MAIN_MAX_SCRIPTS 64

typedef struct main_opts {
    const char *scripts[MAIN_MAX_SCRIPTS];
    int nscripts;
    const char *program;
    int watchdog; /* --watchdog (scripts: always) */
    const char *kubeconfig, *context, *namespace;
    double qps;
    int burst;
    double grace;
    unsigned long long max_instructions, max_memory;
    const char *metrics_addr, *probe_addr;
    int leader_elect;
    const char *le_id, *le_namespace;
    double le_lease, le_renew, le_retry;
    log_format log_format;
    int log_level;
    int script_argc;
    char **script_argv;
} main_opts;

static void main_print_version(FILE *out)
{
    const curl_version_info_data *curl = curl_version_info(CURLVERSION_NOW);

    fprintf(out, "luaop %s\n", LUAOP_VERSION);
    fprintf(out, "  %s (core %d)\n", LUA_RELEASE, (int)lua_version(NULL));
    fprintf(out, "  libuv %s\n", uv_version_string());
    fprintf(out, "  libcurl %s (%s)\n", curl->version, curl->ssl_version ? curl->ssl_version : "no TLS");
    fprintf(out, "  libyaml %s\n", yaml_get_version_string());
}

static int main_number(const char *flag, const char *s, double *out)
{
    char *end;

    *out = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || *out < 0) {
        fprintf(stderr, "luaop: %s wants a number >= 0, not %s\n", flag, s);
        return -1;
    }
    return 0;
}

/* The leader election flags agree (client-go's rules): 0, or -1 said. */
static int main_check_leader(const main_opts *o)
{
    if (o->le_id == NULL || o->le_id[0] == '\0') {
        fprintf(stderr, "luaop: --leader-elect needs --leader-election-id, the name of the Lease to hold\n");
        return -1;
    }
    if (o->le_lease <= o->le_renew) {
        fprintf(stderr, "luaop: --leader-elect-lease-duration (%gs) must be longer than --leader-elect-renew-deadline (%gs)\n",
                o->le_lease, o->le_renew);
        return -1;
    }
    if (o->le_renew <= o->le_retry * 1.2) {
        fprintf(stderr, "luaop: --leader-elect-renew-deadline (%gs) must be longer than 1.2 times "
                        "--leader-elect-retry-period (%gs)\n", o->le_renew, o->le_retry);
        return -1;
    }
    return 0;
}

/* 0 to run, or an exit status (+1) to return now. */
static int main_parse(int argc, char **argv, main_opts *o)
{
    enum { OPT_VERSION = 0x100, OPT_SCRIPT, OPT_KUBECONFIG, OPT_CONTEXT, OPT_QPS, OPT_BURST,
           OPT_LOG_FORMAT, OPT_LOG_LEVEL, OPT_GRACE, OPT_PROGRAM, OPT_MAX_INSTRUCTIONS, OPT_MAX_MEMORY,
           OPT_WATCHDOG, OPT_METRICS_ADDR, OPT_PROBE_ADDR, OPT_LE, OPT_LE_ID, OPT_LE_NS, OPT_LE_LEASE,
           OPT_LE_RENEW, OPT_LE_RETRY };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"script", required_argument, NULL, OPT_SCRIPT},
        {"program", required_argument, NULL, OPT_PROGRAM},
        {"watchdog", no_argument, NULL, OPT_WATCHDOG},
        {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
        {"context", required_argument, NULL, OPT_CONTEXT},
        {"namespace", required_argument, NULL, 'n'},
        {"qps", required_argument, NULL, OPT_QPS},
        {"burst", required_argument, NULL, OPT_BURST},
        {"graceful-shutdown-timeout", required_argument, NULL, OPT_GRACE},
        {"max-instructions", required_argument, NULL, OPT_MAX_INSTRUCTIONS},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        {"metrics-bind-address", required_argument, NULL, OPT_METRICS_ADDR},
        {"health-probe-bind-address", required_argument, NULL, OPT_PROBE_ADDR},
        {"leader-elect", optional_argument, NULL, OPT_LE},
        {"leader-election-id", required_argument, NULL, OPT_LE_ID},
        {"leader-elect-resource-name", required_argument, NULL, OPT_LE_ID},
        {"leader-election-namespace", required_argument, NULL, OPT_LE_NS},
        {"leader-elect-resource-namespace", required_argument, NULL, OPT_LE_NS},
        {"leader-elect-lease-duration", required_argument, NULL, OPT_LE_LEASE},
        {"leader-elect-renew-deadline", required_argument, NULL, OPT_LE_RENEW},
        {"leader-elect-retry-period", required_argument, NULL, OPT_LE_RETRY},
        {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"v", required_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    double d;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hn:v:", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(main_usage, stdout);
            return 1;
        case OPT_VERSION:
            main_print_version(stdout);
            return 1;
        case OPT_SCRIPT:
            if (o->nscripts == MAIN_MAX_SCRIPTS) {
                fprintf(stderr, "luaop: at most %d --script flags (name a directory instead)\n", MAIN_MAX_SCRIPTS);
                return 3;
            }
            o->scripts[o->nscripts++] = optarg;
            break;
        case OPT_PROGRAM:
            if (o->program) {
                fprintf(stderr, "luaop: one --program at a time\n");
                return 3;
            }
            o->program = optarg;
            break;
        case OPT_WATCHDOG:
            o->watchdog = 1;
            break;
        case OPT_KUBECONFIG:
            o->kubeconfig = optarg;
            break;
        case OPT_CONTEXT:
            o->context = optarg;
            break;
        case 'n':
            o->namespace = optarg;
            break;
        case OPT_QPS:
            if (main_number("--qps", optarg, &o->qps) != 0)
                return 3;
            break;
        case OPT_BURST:
            if (main_number("--burst", optarg, &d) != 0)
                return 3;
            o->burst = (int)d;
            break;
        case OPT_MAX_INSTRUCTIONS:
        case OPT_MAX_MEMORY: {
            unsigned long long v;
            const char *flag = c == OPT_MAX_INSTRUCTIONS ? "--max-instructions" : "--max-memory";
            /* instructions: a plain count; memory: bytes or a quantity */
            if ((c == OPT_MAX_INSTRUCTIONS && strspn(optarg, "0123456789") != strlen(optarg)) ||
                str_parse_bytes(optarg, &v) != 0 || v > (1ull << 62)) {
                fprintf(stderr, "luaop: %s wants %s, not %s\n", flag,
                        c == OPT_MAX_INSTRUCTIONS ? "a whole number >= 1" : "bytes or a quantity such as 512Mi",
                        optarg);
                return 3;
            }
            if (c == OPT_MAX_INSTRUCTIONS)
                o->max_instructions = v;
            else
                o->max_memory = v;
            break;
        }
        case OPT_GRACE:
            if (str_parse_duration(optarg, &o->grace) != 0) {
                fprintf(stderr, "luaop: --graceful-shutdown-timeout wants a duration such as 30s or 1m, not %s\n",
                        optarg);
                return 3;
            }
            break;
        case OPT_METRICS_ADDR:
        case OPT_PROBE_ADDR: {
            char host[256], port[8], err[200];
            int off;
            if (serve_parse_address(optarg, &off, host, sizeof host, port, sizeof port, err, sizeof err) != 0) {
                fprintf(stderr, "luaop: %s: %s\n", c == OPT_METRICS_ADDR ? "--metrics-bind-address"
                                                                          : "--health-probe-bind-address", err);
                return 3;
            }
            *(c == OPT_METRICS_ADDR ? &o->metrics_addr : &o->probe_addr) = off ? NULL : optarg;
            break;
        }
        case OPT_LE:
            if (optarg == NULL || strcmp(optarg, "true") == 0 || strcmp(optarg, "1") == 0) {
                o->leader_elect = 1;
            } else if (strcmp(optarg, "false") == 0 || strcmp(optarg, "0") == 0) {
                o->leader_elect = 0;
            } else {
                fprintf(stderr, "luaop: --leader-elect is true or false, not %s\n", optarg);
                return 3;
            }
            break;
        case OPT_LE_ID:
            o->le_id = optarg;
            break;
        case OPT_LE_NS:
            o->le_namespace = optarg;
            break;
        case OPT_LE_LEASE:
        case OPT_LE_RENEW:
        case OPT_LE_RETRY: {
            double *dur = c == OPT_LE_LEASE ? &o->le_lease : c == OPT_LE_RENEW ? &o->le_renew : &o->le_retry;
            if (str_parse_duration(optarg, dur) != 0 || *dur <= 0) {
                fprintf(stderr, "luaop: %s wants a duration above 0 such as 15s or 500ms, not %s\n",
                        c == OPT_LE_LEASE   ? "--leader-elect-lease-duration"
                        : c == OPT_LE_RENEW ? "--leader-elect-renew-deadline"
                                            : "--leader-elect-retry-period",
                        optarg);
                return 3;
            }
            break;
        }
        case OPT_LOG_FORMAT:
            if (log_parse_format(optarg, &o->log_format) != 0) {
                fprintf(stderr, "luaop: --log-format must be text or json, not %s\n", optarg);
                return 3;
            }
            break;
        case OPT_LOG_LEVEL:
        case 'v':
            if (log_parse_level(optarg, &o->log_level) != 0) {
                fprintf(stderr, "luaop: %s must be error, info, debug, trace or a number, not %s\n",
                        c == 'v' ? "-v" : "--log-level", optarg);
                return 3;
            }
            break;
        case ':':
            fprintf(stderr, "luaop: flag %s needs a value\n", argv[optind - 1]);
            return 3;
        default:
            fprintf(stderr, "luaop: unknown flag %s\nRun 'luaop --help' for usage.\n", argv[optind - 1]);
            return 3;
        }
    }
    /* Arguments after the flags (or after --) are the program's. */
    o->script_argc = argc - optind;
    o->script_argv = argv + optind;
    if (o->leader_elect && main_check_leader(o) != 0)
        return 3;
    if (o->program && o->nscripts > 0) {
        fprintf(stderr, "luaop: --program runs one trusted file: not with --script\n");
        return 3;
    }
    if (o->script_argc > 0 && !o->program) {
        fprintf(stderr, "luaop: unexpected argument %s%s\nRun 'luaop --help' for usage.\n", o->script_argv[0],
                o->nscripts ? " (arguments after -- are for a --program)" : "");
        return 3;
    }
    if (o->nscripts == 0 && !o->program) {
        fputs(main_usage, stderr);
        return 3;
    }
    return 0;
}

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
static api *main_connect(const main_opts *o, runtime *rt, int *in_cluster)
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
static lua_State *main_lua(const main_opts *o, runtime *rt)
{
    lua_State *L = luaL_newstate();

    if (L == NULL) {
        log_write(LOG_ERROR, "setup", "cannot create a Lua state", NULL, 0);
        return NULL;
    }
    rt->scripts = !o->program;
    if (runtime_attach(rt, L) != 0) {
        log_write(LOG_ERROR, "setup", "out of memory", NULL, 0);
        lua_close(L);
        return NULL;
    }
    luaL_openlibs(L); /* its string library's pattern matching is budgeted (pattern.h) */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_luaop_core);
    lua_setfield(L, -2, "luaop.core");
    lua_pop(L, 1);
    luaembed_preload(L);
    if (!o->program)
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

/* Push options.identity, this process's name as the leader election's
 * holder and its Events' reportingInstance, as controller-runtime makes
 * it: the host name, "_", a random suffix; and, with --leader-elect,
 * options.leader: the Lease (namespace: the flag's, else the in-cluster
 * one) and its durations. */
static int main_identity(lua_State *L, const main_opts *o)
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
    if (!o->leader_elect)
        return 0;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, o->le_namespace ? o->le_namespace : api_namespace(runtime_of(L)->api));
    lua_setfield(L, -2, "namespace");
    lua_pushstring(L, o->le_id);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, id);
    lua_setfield(L, -2, "identity");
    lua_pushnumber(L, o->le_lease);
    lua_setfield(L, -2, "lease_duration");
    lua_pushnumber(L, o->le_renew);
    lua_setfield(L, -2, "renew_deadline");
    lua_pushnumber(L, o->le_retry);
    lua_setfield(L, -2, "retry_period");
    lua_setfield(L, -2, "leader");
    return 0;
}

/* Start luaop.main(options, program arguments...) as a task: it loads the
 * scripts (text only, each in its own environment) and runs them, as a
 * program or as the controllers they return. 0, or -1 after logging. */
static int main_start(lua_State *L, const main_opts *o, main_run *run)
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
    for (int i = 0; i < o->script_argc; i++)
        lua_pushstring(L, o->script_argv[i]);
    if (sched_spawn(L, o->script_argc + 1, main_done, run) == NULL) {
        log_write(LOG_ERROR, "setup", "out of memory", NULL, 0);
        return -1;
    }
    return 0;
}

/* The metrics and probe servers the flags ask for, reading rt (serve.h).
 * 0, or -1 after logging why not (an address in use). */
static int main_serve(const main_opts *o, runtime *rt, serve **srv)
{
    serve_source src = {.metrics = rt->metrics, .sched = rt->sched, .ready = &rt->ready};
    char err[300];

    if (o->metrics_addr == NULL && o->probe_addr == NULL)
        return 0;
    *srv = serve_start(o->metrics_addr, o->probe_addr, &src, err, sizeof err);
    if (*srv == NULL) {
        log_field f = {"error", LOG_STR, .v.str = {err, strlen(err)}};
        log_sink_write(&rt->log, LOG_ERROR, "setup", "cannot start the metrics and probe servers", &f, 1);
        return -1;
    }
    if (o->metrics_addr) {
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

/* Wiring: a runtime, its API server, a Lua state running luaop.main,
 * the signals and the watchdog; the loop until luaop.main ends; then
 * everything down again, in order. */
static int main_script(const main_opts *o)
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
    rt->api = main_connect(o, rt, &in_cluster);
    if (rt->api == NULL) {
        runtime_free(rt);
        return 1;
    }
    if (o->leader_elect && !o->le_namespace && !in_cluster) {
        log_write(LOG_ERROR, "setup", "--leader-elect needs --leader-election-namespace outside a cluster", NULL, 0);
        api_free(rt->api);
        runtime_free(rt);
        return 1;
    }
    api_set_metrics(rt->api, rt->metrics);
    L = main_lua(o, rt);
    if (L == NULL || main_serve(o, rt, &srv) != 0 || main_start(L, o, &run) != 0)
        goto out;
    uv_signal_init(&rt->loop, &run.sigterm);
    uv_signal_init(&rt->loop, &run.sigint);
    run.sigterm.data = run.sigint.data = &run;
    uv_signal_start(&run.sigterm, main_signal, SIGTERM);
    uv_signal_start(&run.sigint, main_signal, SIGINT);
    uv_unref((uv_handle_t *)&run.sigterm); /* signals alone keep nothing running */
    uv_unref((uv_handle_t *)&run.sigint);
    /* scripts are untrusted: a thread watches the loop (watchdog.h) */
    if ((!o->program || o->watchdog) && watchdog_start(rt->sched, o->grace) != 0)
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
    main_opts o = {.qps = 20, .burst = 30, .grace = 30, .log_format = LOG_FORMAT_TEXT, .log_level = LOG_INFO,
                   .le_lease = 15, .le_renew = 10, .le_retry = 2};
    int r = main_parse(argc, argv, &o);

    if (r != 0)
        return r - 1;
    /* A fixed mmap threshold: response bodies and the large buffers of a
     * LIST get pages of their own, given back when freed, instead of
     * raising glibc's dynamic threshold and fragmenting the heap that the
     * cache's small objects live in (-20% RSS for a 10k-object cache). */
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
#endif
    /* stderr buffered: log_write flushes at the end of each line, so a
     * line is one write, never seen half-written by whoever reads the log */
    setvbuf(stderr, NULL, _IOFBF, 1 << 16);
    log_setup(o.log_format, o.log_level, NULL);
    return main_script(&o);
}
