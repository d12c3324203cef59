# luaop's image: built on Debian bookworm into an empty base (about 7 MB),
# run as a non-root user, scripts from a mounted directory (default /etc/luaop/operators; the Deployment in
# manifests/deploy mounts the operators' ConfigMap there). `make image`
# builds it with buildah.

FROM debian:bookworm-slim AS build
WORKDIR /src
# the documented install path (docs/building.md), nothing of its own: every image build is also a
# fresh-machine test of `hack/deps.sh build`
COPY hack/deps.sh hack/
RUN hack/deps.sh build
COPY Makefile ./
COPY hack/embed.lua hack/libs.sh hack/
COPY hack/lua hack/lua/
COPY src src/
COPY lua lua/
# hack/libs.sh builds the lean static libcurl and OpenSSL from Debian's
# source packages; the binary then needs only libc and libm. hack/rootfs.sh
# lays out the image's whole tree: luaop, the C library it links, the CA
# bundle, a non-root user, the example operators.
COPY hack/rootfs.sh hack/
COPY operators operators/
RUN make build/luaop && strip build/luaop && hack/rootfs.sh build/luaop /rootfs

# nothing but that tree: no shell, no package manager, no other program
FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/luaop"]
CMD ["--script", "/etc/luaop/operators"]
