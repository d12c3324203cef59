/* tlsserve_queue.c - the HTTPS server's records and counts, and the
 * loop's side of it: the requests it takes, the replies it queues, and the
 * stop (see tlsserve.h). */
#define _GNU_SOURCE /* POLLRDHUP */
#include "tlsserve_private.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static void tlsserve_req_free(tlsserve_req *r)
{
    free(r->strings);
    free(r->body);
    free(r->reply_type);
    free(r->reply_body);
    free(r);
}

/* Drop one count of r (s->mu held: released on return). */
void tlsserve_req_unref_locked(tlsserve_req *r)
{
    tlsserve *s = r->s;

    if (--r->refs > 0) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->held -= r->info.body_len;
    tlsserve_req_free(r);
    tlsserve_unref(s);
}

void tlsserve_req_unref(tlsserve_req *r)
{
    pthread_mutex_lock(&r->s->mu);
    tlsserve_req_unref_locked(r);
}

void tlsserve_free(tlsserve *s)
{
    if (s->wake_fd >= 0)
        close(s->wake_fd);
    pthread_mutex_destroy(&s->mu);
    free(s->name);
    free((char *)s->files.cert);
    free((char *)s->files.key);
    free(s);
}

void tlsserve_unref(tlsserve *s)
{
    int last = --s->refs == 0;

    pthread_mutex_unlock(&s->mu);
    if (last)
        tlsserve_free(s);
}

int tlsserve_port(const tlsserve *s)
{
    return s->port;
}

void tlsserve_serial(tlsserve *s, char *buf, size_t len)
{
    pthread_mutex_lock(&s->mu);
    snprintf(buf, len, "%s", s->serial);
    pthread_mutex_unlock(&s->mu);
}

tlsserve_req *tlsserve_next(tlsserve *s)
{
    tlsserve_req *r;

    pthread_mutex_lock(&s->mu);
    r = s->in_head;
    if (r) {
        s->in_head = r->next;
        if (s->in_head == NULL)
            s->in_tail = NULL;
        r->next = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

const tlsserve_info *tlsserve_req_info(const tlsserve_req *r)
{
    return &r->info;
}

/* Whether the client of a socket has closed (or reset) it. */
static int tlsserve_hung_up(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};

    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static int tlsserve_answer(tlsserve_req *r, int status, const char *content_type, const char *body, size_t len,
                           int render)
{
    tlsserve *s = r->s;
    char *type = strdup(content_type ? content_type : "text/plain; charset=utf-8");
    char *copy = malloc(len ? len : 1);
    uint64_t one = 1;
    int ok;

    pthread_mutex_lock(&s->mu);
    /* the socket stays open while the mutex is held: the connection's
     * close callback takes it before evhttp closes the socket */
    if (r->state == TLSSERVE_PENDING && (s->stopping || r->fd < 0 || tlsserve_hung_up(r->fd)))
        r->state = TLSSERVE_GONE;
    ok = r->state == TLSSERVE_PENDING && type && copy;
    if (ok) {
        memcpy(copy, body ? body : "", len);
        r->state = TLSSERVE_REPLIED;
        r->status = status;
        r->reply_type = type;
        r->reply_body = copy;
        r->reply_len = len;
        r->render = render;
        r->refs++; /* the queue's */
        if (s->out_tail)
            s->out_tail->next = r;
        else
            s->out_head = r;
        s->out_tail = r;
        type = copy = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    free(type);
    free(copy);
    if (ok && write(s->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        return 0;
    return ok;
}

int tlsserve_reply(tlsserve_req *r, int status, const char *content_type, const char *body, size_t len)
{
    return tlsserve_answer(r, status, content_type, body, len, 0);
}

int tlsserve_reply_rendered(tlsserve_req *r, int status, const char *content_type)
{
    return r->s->render ? tlsserve_answer(r, status, content_type, NULL, 0, 1) : 0;
}

void tlsserve_release(tlsserve_req *r)
{
    static const char msg[] = "the request was dropped without a reply\n";

    if (r == NULL)
        return;
    tlsserve_reply(r, 500, NULL, msg, sizeof msg - 1); /* nothing unless it waits */
    tlsserve_req_unref(r);
}

void tlsserve_stop(tlsserve *s)
{
    uint64_t one = 1;
    tlsserve_req *r, *next;

    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_mutex_unlock(&s->mu);
    if (s->started) {
        if (write(s->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
            log_write(LOG_ERROR, "tlsserve", "cannot wake the server thread to stop it", NULL, 0);
        pthread_join(s->thread, NULL);
    }
    /* queued for the loop, never taken: the queue's counts */
    pthread_mutex_lock(&s->mu);
    r = s->in_head;
    s->in_head = s->in_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    for (; r; r = next) {
        next = r->next;
        tlsserve_req_unref(r);
    }
    pthread_mutex_lock(&s->mu);
    tlsserve_unref(s);
}
