package fakegraph

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// graphAudiences are the resource names a token must be issued for to be accepted by Graph: the
// URI and the well-known application ID of Microsoft Graph.
var graphAudiences = map[string]bool{
	"https://graph.microsoft.com":          true,
	"00000003-0000-0000-c000-000000000000": true,
}

var oidcScopes = map[string]bool{"openid": true, "profile": true, "offline_access": true, "email": true}

func tenantNotFound(tenantID string) string {
	return fmt.Sprintf("Tenant '%s' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud. "+
		"Check with your subscription administrator, this may happen if there are no active subscriptions for the tenant.", tenantID)
}

// serveOpenIDConfiguration answers MSAL's tenant discovery. MSAL needs authorization_endpoint,
// token_endpoint and an issuer on the authority's own scheme and host:port; the other members are
// those Entra sends, for clients that read them.
func (s *Server) serveOpenIDConfiguration(w http.ResponseWriter, r *http.Request, tenantID string) {
	s.mu.Lock()
	t := s.tenantLocked(tenantID, false)
	s.mu.Unlock()
	if t == nil {
		s.entraError(w, r, http.StatusBadRequest, "invalid_tenant", 90002, tenantNotFound(tenantID))
		return
	}
	base := s.URL() + "/" + t.id
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, object{
		{"token_endpoint", base + "/oauth2/v2.0/token"},
		{"token_endpoint_auth_methods_supported", []string{"client_secret_post", "private_key_jwt", "client_secret_basic"}},
		{"jwks_uri", base + "/discovery/v2.0/keys"},
		{"response_modes_supported", []string{"query", "fragment", "form_post"}},
		{"subject_types_supported", []string{"pairwise"}},
		{"id_token_signing_alg_values_supported", []string{"RS256"}},
		{"response_types_supported", []string{"code", "id_token", "code id_token", "id_token token"}},
		{"scopes_supported", []string{"openid", "profile", "email", "offline_access"}},
		{"issuer", base + "/v2.0"},
		{"request_uri_parameter_supported", false},
		{"userinfo_endpoint", s.URL() + "/oidc/userinfo"},
		{"authorization_endpoint", base + "/oauth2/v2.0/authorize"},
		{"device_authorization_endpoint", base + "/oauth2/v2.0/devicecode"},
		{"http_logout_supported", true},
		{"frontchannel_logout_supported", true},
		{"end_session_endpoint", base + "/oauth2/v2.0/logout"},
		{"claims_supported", []string{"sub", "iss", "cloud_instance_name", "cloud_instance_host_name", "cloud_graph_host_name", "msgraph_host", "aud", "exp", "iat", "auth_time", "acr", "nonce", "preferred_username", "name", "tid", "ver", "at_hash", "c_hash", "email"}},
		{"kerberos_endpoint", base + "/kerberos"},
		{"tenant_region_scope", "NA"},
		{"cloud_instance_name", "microsoftonline.com"},
		{"cloud_graph_host_name", "graph.windows.net"},
		{"msgraph_host", s.Host()},
		{"rbac_url", "https://pas.windows.net"},
	})
}

// tokenFailure is an Entra OAuth error, kept apart from writing so the token log can record it.
type tokenFailure struct {
	status int
	err    string
	code   int
	desc   string
}

// serveToken implements the client-credentials grant with a shared secret, checking in Entra's
// order: tenant, request shape, client, secret.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request, tenantID string) {
	clientID := ""
	tok, fail := s.issueToken(r, tenantID, &clientID)
	s.mu.Lock()
	rec := TokenRequest{TenantID: tenantID, ClientID: clientID, Status: http.StatusOK}
	if t := s.tenantLocked(tenantID, false); t != nil {
		rec.TenantID = t.id
	}
	if fail != nil {
		rec.Status, rec.Error = fail.status, fail.err
	}
	s.tokenRequests = append(s.tokenRequests, rec)
	s.mu.Unlock()
	if fail != nil {
		s.entraError(w, r, fail.status, fail.err, fail.code, fail.desc)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store, no-cache")
	h.Set("Pragma", "no-cache")
	h.Set("x-ms-request-id", newUUID())
	if c := r.Header.Get("client-request-id"); c != "" {
		h.Set("client-request-id", c)
	}
	writeJSON(w, http.StatusOK, tok)
}

func (s *Server) issueToken(r *http.Request, tenantID string, clientID *string) (object, *tokenFailure) {
	badRequest := func(err string, code int, desc string) *tokenFailure {
		return &tokenFailure{http.StatusBadRequest, err, code, desc}
	}
	missing := func(param string) *tokenFailure {
		return badRequest("invalid_request", 900144, fmt.Sprintf("The request body must contain the following parameter: '%s'.", param))
	}
	if r.Method != http.MethodPost {
		return nil, badRequest("invalid_request", 900561, fmt.Sprintf("The endpoint only accepts POST, OPTIONS requests. Received a %s request.", r.Method))
	}
	s.mu.Lock()
	known := s.tenantLocked(tenantID, false) != nil
	s.mu.Unlock()
	if !known {
		return nil, badRequest("invalid_tenant", 90002, tenantNotFound(tenantID))
	}
	body, err := readBody(r)
	if err != nil {
		return nil, badRequest("invalid_request", 900144, "The request body must contain the following parameter: 'grant_type'.")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, badRequest("invalid_request", 90014, "The request body is not a valid application/x-www-form-urlencoded form.")
	}
	id, secret := form.Get("client_id"), form.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok { // client_secret_basic
		if id == "" {
			id, _ = url.QueryUnescape(u)
		}
		if secret == "" {
			secret, _ = url.QueryUnescape(p)
		}
	}
	*clientID = id
	grant := form.Get("grant_type")
	switch {
	case grant == "":
		return nil, missing("grant_type")
	case grant != "client_credentials":
		return nil, badRequest("unsupported_grant_type", 70003, fmt.Sprintf("The app requested an unsupported grant type '%s'.", grant))
	case id == "":
		return nil, missing("client_id")
	}
	rawScope := strings.TrimSpace(form.Get("scope"))
	if rawScope == "" {
		return nil, missing("scope")
	}
	// MSAL appends "openid offline_access profile" even to client-credential requests; Entra
	// ignores these OpenID Connect scopes and wants exactly one resource's /.default.
	var resources []string
	for _, sc := range strings.Fields(rawScope) {
		if !oidcScopes[sc] {
			resources = append(resources, sc)
		}
	}
	if len(resources) != 1 || !strings.HasSuffix(resources[0], "/.default") {
		return nil, badRequest("invalid_scope", 1002012, fmt.Sprintf("The provided value for scope %s is not valid. "+
			"Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).", rawScope))
	}
	scope := resources[0]

	if assertion := form.Get("client_assertion"); assertion != "" || form.Get("client_assertion_type") != "" {
		if form.Get("client_assertion_type") != jwtBearer {
			return nil, badRequest("invalid_request", 90014, "The request body must contain the following parameter: 'client_assertion_type'.")
		}
		s.mu.Lock()
		t := s.tenantLocked(tenantID, false)
		key := strings.ToLower(id)
		certs, federated := slices.Clone(t.certs[key]), slices.Clone(t.federated[key])
		s.mu.Unlock()
		if len(certs) == 0 && len(federated) == 0 {
			return nil, badRequest("unauthorized_client", 700016, fmt.Sprintf("Application with identifier '%s' was not found in the directory '%s'.", id, t.id))
		}
		if f := checkAssertion(id, assertion, s.URL()+"/"+tenantID+"/oauth2/v2.0/token", certs, federated); f != nil {
			return nil, f
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(tenantID, false)
	if t == nil { // deleted meanwhile; cannot happen today but keeps the lookup honest
		return nil, badRequest("invalid_tenant", 90002, tenantNotFound(tenantID))
	}
	if form.Get("client_assertion") == "" {
		now := time.Now()
		keyID, err := t.checkSecret(id, secret, now)
		if err != nil {
			var f *tokenFailure
			errors.As(err, &f)
			return nil, f
		}
		t.signedIn(keyID, s.signInNow())
	}
	lifetime := int(s.tokenLifetime / time.Second)
	access := newOpaqueToken()
	s.tokens[access] = issuedToken{
		tenantID: t.id,
		clientID: id,
		audience: strings.TrimSuffix(scope, "/.default"),
		expires:  time.Now().Add(s.tokenLifetime),
	}
	return object{
		{"token_type", "Bearer"},
		{"expires_in", lifetime},
		{"ext_expires_in", lifetime},
		{"access_token", access},
	}, nil
}

func (f *tokenFailure) Error() string { return fmt.Sprintf("%s: AADSTS%d", f.err, f.code) }

// checkSecret accepts a secret registered with AddClient or a current SecretText on the tenant's
// application or service principal for that appId, which is how a rotated secret becomes usable.
// It returns the keyId of the credential it accepted, "" for one registered with AddClient.
func (t *tenant) checkSecret(clientID, secret string, now time.Time) (string, error) {
	key := strings.ToLower(clientID)
	registered := t.clients[key]
	var objs []*stored
	for _, m := range []map[string]*stored{t.apps, t.sps} {
		if st := m[key]; st != nil {
			objs = append(objs, st)
		}
	}
	if registered == nil && len(objs) == 0 {
		return "", &tokenFailure{http.StatusBadRequest, "unauthorized_client", 700016, fmt.Sprintf(
			"Application with identifier '%s' was not found in the directory '%s'. This can happen if the application has not been installed by "+
				"the administrator of the tenant or consented to by any user in the tenant. You may have sent your authentication request to the wrong tenant.",
			clientID, t.id)}
	}
	if secret == "" {
		return "", &tokenFailure{http.StatusUnauthorized, "invalid_client", 7000218,
			"The request body must contain the following parameter: 'client_assertion' or 'client_secret'."}
	}
	if registered[secret] {
		return "", nil
	}
	expired := false
	for _, st := range objs {
		for _, p := range st.obj.Passwords {
			if p.SecretText == "" || p.SecretText != secret {
				continue
			}
			switch {
			case !p.End.IsZero() && !now.Before(p.End):
				expired = true
			case !p.UsableAt.IsZero() && now.Before(p.UsableAt):
				// Not replicated yet: Entra says nothing more helpful than "invalid secret".
			case p.Start.IsZero() || !now.Before(p.Start):
				return p.KeyID, nil
			}
		}
	}
	if expired {
		return "", &tokenFailure{http.StatusUnauthorized, "invalid_client", 7000222, fmt.Sprintf(
			"The provided client secret keys for app '%s' are expired. Visit the Azure portal to create new keys for your app: "+
				"https://aka.ms/NewClientSecret, or consider using certificate credentials for added security: https://aka.ms/certCreds.", clientID)}
	}
	return "", &tokenFailure{http.StatusUnauthorized, "invalid_client", 7000215, fmt.Sprintf(
		"Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, "+
			"for a secret added to app '%s'.", clientID)}
}

// Issued says to whom the token endpoint issued an access token and for which resource, if it
// did and the token has not expired: what a resource's own token server (a container
// registry's, say) learns from Entra about a token presented to it.
func (s *Server) Issued(accessToken string) (tenantID, clientID, audience string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, known := s.tokens[accessToken]
	if !known || !time.Now().Before(tok.expires) {
		return "", "", "", false
	}
	return tok.tenantID, tok.clientID, tok.audience, true
}
