package fakegraph

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultTokenLifetime matches what Entra grants app-only tokens (one second under an hour).
const DefaultTokenLifetime = 3599 * time.Second

// Server is one fake cloud: a login authority and a Graph endpoint sharing a host, as tests need
// both to reach the same state (a secret added through Graph must work at the token endpoint).
type Server struct {
	ts *httptest.Server

	mu            sync.Mutex
	tenants       map[string]*tenant // by lower-cased tenant ID: MSAL lower-cases parts of the authority
	tokens        map[string]issuedToken
	deniedClients map[string]bool // by lower-cased client ID
	usersHidden   map[string]bool // by lower-cased client ID
	reportsDenied map[string]bool // by lower-cased client ID: no AuditLog.Read.All
	// appsHidden are the applications each client may not read, by lower-cased client ID and appId.
	appsHidden map[[2]string]bool
	// appFaults are the answers the next point reads of an application get, by lower-cased appId.
	appFaults     map[string][]int
	signInLag     time.Duration
	signInClock   clock.PassiveClock
	throttleLeft  int
	throttleAfter time.Duration
	budget        *budget
	latency       time.Duration
	unreachable   bool
	stalled       bool
	closing       chan struct{}
	tokenLifetime time.Duration
	propagation   time.Duration
	pageLimit     int
	requests      []Request
	tokenRequests []TokenRequest
	seq           int // orders objects as Graph lists them: by creation
	// changeSeq orders every write, for delta rounds; deltaLag and deltaClock: see SetDeltaLag.
	changeSeq  int64
	deltaLag   time.Duration
	deltaClock clock.PassiveClock
	// auditUser and auditIP are who the audit log says made the admin API's changes.
	auditUser, auditIP string
}

type tenant struct {
	id   string // as first registered, for reporting
	apps map[string]*stored
	sps  map[string]*stored
	// listed is each map in Graph's list order, built when a list needs it and dropped when an
	// object comes or goes: sorting 100,000 objects for every page would be most of a benchmark.
	listed map[bool][]*stored // by whether it is sps
	// byID indexes each map by lower object ID, built when a lookup by ID needs it and dropped
	// when an object comes, goes or is replaced: owners are read by object ID, tens of thousands
	// at a time.
	byID    map[bool]map[string]*stored
	clients map[string]map[string]bool // lower client ID -> secrets
	// certs and federated are the certificates and federated credentials of lower client IDs.
	certs     map[string][]*x509.Certificate
	federated map[string][]FederatedCredential
	// domains are the tenant's verified domains, the first its initial one.
	domains []string
	// signIns are the times each credential, by lower keyId, signed in, the latest last.
	signIns map[string][]time.Time
	// unlicensed: no Entra ID P1 or P2, which the sign-in activity reports need.
	unlicensed bool
	// changes are the writes of the last week, in order, for delta rounds; deltaEpoch counts
	// ResetDeltaState calls.
	changes    []change
	deltaEpoch int
	// audits is the directory audit log's credential changes, oldest first.
	audits []audit
}

type stored struct {
	obj Object
	seq int
}

type issuedToken struct {
	tenantID, clientID, audience string
	expires                      time.Time
}

// PasswordCredential is a client secret as Graph models it. SecretText is held so the token
// endpoint can accept it, but Graph never returns it on a GET, as in Azure.
type PasswordCredential struct {
	KeyID, DisplayName, Hint, SecretText string
	Start, End                           time.Time
	// UsableAt is when Entra starts accepting the secret at the token endpoint: addPassword sets
	// it SetPropagationDelay after creation, as real secrets take seconds to replicate.
	UsableAt time.Time
}

// KeyCredential is a certificate as Graph models it. Key is returned only when $select names
// keyCredentials, as in Azure: a scan that selects them carries every certificate's bytes.
type KeyCredential struct {
	KeyID, DisplayName, Type, Usage string
	CustomKeyIdentifier, Key        []byte
	Start, End                      time.Time
}

// Object is an application or a service principal: both carry credentials and a watcher must read
// both, because `az ad sp credential reset` writes to the service principal.
type Object struct {
	ID, AppID, DisplayName string
	Passwords              []PasswordCredential
	Keys                   []KeyCredential
	// Owners are listed by /applications/{id}/owners (and the same on service principals).
	Owners []Owner
	// Tags are the object's tags, which $filter=tags/any(t:t eq '...') selects by.
	Tags []string
	// PreferredSingleSignOnMode is a service principal's (saml, oidc, password, notSupported);
	// Graph returns null when it is unset.
	PreferredSingleSignOnMode string
	// AppOwnerOrganizationID is a service principal's appOwnerOrganizationId, the tenant its
	// application is registered in. PutServicePrincipal sets the tenant's own when it holds the
	// application then and none is given; Graph returns null when it is empty.
	AppOwnerOrganizationID string
}

// Owner is an owner of an application: a user, or a service principal (which has no mail).
type Owner struct {
	ID, DisplayName, Mail, UserPrincipalName string
	ServicePrincipal                         bool
	// Guest: a user invited from outside the tenant (userType Guest).
	Guest bool
}

// Request is what a test can assert about a Graph call without seeing any secret. Path is
// unescaped, so the quoted and %27 forms of a key log alike; ClientID and TenantID come from the
// bearer token when it is one the server issued. Status is 0 for a request whose connection was
// dropped (SetUnreachable).
type Request struct {
	Method, Path, RawQuery string
	Status                 int
	ClientID, TenantID     string
	// Batched marks a sub-request of a $batch; the $batch itself is logged as the one HTTP request.
	Batched bool
}

// IsBatch reports whether r is a $batch, which carries the requests logged as Batched.
func (r Request) IsBatch() bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/$batch")
}

// TokenRequest is one call to the token endpoint, so tests can check that a new secret was
// verified (or that nothing asked for tokens at all). Error is Entra's error code, "" on success.
type TokenRequest struct {
	TenantID, ClientID string
	Status             int
	Error              string
}

// New starts a server on 127.0.0.1 with HTTP/1.1 only, because SetUnreachable hijacks
// connections, which HTTP/2 cannot do.
func New() *Server {
	return NewOn(nil, nil)
}

// NewOn starts a server on l with cert, for clients that reach it elsewhere than on the
// machine's loopback (the pods of a test cluster) and trust cert's CA; nil for loopback and
// httptest's certificate.
func NewOn(l net.Listener, cert *tls.Certificate) *Server {
	s := &Server{
		tenants:       map[string]*tenant{},
		tokens:        map[string]issuedToken{},
		closing:       make(chan struct{}),
		deniedClients: map[string]bool{},
		usersHidden:   map[string]bool{},
		reportsDenied: map[string]bool{},
		appsHidden:    map[[2]string]bool{},
		appFaults:     map[string][]int{},
		tokenLifetime: DefaultTokenLifetime,
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	if l != nil {
		_ = s.ts.Listener.Close()
		s.ts.Listener = l
	}
	if cert != nil {
		s.ts.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	s.ts.StartTLS()
	return s
}

// URL has no trailing slash; azidentity wants URL()+"/" as ActiveDirectoryAuthorityHost.
func (s *Server) URL() string { return s.ts.URL }

// GraphURL is the base URL to give Kiota's request adapter in place of
// https://graph.microsoft.com/v1.0.
func (s *Server) GraphURL() string { return s.ts.URL + "/v1.0" }

// Host is the name msgraph-sdk-go must be told to attach tokens for
// (NewGraphServiceClientWithCredentialsAndHosts); Kiota compares host names without ports.
func (s *Server) Host() string {
	u, _ := url.Parse(s.ts.URL)
	return u.Hostname()
}

// Client trusts the server's self-signed certificate; pass it as the transport of every SDK.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// CertPEM is the server certificate, for a process that can only be told about a CA through a
// file (SSL_CERT_FILE).
func (s *Server) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// Certificate is the server certificate, for building a custom cert pool.
func (s *Server) Certificate() *x509.Certificate { return s.ts.Certificate() }

// Close stops the server; SDK clients built on Client() stop working too.
// Close stops the server, releasing requests held by SetStalled first.
func (s *Server) Close() {
	close(s.closing)
	s.ts.Close()
}

func (s *Server) tenantLocked(tenantID string, create bool) *tenant {
	key := strings.ToLower(tenantID)
	t := s.tenants[key]
	if t == nil && create {
		t = &tenant{id: tenantID, apps: map[string]*stored{}, sps: map[string]*stored{}, clients: map[string]map[string]bool{},
			certs: map[string][]*x509.Certificate{}, federated: map[string][]FederatedCredential{}}
		s.tenants[key] = t
	}
	return t
}

// Requests returns a copy of the Graph requests seen so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// TokenRequests returns a copy of the token-endpoint calls seen so far, in order.
func (s *Server) TokenRequests() []TokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TokenRequest(nil), s.tokenRequests...)
}

// ResetRequests forgets the Graph and token requests seen so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	s.tokenRequests = nil
}

// SecretTexts lists, sorted and without duplicates, every secret the server holds (SecretTexts of
// all objects and AddClient secrets) and every access token it issued, so tests can check logs,
// events and status for leaks.
func (s *Server) SecretTexts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[string]bool{}
	for tok := range s.tokens {
		set[tok] = true
	}
	for _, t := range s.tenants {
		for _, m := range []map[string]*stored{t.apps, t.sps} {
			for _, st := range m {
				for _, p := range st.obj.Passwords {
					if p.SecretText != "" {
						set[p.SecretText] = true
					}
				}
			}
		}
		for _, secrets := range t.clients {
			for sec := range secrets {
				if sec != "" {
					set[sec] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for sec := range set {
		out = append(out, sec)
	}
	sort.Strings(out)
	return out
}

// serveHTTP splits the host between the two services the way their URLs already differ: the
// authority's two routes live under /{tenant}/, everything else is Graph's.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	segs := splitPath(r)
	switch {
	case len(segs) == 4 && segs[1] == "v2.0" && segs[2] == ".well-known" && segs[3] == "openid-configuration":
		s.serveOpenIDConfiguration(w, r, segs[0])
	case len(segs) == 4 && segs[1] == "oauth2" && segs[2] == "v2.0" && segs[3] == "token":
		s.serveToken(w, r, segs[0])
	default:
		s.serveGraph(w, r, segs)
	}
}

// splitPath splits the escaped path before unescaping, so an encoded "/" inside a key stays in
// its segment.
func splitPath(r *http.Request) []string {
	p := strings.Trim(r.URL.EscapedPath(), "/")
	if p == "" {
		return nil
	}
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if u, err := url.PathUnescape(part); err == nil {
			parts[i] = u
		}
	}
	return parts
}
