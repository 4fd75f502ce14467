// Package mailpit runs a real SMTP server, mailpit, for tests, and reads back what arrived through
// its HTTP API. `make test` builds mailpit from hack/mailpit and points MAILPIT_BIN at it.
package mailpit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a mailpit run as a subprocess. Every test starts its own, so they share no mailbox.
type Server struct {
	SMTPPort int
	api      string
	cmd      *exec.Cmd
	exited   chan error
	log      *os.File
}

// Start runs mailpit with args on free loopback ports until the test ends.
func Start(t *testing.T, args ...string) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the mailpit SMTP server: skipped under -short")
	}
	m, err := Run(t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mailpit %v logged:\n%s", args, m.Log())
		}
		m.Stop()
	})
	return m
}

// Run starts mailpit with args on free loopback ports, keeping its database and log in dir, and
// waits until it answers: for the demo, which has no test to tie it to.
func Run(dir string, args ...string) (*Server, error) {
	bin := os.Getenv("MAILPIT_BIN")
	if bin == "" {
		return nil, fmt.Errorf("MAILPIT_BIN is not set: run `make test`, or `make mailpit` and MAILPIT_BIN=$PWD/bin/mailpit")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("MAILPIT_BIN: %w", err)
	}
	// Another process may take a port between its choice here and mailpit's bind: choose again.
	for attempt := 1; ; attempt++ {
		m, err := run(bin, dir, args)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return m, err
		}
	}
}

func run(bin, dir string, args []string) (*Server, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	smtpPort, httpPort := ports[0], ports[1]
	m := &Server{SMTPPort: smtpPort, exited: make(chan error, 1)}
	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
	m.api = "http://" + httpAddr + "/api/v1"
	if m.log, err = os.Create(filepath.Join(dir, "mailpit.log")); err != nil {
		return nil, err
	}
	m.cmd = exec.Command(bin, append([]string{
		"--smtp", net.JoinHostPort("127.0.0.1", strconv.Itoa(m.SMTPPort)),
		"--listen", httpAddr,
		"--database", filepath.Join(dir, "mailpit.db"),
		"--disable-version-check",
		"--smtp-disable-rdns",
	}, args...)...)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting mailpit: %w", err)
	}
	go func() { m.exited <- m.cmd.Wait() }()

	deadline := time.Now().Add(20 * time.Second)
	for !m.ready() {
		select {
		case err := <-m.exited:
			m.exited <- err
			log := m.Log()
			m.Stop() // closes the log, which a second try would otherwise leave open
			return nil, fmt.Errorf("mailpit %v exited before it was ready: %w\n%s", args, err, log)
		default:
		}
		if time.Now().After(deadline) {
			m.Stop()
			return nil, fmt.Errorf("mailpit %v did not answer within 20s", args)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return m, nil
}

// Stop ends mailpit.
func (m *Server) Stop() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	select {
	case <-m.exited:
	case <-time.After(5 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	_ = m.log.Close()
}

// Log is what mailpit logged.
func (m *Server) Log() string {
	out, _ := os.ReadFile(m.log.Name())
	return string(out)
}

func (m *Server) ready() bool {
	resp, err := http.Get(m.api + "/messages")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	conn, err := net.DialTimeout("tcp", m.SMTPAddr(), time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return resp.StatusCode == http.StatusOK
}

// SMTPAddr is where mailpit takes mail.
func (m *Server) SMTPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.SMTPPort)) }

// Address is a mailbox as mailpit reports it: a name and an address.
type Address struct{ Name, Address string }

// Message is the part of mailpit's /api/v1/message/{ID} the tests read.
type Message struct {
	ID, MessageID, Subject, Text, HTML string
	From                               Address
	To                                 []Address
}

// Messages returns every message mailpit received, newest first.
func (m *Server) Messages(t *testing.T) []Message {
	t.Helper()
	out, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// List returns every message mailpit received, newest first. Mailpit lists fifty a page.
func (m *Server) List() ([]Message, error) {
	var out []Message
	for {
		var list struct {
			Total    int
			Messages []struct{ ID string }
		}
		if err := m.fetch(fmt.Sprintf("/messages?start=%d&limit=%d", len(out), listPage), &list); err != nil {
			return nil, err
		}
		for _, s := range list.Messages {
			var msg Message
			if err := m.fetch("/message/"+s.ID, &msg); err != nil {
				return nil, err
			}
			out = append(out, msg)
		}
		if len(list.Messages) == 0 || len(out) >= list.Total {
			return out, nil
		}
	}
}

const listPage = 200

func (m *Server) fetch(path string, into any) error {
	resp, err := http.Get(m.api + path)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// Headers returns the headers of message id.
func (m *Server) Headers(t *testing.T, id string) map[string][]string {
	t.Helper()
	var h map[string][]string
	m.get(t, "/message/"+id+"/headers", &h)
	return h
}

func (m *Server) get(t *testing.T, path string, into any) {
	t.Helper()
	if err := m.fetch(path, into); err != nil {
		t.Fatal(err)
	}
}

// FreePort is a loopback port nothing listens on, for a server that is down.
func FreePort(t *testing.T) int {
	t.Helper()
	p, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return p[0]
}

// freePorts holds every listener open until all n are chosen: a port closed at once may be the
// next one the kernel hands out.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// TLSFlags gives mailpit a certificate for 127.0.0.1, self-signed for this test, and returns the
// pool that trusts it.
func TLSFlags(t *testing.T) ([]string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "credwatch test SMTP server"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return []string{"--smtp-tls-cert", certFile, "--smtp-tls-key", keyFile}, roots
}

// AuthFlags makes mailpit accept one user. Its password file is htpasswd's, read by
// github.com/tg123/go-htpasswd: "user:hash" entries separated by whitespace; {SHA} is the one
// hash the standard library can make.
func AuthFlags(t *testing.T, user, password string) []string {
	t.Helper()
	sum := sha1.Sum([]byte(password))
	file := filepath.Join(t.TempDir(), "smtp-users")
	writeFile(t, file, []byte(fmt.Sprintf("%s:{SHA}%s\n", user, base64.StdEncoding.EncodeToString(sum[:]))))
	return []string{"--smtp-auth-file", file}
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
