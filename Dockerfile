# luaop's image: built on Debian bookworm, run as a non-root user, scripts
# from a mounted directory (default /etc/luaop/operators; the Deployment in
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
# source packages; the binary then needs only libc and libm
RUN make build/luaop && strip build/luaop

FROM debian:bookworm-slim
# luaop links everything but libc and libm statically; the CA bundle for TLS
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
COPY --from=build /src/build/luaop /usr/local/bin/luaop
# the example operators, for a quick try: --script /usr/share/luaop/operators
COPY operators/*.lua /usr/share/luaop/operators/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/luaop"]
CMD ["--script", "/etc/luaop/operators"]
