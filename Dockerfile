# syntax=docker/dockerfile:1

# Build a static quotad binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
# The Go client module, which the main module requires from ./client.
COPY client/go.mod ./client/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/quotad ./cmd/quotad

# Run it as an unprivileged user in an image with nothing else in it.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/quotad /usr/local/bin/quotad
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/quotad"]
