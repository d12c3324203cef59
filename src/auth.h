/* auth.h - bearer credentials for the API server, kept fresh.
 *
 * A static token; a token file (bound service account tokens rotate: it is
 * re-read at least every AUTH_TOKEN_FILE_TTL seconds and after a 401); or an
 * exec credential plugin (client.authentication.k8s.io/v1 or v1beta1), run
 * without blocking the loop, whose token is reused until its
 * expirationTimestamp or a 401. Tokens never reach a log. */
#ifndef LUAOP_AUTH_H
#define LUAOP_AUTH_H

#include <uv.h>

#include "kubeconfig.h"
#include "log.h"

#define AUTH_TOKEN_FILE_TTL 60
/* A token file larger than this is refused (a service account token is
 * about 1 KiB). */
#define AUTH_TOKEN_FILE_MAX 65536
/* An exec plugin: luaop logs that it waits on one after AUTH_EXEC_WARN
 * seconds and kills it after AUTH_EXEC_TIMEOUT, failing the requests that
 * wait for a credential with an error naming it. */
#define AUTH_EXEC_WARN 2
#define AUTH_EXEC_TIMEOUT 10

typedef struct auth auth;

/* bearer is NULL when this user has no bearer credential (client
 * certificates, basic auth, anonymous); err is set when getting it failed. */
typedef void (*auth_cb)(const char *bearer, const char *err, void *ud);

/* NULL when out of memory. Lines about a slow plugin go to log. */
auth *auth_new(uv_loop_t *loop, const kubeconfig *kc, const log_sink *log);

/* Call cb with the current bearer token, now or once a plugin has run. */
void auth_get(auth *a, auth_cb cb, void *ud);

/* Which credential is current: it changes each time a new one is got. */
unsigned auth_generation(const auth *a);

/* The server said 401 to a request sent with credential `generation`: get a
 * new one next time, unless a newer one came meanwhile. */
void auth_invalidate(auth *a, unsigned generation);

/* Whether a 401 is worth one retry with a fresh credential. */
int auth_refreshable(const auth *a);

/* How often an exec plugin has run (for specs of credential reuse). */
unsigned auth_exec_runs(const auth *a);

void auth_free(auth *a);

#endif
