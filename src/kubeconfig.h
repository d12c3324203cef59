/* kubeconfig.h - where the API server is and who we are to it, resolved as
 * controller-runtime's GetConfig does:
 *
 *   1. --kubeconfig FILE (that file only);
 *   2. KUBECONFIG, colon-separated files merged as kubectl merges them (the
 *      first file to name a cluster, user or context wins, and the first to
 *      set current-context; files that do not exist are skipped);
 *   3. in-cluster: KUBERNETES_SERVICE_HOST/PORT and the service account's
 *      token, ca.crt and namespace files;
 *   4. ~/.kube/config.
 *
 * The context is --context or current-context; the namespace --namespace,
 * the context's, or "default". Relative paths in a file resolve against that
 * file's directory. Errors name the file, the line and the field. */
#ifndef LUAOP_KUBECONFIG_H
#define LUAOP_KUBECONFIG_H

#include <stddef.h>

typedef struct kubeconfig_exec {
    char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
    char *command;
    char **args;
    size_t nargs;
    char **env; /* nenv pairs: env[2*i] name, env[2*i+1] value */
    size_t nenv;
    char *interactive_mode;
    int provide_cluster_info;
} kubeconfig_exec;

typedef struct kubeconfig_bytes {
    unsigned char *data; /* NUL-terminated; NULL when absent */
    size_t len;
} kubeconfig_bytes;

typedef struct kubeconfig {
    char *source; /* the file the context came from, or "in-cluster" */
    int in_cluster;
    char *context;
    char *cluster_name;
    char *user_name;
    char *namespace;

    char *server;
    char *ca_file;
    kubeconfig_bytes ca_data;
    int insecure;
    char *tls_server_name;
    char *proxy_url;

    char *cert_file;
    kubeconfig_bytes cert_data;
    char *key_file;
    kubeconfig_bytes key_data;
    char *token;
    char *token_file;
    char *username;
    char *password;
    kubeconfig_exec *exec;
} kubeconfig;

/* Inputs, so that callers (and specs) choose the environment. */
typedef struct kubeconfig_opts {
    const char *kubeconfig;     /* --kubeconfig */
    const char *context;        /* --context */
    const char *namespace;      /* --namespace */
    const char *env_kubeconfig; /* $KUBECONFIG */
    const char *home;           /* $HOME */
    const char *service_host;   /* $KUBERNETES_SERVICE_HOST */
    const char *service_port;   /* $KUBERNETES_SERVICE_PORT */
    const char *sa_dir;         /* NULL: /var/run/secrets/kubernetes.io/serviceaccount */
} kubeconfig_opts;

#define KUBECONFIG_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* Resolve a configuration. 0 and *out on success; -1 and a message in err. */
int kubeconfig_load(const kubeconfig_opts *o, kubeconfig **out, char *err, size_t errlen);

void kubeconfig_free(kubeconfig *kc);

#endif
