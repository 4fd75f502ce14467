package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// spec is what the image holds: one static binary, run as a user without a name or a home
// of its own, and the CA bundle it trusts Azure's endpoints by.
type spec struct {
	// Binary is the path of the static binary; the image runs /<its base name>.
	Binary string
	// CACerts is the path of a CA bundle written to /etc/ssl/certs/ca-certificates.crt, where Go
	// looks for one on Linux; empty for Mozilla's roots (mozillaRoots).
	CACerts string
	// User runs the binary: numeric, so that the kubelet can check runAsNonRoot.
	User string
	// Arch is the binary's architecture, as Go names it.
	Arch string
	// Created stamps the image and its files, so that the same inputs make the same image.
	Created time.Time
}

// nonroot is the user the operator runs as, the same as distroless's "nonroot".
const nonroot = "65532:65532"

// passwd and group name root and nonroot, as distroless's do, for whatever asks the user's name.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// build is the image s describes: one layer, and a config that runs the binary as s.User.
func build(s spec) (v1.Image, error) {
	layer, err := fileLayer(s)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", s.Arch
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config.Entrypoint = []string{"/" + path.Base(s.Binary)}
	cfg.Config.User = s.User
	cfg.Config.WorkingDir = "/"
	return mutate.ConfigFile(img, cfg)
}

// entry is one file or directory of the layer.
type entry struct {
	name string
	mode int64
	data []byte
	dir  bool
}

// fileLayer is the layer of s's files, owned by root, stamped s.Created.
func fileLayer(s spec) (v1.Layer, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	certs := mozillaRoots()
	if s.CACerts != "" {
		if certs, err = os.ReadFile(s.CACerts); err != nil {
			return nil, fmt.Errorf("reading the CA bundle: %w", err)
		}
	}
	entries = append(entries, entry{name: "etc/ssl/", mode: 0o755, dir: true}, entry{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs})
	entries = append(entries, entry{name: path.Base(s.Binary), mode: 0o755, data: bin})

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: s.Created, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if e.name == "home/nonroot/" {
			h.Uid, h.Gid = 65532, 65532
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// mozillaRoots are the roots of Mozilla's trust store as golang.org/x/crypto/x509roots/fallback
// pins them (hack/image/go.mod), PEM: the same on every machine that builds the image, whatever
// CAs that machine added to its own bundle. A root Mozilla trusts only for certificates issued
// before a date cannot say so in a PEM bundle, and is left out.
func mozillaRoots() []byte {
	var out []byte
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})...)
		}
	}
	return out
}
