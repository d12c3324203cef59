# luaop - build, dependencies, tests and the local control plane.

CC      ?= cc
PKGS    := libuv libcurl yaml-0.1
CSTD    := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
CPPFLAGS += -I$(LIBS)/lua -I$(LIBS)/mhd -I$(LIBS)/event $(shell pkg-config --cflags $(PKGS))
# libmicrohttpd (the metrics and probe server): static in every build, from
# hack/libs.sh (plain HTTP: Debian's links GnuTLS, a second TLS stack)
MHD     := build/libs/lib/libmicrohttpd.a
# libevent (the webhook's HTTPS server, src/tlsserve.c): static in every
# build, from hack/libs.sh, built against luaop's OpenSSL. The ASan build,
# the fuzz harnesses and the specs' module link it with Debian's libssl3,
# the one their libcurl loads (the same OpenSSL 3.0 ABI), by its soname:
# with luaop's OpenSSL headers (TLSSERVE_OBJS below), so no libssl-dev is
# needed.
EVENT   := build/libs/lib/libevent_openssl.a build/libs/lib/libevent_extra.a build/libs/lib/libevent_core.a
SSL_SO  := -l:libssl.so.3 -l:libcrypto.so.3
LDLIBS  += $(shell pkg-config --libs $(PKGS)) $(MHD) $(EVENT) $(SSL_SO) -lm -ldl -lpthread
# The luaop binary links a lean, static libcurl and OpenSSL (hack/libs.sh
# builds them once into a cache; build/libs links there), Lua compiled from
# the source hack/libs.sh fetches (below), and Debian's static nghttp2, zlib,
# libuv and libyaml: an idle luaop maps little but its own code and libc.
# The ASan build and the specs' module use Debian's shared libraries but
# for Lua, which every build compiles from that same source.
LIBS    := build/libs
STATIC  := $(LIBS)/lib/libcurl.a $(EVENT) $(LIBS)/lib/libssl.a $(LIBS)/lib/libcrypto.a $(MHD) \
           -Wl,-Bstatic -lnghttp2 -lz -luv_a -lyaml -Wl,-Bdynamic -lm -ldl -lpthread
BIN_LDFLAGS := -Wl,--gc-sections -Wl,-z,pack-relative-relocs
# A Lua C module takes Lua's symbols from the interpreter that loads it.
MODLIBS := $(shell pkg-config --libs $(PKGS)) $(MHD) $(EVENT) $(SSL_SO) -lpthread

# Lua, from $(LIBS)/lua (hack/libs.sh: Lua 5.4.7 and later fixes): its core
# and libraries in every build; luaop's string library is lstrpat.c (pattern
# steps charged to budgets, src/pattern.h), the interpreter's (build/bin/lua,
# which the specs run on, busted and all) lstrlib.c as Lua has it.
LUA_NAMES := lapi lcode lctype ldebug ldo ldump lfunc lgc llex lmem lobject lopcodes lparser \
             lstate lstring ltable ltm lundump lvm lzio lauxlib lbaselib lcorolib ldblib liolib \
             lmathlib loadlib loslib ltablib lutf8lib linit
# (every state's extra space starts NULL, the scheduler's slot, src/scheduler_meter.c's
# sched_of: Lua leaves a main thread's uninitialised, and a state no scheduler
# runs, the fuzz harnesses' or the specs' interpreter's, read garbage there)
LUA_CFLAGS := -std=gnu99 -DLUA_COMPAT_5_3 -DLUA_USE_LINUX \
  '-Dluai_userstateopen(L)=memset(lua_getextraspace(L), 0, LUA_EXTRASPACE)'
LUA_OBJS := $(LUA_NAMES:%=build/obj/lua/%.o)
ASAN_LUA_OBJS := $(LUA_NAMES:%=build/asan/obj/lua/%.o)
# luaop's base, table, utf8 and math libraries (and lstrpat.c) are Lua's own
# compiled with src/charge_lib.h forced in, so the work they do in C is
# charged to budgets (src/charge.h); the interpreter keeps Lua's.
CHARGED := lbaselib ltablib lutf8lib lmathlib lcorolib
# and their collector is lgc.c with its steps timed (src/gcstep.h): its
# luaC_step renamed, src/gcstep.c's in its place (in the binaries only).
LUAOP_LUA := $(filter-out $(CHARGED) lgc,$(LUA_NAMES)) lgc-timed
FUZZ_LUA_OBJS := $(LUAOP_LUA:%=build/fuzz/obj/lua/%.o) $(CHARGED:%=build/fuzz/obj/lua/%-charged.o) \
                 build/fuzz/obj/lua/lstrpat.o

SRCS    := $(wildcard src/*.c)
LUA_SRCS := $(sort $(wildcard lua/luaop/*.lua lua/luaop/*/*.lua lua/luaop/*/*/*.lua))
# The binary embeds the Lua half; the module (for specs) finds it on lpath.
OBJS    := $(SRCS:src/%.c=build/obj/%.o) build/obj/luaembed.o $(LUAOP_LUA:%=build/obj/lua/%.o) \
           $(CHARGED:%=build/obj/lua/%-charged.o) build/obj/lua/lstrpat.o
ASAN_OBJS := $(SRCS:src/%.c=build/asan/obj/%.o) build/asan/obj/luaembed.o $(LUAOP_LUA:%=build/asan/obj/lua/%.o) \
             $(CHARGED:%=build/asan/obj/lua/%-charged.o) build/asan/obj/lua/lstrpat.o
PIC_OBJS := $(filter-out build/pic/main.o build/pic/gcstep.o,$(SRCS:src/%.c=build/pic/%.o))
SANITIZE := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
# The files that include OpenSSL's headers take luaop's own (hack/libs.sh's
# stage) in every build, as build/obj's do for all files.
TLSSERVE_OBJS := $(foreach d,build/asan/obj build/pic build/fuzz/obj,$(patsubst src/%.c,$(d)/%.o,$(wildcard src/tlsserve*.c)))
$(TLSSERVE_OBJS): CPPFLAGS := -I$(LIBS)/include $(CPPFLAGS)
# `make V=1` shows the commands.
ifeq ($(V),1)
Q :=
say := @true
else
Q := @
say := @printf '  %-6s %s\n'
endif

.PHONY: all asan ctest deps test test-unit test-e2e lint cluster-up cluster-down cluster-status \
        cluster-bin run image test-image test-incluster clean distclean fuzz fuzz-build

all: build/luaop build/lua/luaop/core.so build/bin/lua

build/luaop: $(OBJS) build/libs.stamp
	$(say) LD $@
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $(BIN_LDFLAGS) -o $@ $(OBJS) $(STATIC)

# the headers of the libcurl it links
build/obj/%.o: src/%.c | build/obj build/libs.stamp
	$(say) CC $@
	$(Q)$(CC) $(CSTD) $(CFLAGS) -I$(LIBS)/include $(CPPFLAGS) -MMD -MP -c -o $@ $<

build/libs.stamp: FORCE
	@hack/libs.sh $(LIBS) $@
FORCE:

build/gen/luaembed.c: hack/embed.lua $(LUA_SRCS) build/bin/lua | build/gen
	$(say) GEN $@
	$(Q)build/bin/lua hack/embed.lua $@ $(LUA_SRCS)

# Lua's code, so Lua's flags rather than ours; rebuilt when the link to
# its source changes.
build/obj/lua/%.o: build/libs.stamp | build/obj/lua
	$(say) CC $@
	$(Q)$(CC) $(CFLAGS) $(LUA_CFLAGS) -c -o $@ $(LIBS)/lua/$*.c

build/asan/obj/lua/%.o: build/libs.stamp | build/asan/obj/lua
	$(say) CC $@
	$(Q)$(CC) -O1 -g $(SANITIZE) -fPIC $(LUA_CFLAGS) -c -o $@ $(LIBS)/lua/$*.c

build/fuzz/obj/lua/%.o: build/libs.stamp fuzz/lua-coverage.ignore | build/fuzz/obj/lua
	$(say) FUZZCC $@
	$(Q)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=fuzz/lua-coverage.ignore \
	  $(LUA_CFLAGS) -c -o $@ $(LIBS)/lua/$*.c

build/obj/lua/lgc-timed.o: build/libs.stamp | build/obj/lua
	$(say) CC $@
	$(Q)$(CC) $(CFLAGS) $(LUA_CFLAGS) -DluaC_step=luaC_step_untimed -c -o $@ $(LIBS)/lua/lgc.c

build/asan/obj/lua/lgc-timed.o: build/libs.stamp | build/asan/obj/lua
	$(say) CC $@
	$(Q)$(CC) -O1 -g $(SANITIZE) -fPIC $(LUA_CFLAGS) -DluaC_step=luaC_step_untimed -c -o $@ $(LIBS)/lua/lgc.c

build/fuzz/obj/lua/lgc-timed.o: build/libs.stamp fuzz/lua-coverage.ignore | build/fuzz/obj/lua
	$(say) FUZZCC $@
	$(Q)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=fuzz/lua-coverage.ignore \
	  $(LUA_CFLAGS) -DluaC_step=luaC_step_untimed -c -o $@ $(LIBS)/lua/lgc.c

build/obj/lua/lstrpat.o build/asan/obj/lua/lstrpat.o build/fuzz/obj/lua/lstrpat.o: src/pattern.h src/charge_lib.h src/charge.h
build/obj/lua/lstrpat.o build/asan/obj/lua/lstrpat.o build/fuzz/obj/lua/lstrpat.o: LUA_CFLAGS += -include src/pattern.h \
  -I$(LIBS)/lua -include src/charge_lib.h

build/obj/lua/%-charged.o: build/libs.stamp src/charge_lib.h src/charge.h | build/obj/lua
	$(say) CC $@
	$(Q)$(CC) $(CFLAGS) $(LUA_CFLAGS) -I$(LIBS)/lua -include src/charge_lib.h -c -o $@ $(LIBS)/lua/$*.c

build/asan/obj/lua/%-charged.o: build/libs.stamp src/charge_lib.h src/charge.h | build/asan/obj/lua
	$(say) CC $@
	$(Q)$(CC) -O1 -g $(SANITIZE) -fPIC $(LUA_CFLAGS) -I$(LIBS)/lua -include src/charge_lib.h -c -o $@ $(LIBS)/lua/$*.c

build/fuzz/obj/lua/%-charged.o: build/libs.stamp src/charge_lib.h src/charge.h | build/fuzz/obj/lua
	$(say) FUZZCC $@
	$(Q)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(LUA_CFLAGS) -I$(LIBS)/lua -include src/charge_lib.h \
	  -c -o $@ $(LIBS)/lua/$*.c

# The interpreter the specs run on (busted and its C modules take Lua's
# symbols from it), from the same Lua as luaop; and its ASan build.
build/bin/lua: $(LUA_OBJS) build/obj/lua/lstrlib.o build/obj/lua/lua.o | build/bin
	$(say) LD $@
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -Wl,-E -o $@ $^ -lm -ldl

build/asan/bin/lua: $(ASAN_LUA_OBJS) build/asan/obj/lua/lstrlib.o build/asan/obj/lua/lua.o | build/asan/bin
	$(say) LD $@
	$(Q)$(CC) -O1 -g $(SANITIZE) $(LDFLAGS) -Wl,-E -o $@ $^ -lm -ldl

build/obj/luaembed.o: build/gen/luaembed.c | build/obj build/libs.stamp
	$(say) CC $@
	$(Q)$(CC) $(CSTD) $(CFLAGS) -I$(LIBS)/include $(CPPFLAGS) -Isrc -c -o $@ $<

build/asan/obj/luaembed.o: build/gen/luaembed.c | build/asan/obj build/libs.stamp
	$(say) CC $@
	$(Q)$(CC) $(CSTD) -O1 -g $(SANITIZE) -fPIC $(CPPFLAGS) -Isrc -c -o $@ $<

# The core as a Lua module, luaop.core, for the specs.
build/lua/luaop/core.so: $(PIC_OBJS) | build/lua/luaop
	$(say) LD $@
	$(Q)$(CC) -shared $(CFLAGS) $(LDFLAGS) -o $@ $^ $(MODLIBS)

build/pic/%.o: src/%.c | build/pic build/libs.stamp
	$(say) CC $@
	$(Q)$(CC) $(CSTD) $(CFLAGS) -fPIC $(CPPFLAGS) -MMD -MP -c -o $@ $<

# AddressSanitizer + UBSan build of the same sources: build/asan/luaop, and
# build/asan/lua/luaop/core.so (load it with libasan preloaded).
asan: build/asan/luaop build/asan/lua/luaop/core.so build/asan/bin/lua

build/asan/luaop: $(ASAN_OBJS)
	$(say) LD $@
	$(Q)$(CC) -O1 -g $(SANITIZE) $(LDFLAGS) -o $@ $^ $(LDLIBS)

build/asan/obj/%.o: src/%.c | build/asan/obj build/libs.stamp
	$(say) CC $@
	$(Q)$(CC) $(CSTD) -O1 -g $(SANITIZE) -fPIC $(CPPFLAGS) -MMD -MP -c -o $@ $<

build/asan/lua/luaop/core.so: $(filter-out build/asan/obj/main.o build/asan/obj/gcstep.o,$(SRCS:src/%.c=build/asan/obj/%.o)) | build/asan/lua/luaop
	$(say) LD $@
	$(Q)$(CC) -shared -O1 -g $(SANITIZE) $(LDFLAGS) -o $@ $^ $(MODLIBS)

# The C unit tests (spec/c/NAME_test.c, TAP on stdout, run by
# spec/unit/c_spec.lua), with ASan and UBSan, each linked with the module it
# tests.
CTESTS := $(basename $(notdir $(wildcard spec/c/*_test.c)))
ctest: $(CTESTS:%=build/ctest/%)

build/ctest/%: spec/c/%.c spec/c/tap.h | build/ctest
	$(say) CC $@
	$(Q)$(CC) $(CSTD) -O1 -g $(SANITIZE) -iquote src -iquote spec/c $(CPPFLAGS) -o $@ $(filter %.c %.o,$^) $(CTEST_LIBS)

build/ctest/dbuf_test: build/asan/obj/dbuf.o
build/ctest/pool_test: build/asan/obj/pool.o
build/ctest/listsplit_test: build/asan/obj/listsplit.o build/asan/obj/dbuf.o
build/ctest/sha256_test: build/asan/obj/sha256.o
build/ctest/metrics_test: build/asan/obj/metrics.o build/asan/obj/metrics_custom.o build/asan/obj/dbuf.o
build/ctest/metrics_test: CTEST_LIBS = -lm -lpthread
# two runtimes in one process: the whole core (no main), Lua, the libraries
build/ctest/runtime_test: $(filter-out build/asan/obj/main.o,$(ASAN_OBJS))
build/ctest/runtime_test: CTEST_LIBS = $(LDLIBS)
# the HTTPS server and its clients (OpenSSL's headers luaop's own, as the
# server's files take them)
build/ctest/tlsserve_test: $(filter-out build/asan/obj/main.o,$(ASAN_OBJS))
build/ctest/tlsserve_test: CTEST_LIBS = $(LDLIBS)
build/ctest/tlsserve_test: CPPFLAGS := -I$(LIBS)/include $(CPPFLAGS)
# the scheduler alone, with Lua, and a thread that reads the watchdog's view
build/ctest/sched_test: build/asan/obj/scheduler.o build/asan/obj/scheduler_budget.o build/asan/obj/scheduler_meter.o build/asan/obj/counters.o build/asan/obj/charge.o $(ASAN_LUA_OBJS) build/asan/obj/lua/lstrpat.o
build/ctest/sched_test: CTEST_LIBS = -lm -ldl -lpthread

# libFuzzer harnesses (fuzz/*.c), with clang and libclang-rt: `make fuzz`
# runs each for FUZZ_TIME seconds (new inputs go to build/fuzz/corpus/NAME,
# the checked-in seeds in fuzz/corpus/NAME are read); `make test` replays
# the seeds and runs each briefly (spec/run.sh; the api harness
# FUZZ_API_TIME seconds, default 60). FUZZERS=api picks harnesses;
# FUZZ_OPTS adds libFuzzer options (docs/fuzzing.md: fork mode, to go on
# after a finding).
FUZZERS := $(basename $(notdir $(wildcard fuzz/*.c)))
FUZZ_CC ?= clang
FUZZ_TIME ?= 300
FUZZ_OPTS ?=
FUZZ_SAN := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_OBJS := $(filter-out build/fuzz/obj/main.o,$(SRCS:src/%.c=build/fuzz/obj/%.o)) build/fuzz/obj/luaembed.o \
             $(FUZZ_LUA_OBJS)

fuzz-build: $(FUZZERS:%=build/fuzz/%)
.SECONDARY: $(FUZZ_OBJS)

fuzz: fuzz-build
	@for f in $(FUZZERS); do \
	  opts=; [ $$f != api ] || opts=-len_control=0; \
	  mkdir -p build/fuzz/corpus/$$f && echo "== fuzz $$f for $(FUZZ_TIME) s" && \
	  build/fuzz/$$f -max_total_time=$(FUZZ_TIME) -dict=fuzz/$$f.dict -print_final_stats=1 -timeout=60 $$opts $(FUZZ_OPTS) \
	    -artifact_prefix=build/fuzz/$$f- build/fuzz/corpus/$$f fuzz/corpus/$$f || exit 1; \
	done

build/fuzz/obj/%.o: src/%.c | build/fuzz/obj build/libs.stamp
	$(say) FUZZCC $@
	$(Q)$(FUZZ_CC) $(CSTD) $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(CPPFLAGS) -MMD -MP -c -o $@ $<

build/fuzz/obj/luaembed.o: build/gen/luaembed.c | build/fuzz/obj build/libs.stamp
	$(say) FUZZCC $@
	$(Q)$(FUZZ_CC) $(CSTD) $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(CPPFLAGS) -Isrc -c -o $@ $<

# the watch harness includes lbind_watch.c itself, for its static functions
build/fuzz/watch: FUZZ_SKIP := build/fuzz/obj/lbind_watch.o
# the api harness counts Lua lines in hooks luaop sets too (fuzz/api.c)
build/fuzz/api: FUZZ_LDFLAGS := -Wl,--wrap=lua_sethook
build/fuzz/%: fuzz/%.c $(FUZZ_OBJS) | build/fuzz/obj
	$(say) FUZZLD $@
	$(Q)$(FUZZ_CC) $(CSTD) $(FUZZ_SAN) -fsanitize=fuzzer $(CPPFLAGS) $(FUZZ_LDFLAGS) -o $@ $< \
	  $(filter-out $(FUZZ_SKIP),$(FUZZ_OBJS)) $(LDLIBS) -lm -lpthread

build/obj build/asan/obj build/pic build/gen build/lua/luaop build/asan/lua/luaop build/fuzz/obj \
  build/obj/lua build/asan/obj/lua build/fuzz/obj/lua build/bin build/asan/bin build/ctest:
	mkdir -p $@

# (dependency files of our sources only: Lua's objects have none)
-include $(SRCS:src/%.c=build/obj/%.d) $(SRCS:src/%.c=build/asan/obj/%.d) $(PIC_OBJS:.o=.d) \
  $(SRCS:src/%.c=build/fuzz/obj/%.d)

# Debian packages: the build, the tests, the control plane, images and
# benchmarks (hack/deps.sh SET... installs only some of them).
deps:
	hack/deps.sh

# Unit specs (no cluster), then end-to-end specs against the local control
# plane, which is brought up if it is not running and taken down again after,
# then the image built and run as a container against it, then as a Pod on
# its real node (both as root).
# Ends with one line "N passed, N failed".
# (cluster-bin first: the unit specs render the manifests with the pinned
# kubectl's kustomize, which the control plane's build makes)
test: deps
	$(MAKE) all asan fuzz-build ctest cluster-bin
	spec/run.sh all

test-unit: all asan fuzz-build ctest cluster-bin
	spec/run.sh unit

# luacheck (.luacheckrc) over the Lua of the tree; make test runs it too
lint:
	luacheck lua operators spec bench

test-e2e: all asan
	spec/run.sh e2e

# The local control plane: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok, admin kubeconfig in build/cluster/kubeconfig.
cluster-bin:
	hack/cluster.sh bin

cluster-up:
	hack/cluster.sh up

cluster-down:
	hack/cluster.sh down

cluster-status:
	hack/cluster.sh status

# The main job. For now: bring up the local control plane and show it.
run:
	hack/deps.sh build cluster
	$(MAKE) all
	hack/run.sh

# luaop's image, with buildah (no Docker engine needed); see hack/image.sh
image:
	hack/image.sh luaop:latest

# spec/image alone (make test runs it too): the image built and run as a
# container against the local control plane
test-image: all
	spec/run.sh image

# spec/incluster alone (make test runs it too): the image as a Pod on the
# local control plane's real node
test-incluster: all
	spec/run.sh incluster

clean:
	rm -rf build/obj build/asan build/pic build/gen build/lua build/luaop build/test build/libs build/libs.stamp

distclean: cluster-down
	rm -rf build
