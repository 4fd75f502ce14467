# The operator's image: a static binary on distroless, as non-root, with nothing else in it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /credwatch ./cmd

FROM gcr.io/distroless/static:nonroot
COPY --from=build /credwatch /credwatch
USER 65532:65532
ENTRYPOINT ["/credwatch"]
