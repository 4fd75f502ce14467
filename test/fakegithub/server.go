// Package fakegithub is GitHub's REST API for Actions secrets, as a rotation that publishes a new
// client secret to a repository or an environment uses it: the repository's public key, a
// secret sealed with it set, read (its name and dates, never its value) and deleted. It keeps
// the private key of each repository and environment and opens what it receives, so that a test
// proves the value published is the secret, and nothing else. Tokens are allowed per repository
// and answered as GitHub does (401 bad credentials, 403 for a token without the repository, 404
// for a repository it cannot see); every answer carries the x-ratelimit-* headers, the primary
// limit answers 403 with x-ratelimit-remaining 0, and a secondary limit 403 with Retry-After
// (docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api).
package fakegithub

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/nacl/box"
)

// Server is a fake api.github.com over TLS.
type Server struct {
	ts *httptest.Server

	mu     sync.Mutex
	repos  map[string]*repo // by lower-cased owner/name
	tokens map[string]map[string]bool
	nextID int64
	// limit and used count the primary rate limit of the clock's hour, which began at hour;
	// secondaryLeft requests more are answered with a secondary limit, to retry after secondary.
	limit, used   int
	hour          time.Time
	secondary     time.Duration
	secondaryLeft int
	requests      []Request
	now           func() time.Time
}

// Request is a request the fake answered: its method and path, never a body or a token.
type Request struct{ Method, Path string }

type repo struct {
	id           int64
	owner, name  string
	actions      *keyring
	environments map[string]*keyring
}

// keyring is where secrets of one repository or environment are sealed to, and what they hold.
type keyring struct {
	keyID   string
	public  *[32]byte
	private *[32]byte
	secrets map[string]*secret // by upper-cased name: GitHub's names are not case-sensitive
}

type secret struct {
	name             string
	value            string
	created, updated time.Time
}

// New starts a fake with a primary rate limit of 5,000 requests an hour, as GitHub gives a token.
func New() *Server {
	s := &Server{repos: map[string]*repo{}, tokens: map[string]map[string]bool{}, nextID: 1000, limit: 5000, now: time.Now}
	s.ts = httptest.NewTLSServer(s.routes())
	return s
}

// URL is the API's base URL, as a client's BaseURL (with a trailing slash).
func (s *Server) URL() string { return s.ts.URL + "/" }

// Client is an HTTP client that trusts the fake's certificate.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Close stops the fake.
func (s *Server) Close() { s.ts.Close() }

// AddRepo adds owner/name with the deployment environments envs, each with keys of its own.
func (s *Server) AddRepo(owner, name string, envs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	r := &repo{id: s.nextID, owner: owner, name: name, actions: newKeyring(), environments: map[string]*keyring{}}
	for _, e := range envs {
		r.environments[strings.ToLower(e)] = newKeyring()
	}
	s.repos[strings.ToLower(owner+"/"+name)] = r
}

// AddToken allows token on the repositories named owner/name, with "Secrets: write" on each.
func (s *Server) AddToken(token string, repos ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	allowed := map[string]bool{}
	for _, r := range repos {
		allowed[strings.ToLower(r)] = true
	}
	s.tokens[token] = allowed
}

// Secret is the value of secret name of owner/repo (of its environment env, when not empty), as
// the fake opened it.
func (s *Server) Secret(owner, repoName, env, name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[strings.ToLower(owner+"/"+repoName)]
	if r == nil {
		return "", false
	}
	k := r.actions
	if env != "" {
		if k = r.environments[strings.ToLower(env)]; k == nil {
			return "", false
		}
	}
	sec := k.secrets[strings.ToUpper(name)]
	if sec == nil {
		return "", false
	}
	return sec.value, true
}

// SetClock sets the fake's clock, for the times it gives secrets.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetRateLimit sets the primary limit of the hour, and forgets what was used.
func (s *Server) SetRateLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit, s.used = limit, 0
}

// SecondaryLimit answers the next n requests with a secondary rate limit, to retry after wait.
func (s *Server) SecondaryLimit(n int, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secondaryLeft, s.secondary = n, wait
}

// Requests are the requests answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func newKeyring() *keyring {
	public, private, err := box.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	// GitHub's key IDs are long decimal numbers.
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &keyring{keyID: strconv.FormatUint(binary.BigEndian.Uint64(id[:])>>1, 10), public: public, private: private, secrets: map[string]*secret{}}
}

// errorBody is GitHub's error document.
type errorBody struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
	Status           string `json:"status"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg, doc string) {
	writeJSON(w, status, errorBody{Message: msg, DocumentationURL: doc, Status: strconv.Itoa(status)})
}

// sealedKey is a public key as GitHub hands it out.
type sealedKey struct {
	KeyID string `json:"key_id"`
	Key   string `json:"key"`
}

func (k *keyring) publicKey() sealedKey {
	return sealedKey{KeyID: k.keyID, Key: base64.StdEncoding.EncodeToString(k.public[:])}
}

// open opens a value sealed to k (libsodium's crypto_box_seal, as GitHub asks).
func (k *keyring) open(encrypted string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return "", fmt.Errorf("encrypted_value is not base64: %w", err)
	}
	out, ok := box.OpenAnonymous(nil, b, k.public, k.private)
	if !ok {
		return "", fmt.Errorf("encrypted_value was not sealed with key %s", k.keyID)
	}
	return string(out), nil
}
