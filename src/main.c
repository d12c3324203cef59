/* main.c - luaop's command line: parse flags and wire the modules.
 *
 * For now luaop answers --version and --help; the event loop, the client and
 * the controllers are wired here as later modules land. */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <lua.h>
#include <uv.h>
#include <yaml.h>

#include "version.h"

static const char *main_usage =
    "Usage: luaop [flags]\n"
    "\n"
    "luaop runs Kubernetes operators written in Lua 5.4.\n"
    "\n"
    "Flags:\n"
    "  -h, --help       show this help and exit\n"
    "      --version    print the version of luaop and of the libraries it\n"
    "                   runs on, and exit\n";

static void main_print_version(FILE *out)
{
    const curl_version_info_data *curl = curl_version_info(CURLVERSION_NOW);

    fprintf(out, "luaop %s\n", LUAOP_VERSION);
    fprintf(out, "  %s (core %d)\n", LUA_RELEASE, (int)lua_version(NULL));
    fprintf(out, "  libuv %s\n", uv_version_string());
    fprintf(out, "  libcurl %s (%s)\n", curl->version,
            curl->ssl_version ? curl->ssl_version : "no TLS");
    fprintf(out, "  libyaml %s\n", yaml_get_version_string());
}

int main(int argc, char **argv)
{
    enum { OPT_VERSION = 0x100 };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(main_usage, stdout);
            return EXIT_SUCCESS;
        case OPT_VERSION:
            main_print_version(stdout);
            return EXIT_SUCCESS;
        case ':':
            fprintf(stderr, "luaop: flag %s needs a value\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "luaop: unknown flag %s\nRun 'luaop --help' for usage.\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "luaop: unexpected argument %s\nRun 'luaop --help' for usage.\n",
                argv[optind]);
        return 2;
    }
    fputs(main_usage, stderr);
    return 2;
}
