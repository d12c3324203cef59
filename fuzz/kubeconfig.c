/* fuzz/kubeconfig.c - libFuzzer harness: a kubeconfig (YAML, through
 * libyaml) must load or be refused with a message, never crash or leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/kubeconfig.h"

static char fuzz_path[64];

static void fuzz_cleanup(void)
{
    unlink(fuzz_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kubeconfig_opts o = {0};
    kubeconfig *kc = NULL;
    char err[600];
    FILE *f;

    if (fuzz_path[0] == '\0') {
        /* in memory where there is a tmpfs for it: three times the runs */
        snprintf(fuzz_path, sizeof fuzz_path, "/dev/shm/luaop-fuzz-kubeconfig.%d", (int)getpid());
        if (access("/dev/shm", W_OK) != 0)
            snprintf(fuzz_path, sizeof fuzz_path, "/tmp/luaop-fuzz-kubeconfig.%d", (int)getpid());
        atexit(fuzz_cleanup);
    }
    f = fopen(fuzz_path, "wb");
    if (f == NULL)
        abort();
    fwrite(data, 1, size, f);
    fclose(f);
    o.kubeconfig = fuzz_path;
    o.home = "/nonexistent";
    if (kubeconfig_load(&o, &kc, err, sizeof err) == 0)
        kubeconfig_free(kc);
    else if (err[0] == '\0')
        abort(); /* refused without saying why */
    return 0;
}
