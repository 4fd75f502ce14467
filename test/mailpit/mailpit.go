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
	"testing"
	"time"
)

// Server is a mailpit run as a subprocess. Every test starts its own, so they share no mailbox.
type Server struct {
	SMTPPort int
	api      string
}

// Start runs mailpit with args on free loopback ports until the test ends.
func Start(t *testing.T, args ...string) *Server {
	t.Helper()
	bin := os.Getenv("MAILPIT_BIN")
	if bin == "" {
		t.Fatal("MAILPIT_BIN is not set: run `make test`, or `make mailpit` and MAILPIT_BIN=$PWD/bin/mailpit go test ./...")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("MAILPIT_BIN: %v", err)
	}
	dir := t.TempDir()
	m := &Server{SMTPPort: FreePort(t)}
	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
	m.api = "http://" + httpAddr + "/api/v1"
	log, err := os.Create(filepath.Join(dir, "mailpit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{
		"--smtp", net.JoinHostPort("127.0.0.1", strconv.Itoa(m.SMTPPort)),
		"--listen", httpAddr,
		"--database", filepath.Join(dir, "mailpit.db"),
		"--disable-version-check",
		"--smtp-disable-rdns",
	}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting mailpit: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("mailpit %v logged:\n%s", args, out)
		}
		_ = log.Close()
	})

	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("mailpit %v exited before it was ready: %v\n%s", args, err, out)
		default:
		}
		if m.ready() {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailpit %v did not answer within 20s", args)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	var list struct{ Messages []struct{ ID string } }
	m.get(t, "/messages", &list)
	out := make([]Message, len(list.Messages))
	for i, s := range list.Messages {
		m.get(t, "/message/"+s.ID, &out[i])
	}
	return out
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
	resp, err := http.Get(m.api + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// FreePort is a loopback port nothing listens on, for a server that is down.
func FreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
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
