# luaop's image: built on Debian bookworm, run as a non-root user, scripts
# from a mounted directory (default /etc/luaop/operators; the Deployment in
# manifests/deploy mounts the operators' ConfigMap there). `make image`
# builds it with buildah.

FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential pkg-config lua5.4 liblua5.4-dev \
      libyaml-dev libcurl4-openssl-dev libuv1-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY hack/embed.lua hack/
COPY src src/
COPY lua lua/
RUN make build/luaop && strip build/luaop

FROM debian:bookworm-slim
# only what luaop loads at run time, and the CA bundle for TLS
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates liblua5.4-0 libyaml-0-2 libcurl4 libuv1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/luaop /usr/local/bin/luaop
# the example operators, for a quick try: --script /usr/share/luaop/operators
COPY operators/*.lua /usr/share/luaop/operators/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/luaop"]
CMD ["--script", "/etc/luaop/operators"]
