// Command image writes the operator's container image as a tarball that `ctr images import`
// and `docker load` take, without a container engine: a static binary, the CA bundle it trusts
// Azure's endpoints by (Mozilla's roots, pinned, not the build machine's), run as a non-root user,
// and nothing else, as the Dockerfile's distroless image is. `make image` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	s := spec{User: nonroot}
	var tag, out string
	flag.StringVar(&s.Binary, "binary", "", "the static binary the image runs")
	flag.StringVar(&s.CACerts, "ca-certs", "", "the CA bundle the image trusts; empty for Mozilla's roots, as golang.org/x/crypto/x509roots/fallback pins them")
	flag.StringVar(&s.Arch, "arch", runtime.GOARCH, "the binary's architecture")
	flag.StringVar(&tag, "tag", "ghcr.io/credwatch/credwatch:latest", "the image's name and tag")
	flag.StringVar(&out, "out", "", "the tarball to write")
	flag.Parse()
	if err := run(s, tag, out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(s spec, tag, out string) error {
	if s.Binary == "" || out == "" {
		return fmt.Errorf("name the binary (-binary) and the tarball to write (-out)")
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	// SOURCE_DATE_EPOCH, as reproducible builds set it; else the Unix epoch: the same binary
	// makes the same image.
	s.Created = time.Unix(0, 0).UTC()
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		s.Created = time.Unix(sec, 0).UTC()
	}
	img, err := build(s)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %s)\n", out, ref, digest)
	return nil
}
