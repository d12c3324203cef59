/* flags.h - luaop's command line, as controller-runtime users know it
 * (--kubeconfig, --metrics-bind-address, --leader-elect, ...), parsed into
 * one struct; `luaop --help` lists every flag. */
#ifndef LUAOP_FLAGS_H
#define LUAOP_FLAGS_H

#include "log.h"

#define FLAGS_MAX_SCRIPTS 64
/* controller-runtime's webhook.Options CertDir default */
#define FLAGS_WEBHOOK_CERT_DIR "/tmp/k8s-webhook-server/serving-certs"

typedef struct flags {
    const char *scripts[FLAGS_MAX_SCRIPTS];
    int nscripts;
    const char *program;
    int check; /* --check: the paths are the arguments (and --script's) */
    int test;  /* --test: the same, spec files run with the test kit */
    double test_timeout; /* --test-timeout: each test's wall deadline in seconds (0: the default) */
    const char *crds[FLAGS_MAX_SCRIPTS]; /* --crds: where --check finds CRDs */
    int ncrds;
    int watchdog; /* --watchdog (scripts: always) */
    const char *kubeconfig, *context, *namespace;
    double qps;
    int burst;
    double grace;
    unsigned long long max_instructions, max_memory;
    unsigned max_tasks; /* 0: the default */
    const char *metrics_addr, *probe_addr;
    /* the webhook server (NULL address: off) and its certificate files,
     * as kubebuilder v4's scaffold names the flags; secure metrics' */
    const char *webhook_addr, *webhook_cert_path, *webhook_cert_name, *webhook_cert_key;
    int metrics_secure;
    const char *metrics_cert_path, *metrics_cert_name, *metrics_cert_key;
    int leader_elect;
    const char *le_id, *le_namespace;
    /* --shard-ring, --shard-namespace: sharding (docs/sharding.md) */
    const char *shard_ring, *shard_namespace;
    double le_lease, le_renew, le_retry;
    log_format log_format;
    int log_level;
    int script_argc;
    char **script_argv;
} flags;

/* Parse argv into *o, defaults first. 0 to run; otherwise the exit status
 * plus one, to return at once (--help and --version: 1; a bad flag, said
 * on stderr: 3). */
int flags_parse(int argc, char **argv, flags *o);

#endif
