package registry

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// AnonymousUser is the user name ACR's clients give with a refresh token as the password, as
// the ACR credential provider does after an exchange and `az acr login` does.
const AnonymousUser = "00000000-0000-0000-0000-000000000000"

// registryResource is the resource an Entra access token for ACR is issued for.
const registryResource = "https://containerregistry.azure.net"

// Entra is what the token server asks Entra ID: whether it issued an access token, and, through
// its token endpoint, whether a client ID and secret sign in.
type Entra interface {
	Issued(accessToken string) (tenantID, clientID, audience string, ok bool)
	URL() string
	Client() *http.Client
}

// Grant is one answer of the token server, for tests to tell who pulled and who was refused.
type Grant struct {
	// Principal is who asked: a client ID, the admin user, or "" when anonymous.
	Principal string
	// Scope is what was asked, as "repository:<name>:<actions>".
	Scope string
	// Refused says the request was refused (401), and Reason why.
	Refused bool
	Reason  string
	Time    time.Time
}

// tokenServer speaks ACR's OAuth protocol (https://github.com/Azure/acr/blob/main/docs/AAD-OAuth.md):
// POST /oauth2/exchange turns an Entra access token into a refresh token; /oauth2/token turns a
// refresh token, or a client ID and secret (a service principal, as AKS nodes sign in), or the
// admin user's password, into a registry token for the scope asked. A service principal's secret
// is checked by signing in to Entra with it, so an expired secret is refused as ACR refuses it.
type tokenServer struct {
	entra    Entra
	tenant   string
	service  string
	issuer   string
	key      *rsa.PrivateKey
	keyID    string
	admin    [2]string
	pullers  []string
	lifetime time.Duration

	mu     sync.Mutex
	grants []Grant
}

func (s *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/oauth2/exchange":
		s.exchange(w, r)
	case "/oauth2/token":
		s.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

// exchange turns an Entra access token issued for ACR into a refresh token of the registry.
func (s *tokenServer) exchange(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		s.refuse(w, "", "", "POST a form to exchange a token")
		return
	}
	grant := r.PostForm.Get("grant_type")
	if grant != "access_token" && grant != "access_token_refresh_token" {
		s.refuse(w, "", "", fmt.Sprintf("unsupported grant_type %q", grant))
		return
	}
	tenant, client, audience, ok := s.entra.Issued(r.PostForm.Get("access_token"))
	if !ok || !strings.EqualFold(tenant, s.tenant) || strings.TrimSuffix(audience, "/") != registryResource {
		s.refuse(w, client, "", "the access token was not issued by Entra ID for this registry")
		return
	}
	refresh, err := s.sign(jwt.MapClaims{"sub": client, "grant_type": "refresh_token", "aud": s.service}, 3*time.Hour)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.record(Grant{Principal: client})
	writeJSON(w, map[string]string{"refresh_token": refresh})
}

// token answers a registry token for the scopes asked, to whoever the request proves to be.
func (s *tokenServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.refuse(w, "", "", "malformed form")
		return
	}
	scope := strings.Join(r.Form["scope"], " ")
	user, password := r.PostForm.Get("username"), r.PostForm.Get("password")
	switch r.PostForm.Get("grant_type") {
	case "refresh_token":
		user, password = AnonymousUser, r.PostForm.Get("refresh_token")
	case "password":
	default:
		var ok bool
		if user, password, ok = r.BasicAuth(); !ok {
			s.refuse(w, "", scope, "authentication required")
			return
		}
	}
	principal, actions, reason := s.authenticate(r.Context(), user, password)
	if reason != "" {
		s.refuse(w, principal, scope, reason)
		return
	}
	access := grantedAccess(scope, actions)
	token, err := s.sign(jwt.MapClaims{"sub": principal, "aud": s.service, "access": access}, s.lifetime)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.record(Grant{Principal: principal, Scope: scope})
	writeJSON(w, map[string]any{"access_token": token, "token": token, "expires_in": int(s.lifetime / time.Second)})
}

// authenticate says who user and password prove the caller to be and which actions it may take,
// or why it is refused.
func (s *tokenServer) authenticate(ctx context.Context, user, password string) (principal string, actions []string, reason string) {
	switch user {
	case AnonymousUser:
		claims, err := s.verify(password)
		if err != nil || claims["grant_type"] != "refresh_token" {
			return "", nil, "the refresh token is not valid"
		}
		sub, _ := claims["sub"].(string)
		return sub, s.pullActions(sub), ""
	case s.admin[0]:
		if password != s.admin[1] {
			return user, nil, "the admin user's password is wrong"
		}
		return user, []string{"pull", "push"}, ""
	default:
		if err := s.signIn(ctx, user, password); err != nil {
			return user, nil, err.Error()
		}
		return user, s.pullActions(user), ""
	}
}

// pullActions are what a service principal may do: pull, if it holds the AcrPull role here.
func (s *tokenServer) pullActions(clientID string) []string {
	if slices.ContainsFunc(s.pullers, func(p string) bool { return strings.EqualFold(p, clientID) }) {
		return []string{"pull"}
	}
	return nil
}

// signIn asks Entra's token endpoint for a token for the registry with the client's secret, as
// ACR does for a service principal's basic authentication.
func (s *tokenServer) signIn(ctx context.Context, clientID, secret string) error {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}, "scope": {registryResource + "/.default"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.entra.URL()+"/"+s.tenant+"/oauth2/v2.0/token", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.entra.Client().Do(req)
	if err != nil {
		return fmt.Errorf("signing in to Entra ID: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var e struct {
		Description string `json:"error_description"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return fmt.Errorf("Entra ID refused the service principal's sign-in: %s", strings.SplitN(e.Description, "\n", 2)[0])
}

// grantedAccess is the access claim of a registry token: each repository scope asked, with the
// actions asked that are allowed.
func grantedAccess(scope string, allowed []string) []map[string]any {
	access := []map[string]any{}
	for _, sc := range strings.Fields(scope) {
		parts := strings.Split(sc, ":")
		if len(parts) != 3 || parts[0] != "repository" {
			continue
		}
		var actions []string
		for _, a := range strings.Split(parts[2], ",") {
			if slices.Contains(allowed, a) {
				actions = append(actions, a)
			}
		}
		access = append(access, map[string]any{"type": "repository", "name": parts[1], "actions": actions})
	}
	return access
}

func (s *tokenServer) sign(claims jwt.MapClaims, lifetime time.Duration) (string, error) {
	now := time.Now()
	claims["iss"], claims["iat"], claims["nbf"], claims["exp"] = s.issuer, now.Unix(), now.Add(-time.Minute).Unix(), now.Add(lifetime).Unix()
	claims["jti"] = fmt.Sprintf("%d", now.UnixNano())
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	t.Header["kid"] = s.keyID
	return t.SignedString(s.key)
}

func (s *tokenServer) verify(token string) (jwt.MapClaims, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return &s.key.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(s.issuer), jwt.WithAudience(s.service))
	return claims, err
}

// refuse answers 401 as ACR does, with the error body registries use.
func (s *tokenServer) refuse(w http.ResponseWriter, principal, scope, reason string) {
	s.record(Grant{Principal: principal, Scope: scope, Refused: true, Reason: reason})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": "UNAUTHORIZED", "message": reason}}})
}

func (s *tokenServer) record(g Grant) {
	g.Time = time.Now()
	s.mu.Lock()
	s.grants = append(s.grants, g)
	s.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
