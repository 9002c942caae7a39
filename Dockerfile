# usher's container image: a static binary (CGO_ENABLED=0; the SQLite driver
# is modernc.org/sqlite, pure Go) on Alpine, run as a non-root user.
# docs/operations.md#containers explains it, with deploy/compose.yaml.
#
#   docker build -t usher .
#   docker run --rm -p 8080:8080 -v usher-data:/data usher
#
# The build line is the one TestDockerBuild (cmd/usher) runs: keep its form.

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/usher ./cmd/usher

FROM alpine:3.22
# ca-certificates: rediss://, TLS to PostgreSQL and NATS. wget (busybox)
# runs the health check. /keys is owned by usher so that a new volume
# mounted there (deploy/compose.yaml) is writable.
RUN apk add --no-cache ca-certificates \
 && addgroup -S -g 10001 usher \
 && adduser -S -D -H -u 10001 -G usher -h /data usher \
 && mkdir -p /data /keys \
 && chown usher:usher /data /keys
COPY --from=build /out/usher /usr/local/bin/usher
USER 10001:10001
WORKDIR /data
ENV USHER_ADDR=:8080 \
    USHER_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080
# Liveness only: /healthz answers while the process serves HTTP. Use
# /readyz in a load balancer (503 while the store is down).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD wget -q -O /dev/null http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["usher"]
CMD ["serve"]
