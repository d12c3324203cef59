/* log.h - structured logs, as controller-runtime's zap writes them.
 *
 * text: 2026-11-22T02:49:54.537Z<TAB>INFO<TAB>logger<TAB>message<TAB>{"k": "v"}
 * json: {"level":"info","ts":"2026-11-22T02:49:54.537Z","logger":"l","msg":"m","k":"v"}
 *
 * Verbosity follows logr: 0 is info, higher is chattier (-v 1 = debug, 2+ =
 * trace); errors are always written. Values of keys that name credentials
 * (token, password, authorization, client-key(-data), bearer) are replaced by
 * "[redacted]" whatever the caller passes, as a last line of defence. */
#ifndef LUAOP_LOG_H
#define LUAOP_LOG_H

#include <stddef.h>
#include <stdio.h>

typedef enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON } log_format;

/* A line's level: LOG_ERROR, or a verbosity >= 0 (LOG_INFO, LOG_DEBUG, ...). */
enum { LOG_ERROR = -1, LOG_INFO = 0, LOG_DEBUG = 1, LOG_TRACE = 2 };

typedef enum log_kind { LOG_STR, LOG_INT, LOG_NUM, LOG_BOOL, LOG_RAW } log_kind;

/* One key/value. LOG_RAW is text that is already JSON (an object, say). */
typedef struct log_field {
    const char *key;
    log_kind kind;
    union {
        struct {
            const char *s;
            size_t n;
        } str;
        long long i;
        double d;
        int b;
    } v;
} log_field;

/* Where lines go and how: each runtime has one (runtime.h); the process
 * has one more for what is logged outside any runtime (flag errors, the
 * watchdog). out NULL is stderr. */
typedef struct log_sink {
    log_format format;
    int verbosity;
    FILE *out;
} log_sink;

/* The process's sink (log_write, log_enabled). */
log_sink *log_default(void);

/* Set the process's sink. */
void log_setup(log_format format, int verbosity, FILE *out);

/* Parse "text"/"json"; returns 0 and sets *out, or -1. */
int log_parse_format(const char *s, log_format *out);

/* Parse a level name (error, info, debug, trace) or a number; -1 if bad. */
int log_parse_level(const char *s, int *out);

int log_sink_enabled(const log_sink *s, int level);

/* Write one line with n fields to s. */
void log_sink_write(const log_sink *s, int level, const char *logger, const char *msg, const log_field *fields, size_t n);

/* The same, on the process's sink. */
int log_enabled(int level);
void log_write(int level, const char *logger, const char *msg, const log_field *fields, size_t n);

/* Whether a key's value is withheld from logs. */
int log_is_secret_key(const char *key);

#endif
