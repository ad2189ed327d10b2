# lmq-gateway image: one static binary (embedded nats-server included).
#
#   docker build -t lmq-gateway:local .
#   docker run -p 127.0.0.1:9980:9980 -p 127.0.0.1:18800:18800 -v lmq-data:/data lmq-gateway:local
#
# The ports are published on the host's loopback only: HTTP and RPC have no
# authentication until asked for. Before publishing them on other interfaces
# give HTTP TLS and tokens (--tls-cert/--tls-key, --auth-token or --tokens)
# and RPC TLS with client certificates (--rpc-tls-cert/--rpc-tls-key,
# --rpc-tls-client-ca); see docker-compose.yml.
#
# Base images are pinned by version: golang's matches go.mod's toolchain
# (1.26.8), on the Alpine release of the runtime stage (3.24). To pin by
# digest as well, look the digest up and append it to the FROM line, e.g.
#   docker buildx imagetools inspect golang:1.26.8-alpine3.24
#   FROM golang:1.26.8-alpine3.24@sha256:<digest> AS build
#   docker buildx imagetools inspect alpine:3.24.2
#   FROM alpine:3.24.2@sha256:<digest>
#
# Every flag can be given as an LMQ_* environment variable (--nats-url is
# LMQ_NATS_URL); see lmq-gateway --help.

FROM golang:1.26.8-alpine3.24 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lmq-gateway ./cmd/lmq-gateway

FROM alpine:3.24.2
RUN adduser -D -H -u 10001 lmq && mkdir /data && chown lmq /data
COPY --from=build /out/lmq-gateway /usr/local/bin/lmq-gateway
USER lmq
# The embedded server's data (unused with --nats-url). The API on all
# interfaces; the embedded server's client port stays on loopback unless
# LMQ_NATS_LISTEN says otherwise.
ENV LMQ_DATA_DIR=/data \
    LMQ_HTTP_LISTEN=:9980 \
    LMQ_RPC_LISTEN=:18800
VOLUME /data
EXPOSE 9980 18800
# Ready, not merely alive: /readyz answers 200 once JetStream takes a write
# and a read through this gateway, 503 while it cannot (a full disk, NATS
# unreachable) or drains on SIGTERM; it needs no token. wget is busybox's, in
# the base image; it exits non-zero on a 503. With --tls-cert the port
# speaks HTTPS: use https://127.0.0.1:9980/readyz and --no-check-certificate
# (or the CA) in a HEALTHCHECK of your own.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
    CMD wget -q -O /dev/null http://127.0.0.1:9980/readyz || exit 1
ENTRYPOINT ["lmq-gateway"]
