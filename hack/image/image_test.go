package main

import (
	"archive/tar"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The tarball holds an image that runs the binary as nonroot, with the CA bundle and nothing
// else, the same bytes from the same inputs.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin, certs := filepath.Join(dir, "credwatch"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1764979200")
	out := filepath.Join(dir, "image.tar")
	s := spec{Binary: bin, CACerts: certs, User: nonroot, Arch: "amd64"}
	if err := run(s, "ghcr.io/credwatch/credwatch:test", out); err != nil {
		t.Fatal(err)
	}

	tag, _ := name.NewTag("ghcr.io/credwatch/credwatch:test")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/credwatch" ||
		cfg.OS != "linux" || cfg.Architecture != "amd64" || !cfg.Created.Equal(time.Unix(1764979200, 0)) {
		t.Fatalf("config %+v, created %s; want /credwatch run as 65532:65532 on linux/amd64, stamped SOURCE_DATE_EPOCH", cfg.Config, cfg.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h.Mode
	}
	for name, mode := range map[string]int64{"credwatch": 0o755, "etc/ssl/certs/ca-certificates.crt": 0o644, "etc/passwd": 0o644, "tmp/": 0o1777} {
		if got, ok := files[name]; !ok || got != mode {
			t.Errorf("%s: mode %o, present %v; want %o", name, got, ok, mode)
		}
	}
	if len(files) != 10 {
		t.Errorf("files %v; want the binary, the CA bundle, passwd, group and their directories only", files)
	}

	again, err := build(spec{Binary: bin, CACerts: certs, User: nonroot, Arch: "amd64", Created: time.Unix(1764979200, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("digests %s and %s; want the same image from the same inputs", d1, d2)
	}
}

func TestRunRefusesMissingInputs(t *testing.T) {
	if err := run(spec{}, "x:y", ""); err == nil {
		t.Fatal("want an error naming what is missing")
	}
	if err := run(spec{Binary: "/nonexistent", User: nonroot}, "x:y", filepath.Join(t.TempDir(), "o.tar")); err == nil {
		t.Fatal("want an error for a binary that is not there")
	}
}

// Without a bundle named, the image trusts Mozilla's roots as pinned in go.mod, among them the
// root Azure's endpoints chain to, and only certificates.
func TestMozillaRoots(t *testing.T) {
	rest, n, azure := mozillaRoots(), 0, false
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil || b.Type != "CERTIFICATE" || !c.IsCA {
			t.Fatalf("block %d: %s, %v; want a CA certificate", n, b.Type, err)
		}
		n++
		azure = azure || c.Subject.CommonName == "DigiCert Global Root G2"
	}
	if len(rest) != 0 || n < 100 || !azure {
		t.Errorf("%d roots, %d bytes left, DigiCert Global Root G2 among them: %v; want the whole store", n, len(rest), azure)
	}
}
