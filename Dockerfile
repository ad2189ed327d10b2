# lmq-gateway image: one static binary (embedded nats-server included).
#
#   docker build -t lmq-gateway .
#   docker run -p 9980:9980 -p 18800:18800 -v lmq-data:/data lmq-gateway
#
# Every flag can be given as an LMQ_* environment variable (--nats-url is
# LMQ_NATS_URL); see lmq-gateway --help.

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lmq-gateway ./cmd/lmq-gateway

FROM alpine:3.21
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
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
    CMD wget -q -O /dev/null http://127.0.0.1:9980/healthz || exit 1
ENTRYPOINT ["lmq-gateway"]
