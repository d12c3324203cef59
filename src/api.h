/* api.h - requests to one API server: its URL, TLS, rate limit and
 * credentials from a resolved kubeconfig. A 401 with a credential that can
 * be renewed (token file, exec plugin) is retried once with a fresh one. */
#ifndef LUAOP_API_H
#define LUAOP_API_H

#include <stdint.h>

#include <uv.h>

#include "http.h"
#include "kubeconfig.h"
#include "log.h"
#include "shard.h"

typedef struct api api;
typedef struct api_call api_call;

typedef struct api_spec {
    const char *method;
    const char *path; /* "/api/v1/namespaces/x/pods?limit=500" */
    const char *content_type;
    const char *accept;
    const char *body;
    size_t body_len;
    long timeout_ms;
    /* Streaming (watch): 2xx body chunks as they arrive; see http.h. */
    int (*on_data)(const char *data, size_t len, void *ud);
    /* Leader election's own request (a create of its Lease, a renew or
     * release): set only by lbind_api.c for the holder of the key
     * api.fence handed out, never from a request's fields. */
    int lease;
    /* Made for a key of a sharded controller (a reconcile's task, or a
     * task it spawned), whose hash is shard: set only by lbind_api.c from
     * the running task's mark (sched_mark), never from a request's
     * fields. */
    int keyed;
    uint64_t shard;
} api_spec;

/* NULL and a message in err on failure. Its lines (and its credential
 * plugin's) go to log, which must outlive it. */
api *api_new(uv_loop_t *loop, const kubeconfig *kc, double qps, int burst, const log_sink *log, char *err,
             size_t errlen);

/* Start a request; done runs on the loop, never before api_request returns,
 * and not at all once the call is cancelled. NULL when it could not be
 * started (out of memory). */
api_call *api_request(api *a, const api_spec *s, http_done_cb done, void *ud);

/* Stop a call; its done callback will not run. */
void api_cancel(api_call *c);

/* Read a streaming call paused by its on_data again (http_resume). */
void api_resume(api_call *c);

/* The User-Agent of its requests from now on (http_client_set_user_agent). */
int api_set_user_agent(api *a, const char *ua);

const char *api_server(const api *a);
const char *api_namespace(const api *a);
unsigned long api_requests_total(const api *a);
unsigned api_exec_runs(const api *a);

/* Fencing, for leader election: from now on a write (any method but GET
 * and HEAD) leaves only until api_fence_until's time (uv_hrtime), checked
 * the moment before it is sent and before its body is (http_spec.may_send).
 * The one exception is
 * by request, not by path: a request made with api_spec.lease set that is
 * a PUT of the lease at lease_path or a POST to its collection (the
 * election's create, renew and release). Reviews leave too (a POST of a
 * TokenReview, a SubjectAccessReview and the like: the API server keeps
 * nothing of them). Any other write, to the Lease
 * too, waits for the lease like every write. A write held back fails
 * with a transport error saying so. 0, or -1 when out of memory. */
int api_fence(api *a, const char *lease_path);
void api_fence_until(api *a, uint64_t until);

/* Sharding (docs/sharding.md), on top of api_fence (whose lease is then
 * the replica's own Lease in the ring, and whose api_fence_until is its
 * membership): a write made for a key (api_spec.keyed) leaves only while
 * the key's hash is in one of the n ranges at r, the ranges this replica
 * holds; other writes (not made for a key: Events, a script's own tasks)
 * need only the membership. Replaces the ranges held before. 0, or -1
 * when out of memory or too many ranges (the old ones kept). */
int api_shard_fence(api *a, const shard_range *r, size_t n);

/* Count every response in m's rest_client_requests_total (m outlives a). */
struct metrics;
void api_set_metrics(api *a, struct metrics *m);

void api_free(api *a);

#endif
