/* flags.c - luaop's command line (see flags.h). */
#include "flags.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <lua.h>
#include <uv.h>
#include <yaml.h>

#include "serve.h"
#include "str.h"
#include "version.h"

static const char *flags_usage =
    "Usage: luaop --script PATH [--script PATH...] [flags]\n"
    "       luaop --program FILE [flags] [-- program arguments]\n"
    "       luaop --check PATH...\n"
    "       luaop --test FILE|DIR...\n"
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
    "                           each one (a mounted ConfigMap); repeatable.\n"
    "                           NAME.lib.lua beside a script is no script: it is\n"
    "                           the module the script gets with require \"NAME\"\n"
    "      --program FILE       run FILE as a trusted program instead\n"
    "      --check              check the scripts the arguments name (files or\n"
    "                           directories), with no cluster: syntax, unknown\n"
    "                           globals, controller definitions; prints\n"
    "                           file:line: message and exits 1 on any finding\n"
    "      --crds PATH          with --check: CustomResourceDefinitions (a YAML file\n"
    "                           or a directory of them) whose kinds the scripts may\n"
    "                           name; repeatable (default: manifests/ beside them)\n"
    "      --test               run the spec files the arguments name (files, or\n"
    "                           directories of *_spec.lua and *_test.lua) with the\n"
    "                           test kit (luaop.testing), no cluster; prints TAP and\n"
    "                           N passed, N failed; exits 1 on any failure\n"
    "      --test-timeout DUR   with --test: each test's wall deadline, such as 30s\n"
    "                           or 2m (default 30s, or $LUAOP_TEST_TIMEOUT seconds)\n"
    "      --watchdog           watch a program's loop as scripts' always is: a\n"
    "                           task that runs 5 s without waiting is interrupted\n"
    "      --kubeconfig FILE    kubeconfig to use (default: $KUBECONFIG, in-cluster,\n"
    "                           then ~/.kube/config)\n"
    "      --context NAME       kubeconfig context (default: current-context)\n"
    "  -n, --namespace NAME     namespace (default: the context's, else default)\n"
    "      --qps N              client-side requests per second; 0 (the default) means no limit\n"
    "      --burst N            client-side burst when --qps is set (default 30)\n"
    "      --max-instructions N the most instructions a reconcile may declare\n"
    "                           (more is cut down to it; default 1000000000)\n"
    "      --max-memory BYTES   the most memory a reconcile may declare, as bytes\n"
    "                           or a quantity such as 512Mi (default 1Gi)\n"
    "      --max-tasks N        the most tasks a script may have live at once: its\n"
    "                           reconciles and what they spawn (default 1000)\n"
    "      --graceful-shutdown-timeout DURATION\n"
    "                           on SIGTERM, how long running reconciles may take\n"
    "                           to finish before luaop exits 1 (default 30s)\n"
    "      --metrics-bind-address ADDRESS\n"
    "                           serve Prometheus metrics at /metrics on ADDRESS\n"
    "                           (:8080, 127.0.0.1:8080, [::1]:8080); 0 is off (default 0)\n"
    "      --health-probe-bind-address ADDRESS\n"
    "                           serve /healthz and /readyz on ADDRESS; 0 is off (default 0)\n"
    "      --webhook-bind-address ADDRESS\n"
    "                           serve the scripts' admission and conversion webhooks\n"
    "                           over HTTPS on ADDRESS, once a script defines one;\n"
    "                           0 is off (default :9443)\n"
    "      --webhook-cert-path DIR\n"
    "                           the directory of the webhook's certificate and key\n"
    "                           (default /tmp/k8s-webhook-server/serving-certs, as\n"
    "                           controller-runtime's); read again when they change\n"
    "      --webhook-cert-name NAME  its certificate file (default tls.crt)\n"
    "      --webhook-cert-key NAME   its key file (default tls.key)\n"
    "      --enable-http2[=BOOL] HTTP/2 for the webhook server: only false (the\n"
    "                           default; luaop's server speaks HTTP/1.1)\n"
    "      --metrics-secure     serve /metrics over HTTPS, to authenticated and\n"
    "                           authorized clients only\n"
    "      --metrics-cert-path DIR   the directory of its certificate and key\n"
    "      --metrics-cert-name NAME  its certificate file (default tls.crt)\n"
    "      --metrics-cert-key NAME   its key file (default tls.key)\n"
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
    "      --shard-ring NAME    share the work with the other replicas of ring\n"
    "                           NAME, each reconciling the keys of its part of\n"
    "                           the hash space (a Lease each; the durations\n"
    "                           above; not with --leader-elect)\n"
    "      --shard-namespace NAME\n"
    "                           the ring's Leases' namespace (default: as\n"
    "                           --leader-election-namespace's)\n"
    "      --log-format FORMAT  text or json (default text)\n"
    "      --log-level LEVEL    error, info, debug, trace, or a number (default info)\n"
    "  -v, --v N                verbosity, as --log-level N\n"
    "  -h, --help               show this help and exit\n"
    "      --version            print the versions of luaop and its libraries, and exit\n";



static void flags_print_version(FILE *out)
{
    const curl_version_info_data *curl = curl_version_info(CURLVERSION_NOW);

    fprintf(out, "luaop %s\n", LUAOP_VERSION);
    fprintf(out, "  %s (core %d)\n", LUA_RELEASE, (int)lua_version(NULL));
    fprintf(out, "  libuv %s\n", uv_version_string());
    fprintf(out, "  libcurl %s (%s)\n", curl->version, curl->ssl_version ? curl->ssl_version : "no TLS");
    fprintf(out, "  libyaml %s\n", yaml_get_version_string());
    fprintf(out, "  libevent %s (the webhook server)\n", event_get_version());
}

static int flags_number(const char *flag, const char *s, double *out)
{
    char *end;

    *out = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || *out < 0) {
        fprintf(stderr, "luaop: %s wants a number >= 0, not %s\n", flag, s);
        return -1;
    }
    return 0;
}

/* A boolean flag's value (none: true), as Go's flag package takes one. */
static int flags_bool(const char *flag, const char *s, int *out)
{
    if (s == NULL || strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
        *out = 1;
    else if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
        *out = 0;
    else {
        fprintf(stderr, "luaop: %s is true or false, not %s\n", flag, s);
        return -1;
    }
    return 0;
}

/* The leader election flags agree (client-go's rules): 0, or -1 said. */
static int flags_check_leader(const flags *o)
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

/* The sharding flags: a ring name that can begin a Lease's name, the
 * durations as leader election's, and not with --leader-elect (one
 * active replica or many). 0, or -1 said. */
static int flags_check_shard(const flags *o)
{
    size_t n = strlen(o->shard_ring), i;

    if (n == 0 || n > 63 || !isalnum((unsigned char)o->shard_ring[0]) ||
        !isalnum((unsigned char)o->shard_ring[n - 1])) {
        fprintf(stderr, "luaop: --shard-ring must be a name of 1 to 63 lower-case letters, digits and '-', "
                        "starting and ending with a letter or digit (a label value), not '%s'\n", o->shard_ring);
        return -1;
    }
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)o->shard_ring[i];
        if (!(islower(c) || isdigit(c) || c == '-')) {
            fprintf(stderr, "luaop: --shard-ring must be a name of lower-case letters, digits and '-', not '%s'\n",
                    o->shard_ring);
            return -1;
        }
    }
    if (o->leader_elect) {
        fprintf(stderr, "luaop: --shard-ring and --leader-elect: one or the other (a sharded replica reconciles "
                        "its ranges; an elected one everything)\n");
        return -1;
    }
    if (o->le_lease <= o->le_renew || o->le_renew <= o->le_retry * 1.2) {
        fprintf(stderr, "luaop: the shard ring's leases take --leader-elect-lease-duration (%gs) > "
                        "--leader-elect-renew-deadline (%gs) > 1.2 times --leader-elect-retry-period (%gs)\n",
                o->le_lease, o->le_renew, o->le_retry);
        return -1;
    }
    return 0;
}

/* 0 to run, or an exit status (+1) to return now. */
int flags_parse(int argc, char **argv, flags *o)
{
    enum { OPT_VERSION = 0x100, OPT_SCRIPT, OPT_KUBECONFIG, OPT_CONTEXT, OPT_QPS, OPT_BURST,
           OPT_LOG_FORMAT, OPT_LOG_LEVEL, OPT_GRACE, OPT_PROGRAM, OPT_MAX_INSTRUCTIONS, OPT_MAX_MEMORY,
           OPT_MAX_TASKS, OPT_WATCHDOG, OPT_METRICS_ADDR, OPT_PROBE_ADDR, OPT_LE, OPT_LE_ID, OPT_LE_NS, OPT_LE_LEASE,
           OPT_LE_RENEW, OPT_LE_RETRY, OPT_CHECK, OPT_TEST, OPT_CRDS,
           OPT_TEST_TIMEOUT, OPT_WEBHOOK_ADDR, OPT_WEBHOOK_CERT_PATH, OPT_WEBHOOK_CERT_NAME,
           OPT_WEBHOOK_CERT_KEY, OPT_HTTP2, OPT_METRICS_SECURE, OPT_METRICS_CERT_PATH, OPT_METRICS_CERT_NAME,
           OPT_METRICS_CERT_KEY, OPT_SHARD_RING, OPT_SHARD_NS };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"script", required_argument, NULL, OPT_SCRIPT},
        {"program", required_argument, NULL, OPT_PROGRAM},
        {"check", no_argument, NULL, OPT_CHECK},
        {"crds", required_argument, NULL, OPT_CRDS},
        {"test", no_argument, NULL, OPT_TEST},
        {"test-timeout", required_argument, NULL, OPT_TEST_TIMEOUT},
        {"watchdog", no_argument, NULL, OPT_WATCHDOG},
        {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
        {"context", required_argument, NULL, OPT_CONTEXT},
        {"namespace", required_argument, NULL, 'n'},
        {"qps", required_argument, NULL, OPT_QPS},
        {"burst", required_argument, NULL, OPT_BURST},
        {"graceful-shutdown-timeout", required_argument, NULL, OPT_GRACE},
        {"max-instructions", required_argument, NULL, OPT_MAX_INSTRUCTIONS},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        {"max-tasks", required_argument, NULL, OPT_MAX_TASKS},
        {"metrics-bind-address", required_argument, NULL, OPT_METRICS_ADDR},
        {"health-probe-bind-address", required_argument, NULL, OPT_PROBE_ADDR},
        {"webhook-bind-address", required_argument, NULL, OPT_WEBHOOK_ADDR},
        {"webhook-cert-path", required_argument, NULL, OPT_WEBHOOK_CERT_PATH},
        {"webhook-cert-name", required_argument, NULL, OPT_WEBHOOK_CERT_NAME},
        {"webhook-cert-key", required_argument, NULL, OPT_WEBHOOK_CERT_KEY},
        {"enable-http2", optional_argument, NULL, OPT_HTTP2},
        {"metrics-secure", optional_argument, NULL, OPT_METRICS_SECURE},
        {"metrics-cert-path", required_argument, NULL, OPT_METRICS_CERT_PATH},
        {"metrics-cert-name", required_argument, NULL, OPT_METRICS_CERT_NAME},
        {"metrics-cert-key", required_argument, NULL, OPT_METRICS_CERT_KEY},
        {"leader-elect", optional_argument, NULL, OPT_LE},
        {"leader-election-id", required_argument, NULL, OPT_LE_ID},
        {"leader-elect-resource-name", required_argument, NULL, OPT_LE_ID},
        {"leader-election-namespace", required_argument, NULL, OPT_LE_NS},
        {"leader-elect-resource-namespace", required_argument, NULL, OPT_LE_NS},
        {"shard-ring", required_argument, NULL, OPT_SHARD_RING},
        {"shard-namespace", required_argument, NULL, OPT_SHARD_NS},
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

    *o = (flags){.qps = 0, .burst = 30, .grace = 30, .log_format = LOG_FORMAT_TEXT, .log_level = LOG_INFO,
                 .le_lease = 15, .le_renew = 10, .le_retry = 2, .webhook_addr = ":9443",
                 .webhook_cert_path = FLAGS_WEBHOOK_CERT_DIR, .webhook_cert_name = "tls.crt",
                 .webhook_cert_key = "tls.key", .metrics_cert_name = "tls.crt", .metrics_cert_key = "tls.key"};
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hn:v:", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(flags_usage, stdout);
            return 1;
        case OPT_VERSION:
            flags_print_version(stdout);
            return 1;
        case OPT_SCRIPT:
            if (o->nscripts == FLAGS_MAX_SCRIPTS) {
                fprintf(stderr, "luaop: at most %d --script flags (name a directory instead)\n", FLAGS_MAX_SCRIPTS);
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
        case OPT_CHECK:
            o->check = 1;
            break;
        case OPT_TEST:
            o->test = 1;
            break;
        case OPT_TEST_TIMEOUT:
            if (str_parse_duration(optarg, &o->test_timeout) != 0 || o->test_timeout <= 0) {
                fprintf(stderr, "luaop: --test-timeout wants a duration above 0 such as 30s or 2m, not %s\n", optarg);
                return 3;
            }
            break;
        case OPT_CRDS:
            if (o->ncrds == FLAGS_MAX_SCRIPTS) {
                fprintf(stderr, "luaop: at most %d --crds flags (name a directory instead)\n", FLAGS_MAX_SCRIPTS);
                return 3;
            }
            o->crds[o->ncrds++] = optarg;
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
            if (flags_number("--qps", optarg, &o->qps) != 0)
                return 3;
            break;
        case OPT_BURST:
            if (flags_number("--burst", optarg, &d) != 0)
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
        case OPT_MAX_TASKS: {
            char *end;
            unsigned long v;
            errno = 0;
            v = strtoul(optarg, &end, 10);
            if (!isdigit((unsigned char)optarg[0]) || *end != '\0' || errno || v < 1 || v > 1000000) {
                fprintf(stderr, "luaop: --max-tasks wants a whole number from 1 to 1000000, not %s\n", optarg);
                return 3;
            }
            o->max_tasks = (unsigned)v;
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
        case OPT_WEBHOOK_ADDR: {
            char host[256], port[8], err[200];
            int off;
            if (serve_parse_address(optarg, &off, host, sizeof host, port, sizeof port, err, sizeof err) != 0) {
                fprintf(stderr, "luaop: --webhook-bind-address: %s\n", err);
                return 3;
            }
            o->webhook_addr = off ? NULL : optarg;
            break;
        }
        case OPT_WEBHOOK_CERT_PATH:
        case OPT_WEBHOOK_CERT_NAME:
        case OPT_WEBHOOK_CERT_KEY:
        case OPT_METRICS_CERT_PATH:
        case OPT_METRICS_CERT_NAME:
        case OPT_METRICS_CERT_KEY: {
            const char **to = c == OPT_WEBHOOK_CERT_PATH   ? &o->webhook_cert_path
                              : c == OPT_WEBHOOK_CERT_NAME ? &o->webhook_cert_name
                              : c == OPT_WEBHOOK_CERT_KEY  ? &o->webhook_cert_key
                              : c == OPT_METRICS_CERT_PATH ? &o->metrics_cert_path
                              : c == OPT_METRICS_CERT_NAME ? &o->metrics_cert_name
                                                           : &o->metrics_cert_key;
            if (optarg[0] == '\0') {
                static const char *const names[] = {"--webhook-cert-path", "--webhook-cert-name",
                                                    "--webhook-cert-key", "--metrics-cert-path",
                                                    "--metrics-cert-name", "--metrics-cert-key"};
                int i = c == OPT_WEBHOOK_CERT_PATH   ? 0
                        : c == OPT_WEBHOOK_CERT_NAME ? 1
                        : c == OPT_WEBHOOK_CERT_KEY  ? 2
                        : c == OPT_METRICS_CERT_PATH ? 3
                        : c == OPT_METRICS_CERT_NAME ? 4
                                                     : 5;
                fprintf(stderr, "luaop: %s wants a %s, not an empty string\n", names[i],
                        i == 0 || i == 3 ? "directory" : "file name");
                return 3;
            }
            *to = optarg;
            break;
        }
        case OPT_HTTP2:
        case OPT_METRICS_SECURE: {
            int on;
            const char *flag = c == OPT_HTTP2 ? "--enable-http2" : "--metrics-secure";
            if (flags_bool(flag, optarg, &on) != 0)
                return 3;
            if (c == OPT_HTTP2 && on) {
                fprintf(stderr, "luaop: --enable-http2=true: luaop's HTTPS server speaks HTTP/1.1 only (libevent's "
                                "evhttp has no HTTP/2); leave it false, as kubebuilder's scaffold does\n");
                return 3;
            }
            if (c == OPT_METRICS_SECURE)
                o->metrics_secure = on;
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
        case OPT_SHARD_RING:
            o->shard_ring = optarg;
            break;
        case OPT_SHARD_NS:
            o->shard_namespace = optarg;
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
    if (o->leader_elect && flags_check_leader(o) != 0)
        return 3;
    if (o->shard_ring && flags_check_shard(o) != 0)
        return 3;
    if (o->program && o->nscripts > 0) {
        fprintf(stderr, "luaop: --program runs one trusted file: not with --script\n");
        return 3;
    }
    if (o->ncrds > 0 && !o->check) {
        fprintf(stderr, "luaop: --crds tells --check of CRDs: only with --check\n");
        return 3;
    }
    if (o->check && o->test) {
        fprintf(stderr, "luaop: --check or --test, not both\n");
        return 3;
    }
    if (o->test_timeout > 0 && !o->test) {
        fprintf(stderr, "luaop: --test-timeout is for --test\n");
        return 3;
    }
    if (o->check || o->test) {
        const char *what = o->check ? "--check" : "--test";
        if (o->program) {
            fprintf(stderr, "luaop: %s %s: not with --program\n", what, o->check ? "checks scripts" : "runs specs");
            return 3;
        }
        for (int i = 0; i < o->script_argc; i++) {
            if (o->nscripts == FLAGS_MAX_SCRIPTS) {
                fprintf(stderr, "luaop: at most %d paths (name a directory instead)\n", FLAGS_MAX_SCRIPTS);
                return 3;
            }
            o->scripts[o->nscripts++] = o->script_argv[i];
        }
        o->script_argc = 0;
        if (o->nscripts == 0) {
            fprintf(stderr, "luaop: %s needs a %s or a directory\n", what, o->check ? "script" : "spec file");
            return 3;
        }
        return 0;
    }
    if (o->script_argc > 0 && !o->program) {
        fprintf(stderr, "luaop: unexpected argument %s%s\nRun 'luaop --help' for usage.\n", o->script_argv[0],
                o->nscripts ? " (arguments after -- are for a --program)" : "");
        return 3;
    }
    if (o->nscripts == 0 && !o->program) {
        fputs(flags_usage, stderr);
        return 3;
    }
    return 0;
}

