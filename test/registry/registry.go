// Package registry runs a container registry as Azure Container Registry looks to an AKS node:
// distribution (the registry most registries are built on), built from the module pinned in
// hack/registry and run as its own process with token authentication, behind a front that
// serves ACR's token endpoints (/oauth2/exchange, /oauth2/token) on the same address. Tokens are
// given only to what Entra ID (test/fakegraph) signs in: a service principal whose secret has
// expired is refused, as ACR refuses it.
package registry

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Config says how to run the registry.
type Config struct {
	// Binary is distribution's registry binary.
	Binary string
	// Dir holds the registry's storage, configuration, keys and log.
	Dir string
	// Addr is where the registry and its token endpoints listen, host:port.
	Addr string
	// LoginServer is the registry's name in image references, such as "credwatch.azurecr.io";
	// the nodes' containerd maps it to Addr (WriteHosts).
	LoginServer string
	// CertFile and KeyFile are the serving certificate for Addr's host.
	CertFile, KeyFile string
	// Entra signs in service principals and tells whom it issued a token.
	Entra Entra
	// Tenant is the tenant the registry belongs to.
	Tenant string
	// Pullers are the client IDs of the service principals that hold the AcrPull role.
	Pullers []string
}

// Registry is a running registry.
type Registry struct {
	// Admin is the admin user's name and password, which may push.
	Admin [2]string

	cfg    Config
	tokens *tokenServer
	front  *http.Server
	cmd    *exec.Cmd
	done   chan struct{}
}

// Start starts distribution and the front, and waits until the registry answers.
func Start(ctx context.Context, cfg Config) (*Registry, error) {
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "storage"), 0o700); err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	r := &Registry{Admin: [2]string{"credwatch-admin", randomHex()}, cfg: cfg, done: make(chan struct{})}
	r.tokens = &tokenServer{
		entra: cfg.Entra, tenant: cfg.Tenant, service: cfg.LoginServer, issuer: "Azure Container Registry",
		key: key, keyID: randomHex(), admin: r.Admin, pullers: slices.Clone(cfg.Pullers), lifetime: 5 * time.Minute,
	}
	backend := "127.0.0.1:" + freePort()
	if err := r.writeConfig(backend); err != nil {
		return nil, err
	}
	if err := r.startDistribution(); err != nil {
		return nil, err
	}
	if err := r.startFront(backend); err != nil {
		r.stopDistribution()
		return nil, err
	}
	if err := r.waitReady(ctx, backend); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// writeConfig writes distribution's configuration and the key set its tokens are checked with.
func (r *Registry) writeConfig(backend string) error {
	pub := r.tokens.key.PublicKey
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": r.tokens.keyID,
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.cfg.Dir, "jwks.json"), jwks, 0o600); err != nil {
		return err
	}
	conf := fmt.Sprintf(`version: 0.1
log: {level: info, formatter: text}
storage:
  filesystem: {rootdirectory: %q}
http:
  addr: %s
  secret: %s
  # Behind the front: links in answers are relative, so they point at the front.
  relativeurls: true
auth:
  token:
    realm: %q
    service: %s
    issuer: %q
    jwks: %q
`, filepath.Join(r.cfg.Dir, "storage"), backend, randomHex(), "https://"+r.cfg.Addr+"/oauth2/token",
		r.cfg.LoginServer, r.tokens.issuer, filepath.Join(r.cfg.Dir, "jwks.json"))
	return os.WriteFile(filepath.Join(r.cfg.Dir, "config.yml"), []byte(conf), 0o600)
}

func (r *Registry) startDistribution() error {
	log, err := os.Create(filepath.Join(r.cfg.Dir, "registry.log"))
	if err != nil {
		return err
	}
	r.cmd = exec.Command(r.cfg.Binary, "serve", filepath.Join(r.cfg.Dir, "config.yml"))
	r.cmd.Stdout, r.cmd.Stderr = log, log
	// Killed with the test process, which a test's cleanup would not be.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting the registry: %w", err)
	}
	go func() {
		_ = r.cmd.Wait()
		_ = log.Close()
		close(r.done)
	}()
	return nil
}

// startFront serves the token endpoints and passes everything else to distribution, over TLS on
// Addr.
func (r *Registry) startFront(backend string) error {
	l, err := net.Listen("tcp", r.cfg.Addr)
	if err != nil {
		return err
	}
	target := &url.URL{Scheme: "http", Host: backend}
	mux := http.NewServeMux()
	mux.Handle("/oauth2/", r.tokens)
	mux.Handle("/", &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }})
	r.front = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.front.ServeTLS(l, r.cfg.CertFile, r.cfg.KeyFile) }()
	return nil
}

// waitReady waits until distribution answers: 401 to an anonymous /v2/, as a registry with
// token authentication does.
func (r *Registry) waitReady(ctx context.Context, backend string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+backend+"/v2/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-r.done:
			data, _ := os.ReadFile(filepath.Join(r.cfg.Dir, "registry.log"))
			return fmt.Errorf("the registry exited: %s", data)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the registry: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WriteHosts writes containerd's hosts.toml for the login server into hostsDir, the registry
// configuration folder (config_path) of the nodes' containerd: pulls of LoginServer go to Addr,
// trusting caFile, and to nothing else.
func (r *Registry) WriteHosts(hostsDir, caFile string) error {
	dir := filepath.Join(hostsDir, r.cfg.LoginServer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// containerd 1.6 wants a [host] entry, and tries the server after it: both are the registry,
	// with its CA, so that no other address is ever asked (an absent server would be the login
	// server's name, looked up in DNS).
	server := "https://" + r.cfg.Addr
	settings := fmt.Sprintf("ca = %q\ncapabilities = [\"pull\", \"resolve\", \"push\"]\n", caFile)
	hosts := fmt.Sprintf("server = %q\n%s\n[host.%q]\n%s", server, settings, server, settings)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644)
}

// Grants are the token server's answers so far.
func (r *Registry) Grants() []Grant {
	r.tokens.mu.Lock()
	defer r.tokens.mu.Unlock()
	return slices.Clone(r.tokens.grants)
}

// Close stops the front and distribution.
func (r *Registry) Close() error {
	err := r.front.Close()
	r.stopDistribution()
	return err
}

func (r *Registry) stopDistribution() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(errors.New("no free port on loopback"))
	}
	defer func() { _ = l.Close() }()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}
