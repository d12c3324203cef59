/* log.c - structured logs, as controller-runtime's zap writes them (log.h). */

#include "log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static log_sink log_process = {LOG_FORMAT_TEXT, LOG_INFO, NULL};

log_sink *log_default(void)
{
    return &log_process;
}

void log_setup(log_format format, int verbosity, FILE *out)
{
    log_process.format = format;
    log_process.verbosity = verbosity;
    log_process.out = out;
}

int log_parse_format(const char *s, log_format *out)
{
    if (strcmp(s, "text") == 0 || strcmp(s, "console") == 0)
        *out = LOG_FORMAT_TEXT;
    else if (strcmp(s, "json") == 0)
        *out = LOG_FORMAT_JSON;
    else
        return -1;
    return 0;
}

int log_parse_level(const char *s, int *out)
{
    static const struct {
        const char *name;
        int level;
    } names[] = {{"error", LOG_ERROR}, {"info", LOG_INFO}, {"debug", LOG_DEBUG}, {"trace", LOG_TRACE}};
    char *end;
    long v;

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < LOG_ERROR || v > 10)
        return -1;
    *out = (int)v;
    return 0;
}

int log_sink_enabled(const log_sink *s, int level)
{
    return level <= s->verbosity;
}

int log_enabled(int level)
{
    return log_sink_enabled(&log_process, level);
}

int log_is_secret_key(const char *key)
{
    static const char *const secret[] = {
        "token", "password", "authorization", "client-key", "client-key-data", "bearer",
    };

    for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++) {
        if (strcasecmp(key, secret[i]) == 0)
            return 1;
    }
    /* "...Token", "...Password": camelCase and snake_case variants. */
    size_t n = strlen(key);
    return (n > 5 && strcasecmp(key + n - 5, "token") == 0) ||
           (n > 8 && strcasecmp(key + n - 8, "password") == 0);
}

static void log_json_string(FILE *f, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";

    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

static void log_value(FILE *f, const log_field *fl)
{
    if (log_is_secret_key(fl->key)) {
        fputs("\"[redacted]\"", f);
        return;
    }
    switch (fl->kind) {
    case LOG_STR:
        log_json_string(f, fl->v.str.s, fl->v.str.n);
        break;
    case LOG_INT:
        fprintf(f, "%lld", fl->v.i);
        break;
    case LOG_NUM:
        if (isfinite(fl->v.d)) {
            /* the shortest of %.15g and %.17g that reads back exactly */
            char tmp[40];
            snprintf(tmp, sizeof tmp, "%.15g", fl->v.d);
            if (strtod(tmp, NULL) != fl->v.d)
                snprintf(tmp, sizeof tmp, "%.17g", fl->v.d);
            fputs(tmp, f);
        } else
            fputs("null", f);
        break;
    case LOG_BOOL:
        fputs(fl->v.b ? "true" : "false", f);
        break;
    case LOG_RAW:
        fwrite(fl->v.str.s, 1, fl->v.str.n, f);
        break;
    }
}

static const char *log_level_name(int level, int upper)
{
    if (level <= LOG_ERROR)
        return upper ? "ERROR" : "error";
    if (level == LOG_INFO)
        return upper ? "INFO" : "info";
    return upper ? "DEBUG" : "debug";
}

static void log_timestamp(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

void log_sink_write(const log_sink *s, int level, const char *logger, const char *msg, const log_field *fields, size_t n)
{
    FILE *f = s->out ? s->out : stderr;
    char ts[40];

    if (!log_sink_enabled(s, level))
        return;
    flockfile(f); /* one line at a time: the watchdog's thread logs too */
    log_timestamp(ts, sizeof ts);
    if (msg == NULL)
        msg = "";
    if (s->format == LOG_FORMAT_JSON) {
        fprintf(f, "{\"level\":\"%s\",\"ts\":\"%s\"", log_level_name(level, 0), ts);
        if (level > LOG_DEBUG)
            fprintf(f, ",\"v\":%d", level);
        if (logger && *logger) {
            fputs(",\"logger\":", f);
            log_json_string(f, logger, strlen(logger));
        }
        fputs(",\"msg\":", f);
        log_json_string(f, msg, strlen(msg));
        for (size_t i = 0; i < n; i++) {
            fputc(',', f);
            log_json_string(f, fields[i].key, strlen(fields[i].key));
            fputc(':', f);
            log_value(f, &fields[i]);
        }
        fputs("}\n", f);
    } else {
        fprintf(f, "%s\t%s\t", ts, log_level_name(level, 1));
        if (logger && *logger)
            fprintf(f, "%s\t", logger);
        /* A message is one line: newlines would forge log lines. */
        for (const char *p = msg; *p; p++)
            fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
        if (n > 0) {
            fputs("\t{", f);
            for (size_t i = 0; i < n; i++) {
                if (i > 0)
                    fputs(", ", f);
                log_json_string(f, fields[i].key, strlen(fields[i].key));
                fputs(": ", f);
                log_value(f, &fields[i]);
            }
            fputc('}', f);
        }
        fputc('\n', f);
    }
    fflush(f);
    funlockfile(f);
}

void log_write(int level, const char *logger, const char *msg, const log_field *fields, size_t n)
{
    log_sink_write(&log_process, level, logger, msg, fields, n);
}
