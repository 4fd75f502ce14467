package fakegraph

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// entitySet describes one Graph collection: its names on the wire and the properties $select may
// name, so an unknown one fails as Graph fails instead of silently returning nothing.
type entitySet struct {
	name     string // as in URLs and @odata.context
	typeName string // as in error messages
	baseRU   int    // resource units of a GET, per Graph's throttling documentation
	props    map[string]string
	sps      bool
}

func propSet(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[strings.ToLower(n)] = n
	}
	return m
}

var (
	applicationsSet = &entitySet{
		name: "applications", typeName: "microsoft.graph.application", baseRU: 2,
		props: propSet("id", "deletedDateTime", "addIns", "api", "appId", "applicationTemplateId", "appRoles",
			"certification", "createdDateTime", "defaultRedirectUri", "description", "disabledByMicrosoftStatus",
			"displayName", "groupMembershipClaims", "identifierUris", "info", "isDeviceOnlyAuthSupported",
			"isFallbackPublicClient", "keyCredentials", "logo", "nativeAuthenticationApisEnabled", "notes",
			"oauth2RequirePostResponses", "optionalClaims", "parentalControlSettings", "passwordCredentials",
			"publicClient", "publisherDomain", "requestSignatureVerification", "requiredResourceAccess",
			"samlMetadataUrl", "serviceManagementReference", "servicePrincipalLockConfiguration", "signInAudience",
			"spa", "tags", "tokenEncryptionKeyId", "uniqueName", "verifiedPublisher", "web"),
	}
	servicePrincipalsSet = &entitySet{
		name: "servicePrincipals", typeName: "microsoft.graph.servicePrincipal", baseRU: 1, sps: true,
		props: propSet("id", "deletedDateTime", "accountEnabled", "addIns", "alternativeNames", "appDescription",
			"appDisplayName", "appId", "applicationTemplateId", "appOwnerOrganizationId", "appRoleAssignmentRequired",
			"appRoles", "customSecurityAttributes", "description", "disabledByMicrosoftStatus", "displayName",
			"homepage", "info", "keyCredentials", "loginUrl", "logoutUrl", "notes", "notificationEmailAddresses",
			"oauth2PermissionScopes", "passwordCredentials", "preferredSingleSignOnMode",
			"preferredTokenSigningKeyThumbprint", "replyUrls", "resourceSpecificApplicationPermissions",
			"samlSingleSignOnSettings", "servicePrincipalNames", "servicePrincipalType", "signInAudience", "tags",
			"tokenEncryptionKeyId", "verifiedPublisher"),
	}
	entitySets = map[string]*entitySet{"applications": applicationsSet, "serviceprincipals": servicePrincipalsSet}
)

// serveGraph logs every Graph request, including those whose connection it drops, so tests can
// count attempts (retries) as well as outcomes.
func (s *Server) serveGraph(w http.ResponseWriter, r *http.Request, segs []string) {
	s.mu.Lock()
	unreachable, stalled, latency := s.unreachable, s.stalled, s.latency
	rec := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	if tok, ok := s.tokens[bearer(r)]; ok {
		rec.ClientID, rec.TenantID = tok.clientID, tok.tenantID
	}
	s.mu.Unlock()

	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
		case <-s.closing:
		}
	}
	if stalled {
		s.logRequest(rec)
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return
	}
	if unreachable {
		s.logRequest(rec)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // cannot hijack: abort, which also drops the connection
	}
	sr := &statusRecorder{ResponseWriter: w}
	defer func() {
		rec.Status = sr.status
		s.logRequest(rec)
	}()
	s.handleGraph(sr, r, segs)
}

func (s *Server) logRequest(rec Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
}

func bearer(r *http.Request) string {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if len(h) >= 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// handleGraph checks in the order Graph's gateway does: throttling, authentication,
// authorization, then the request itself.
func (s *Server) handleGraph(w http.ResponseWriter, r *http.Request, segs []string) {
	c := startGraphCall(w, r)

	s.mu.Lock()
	throttled, retryAfter := s.throttleLeft > 0, s.throttleAfter
	if throttled {
		s.throttleLeft--
	}
	raw := bearer(r)
	tok, known := s.tokens[raw]
	s.mu.Unlock()

	if throttled {
		s.tooManyRequests(w, c, tok, known, retryAfter)
		return
	}

	authFail := ""
	switch {
	case raw == "":
		authFail = "Access token is empty."
	case !known:
		authFail = "Access token validation failure."
		if !strings.Contains(raw, ".") {
			authFail = "IDX14100: JWT is not well formed, there are no dots (.).\nThe token needs to be in JWS or JWE Compact Serialization Format. " +
				"(JWS): 'EncodedHeader.EndcodedPayload.EncodedSignature'. (JWE): 'EncodedProtectedHeader.EncodedEncryptedKey." +
				"EncodedInitializationVector.EncodedCiphertext.EncodedAuthenticationTag'."
		}
	case !time.Now().Before(tok.expires):
		authFail = "Lifetime validation failed, the token is expired."
	case !graphAudiences[strings.TrimSuffix(tok.audience, "/")] && strings.TrimSuffix(tok.audience, "/") != s.URL():
		authFail = "Access token validation failure. Invalid audience."
	}
	if authFail != "" {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="", authorization_uri="%s/common/oauth2/authorize", client_id="00000003-0000-0000-c000-000000000000"`, s.URL()))
		c.graphError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", authFail)
		return
	}
	s.route(w, r, c, tok, segs)
}

// denied answers 403 to a client Deny refused. Graph authorizes each request of a $batch on its
// own, so a batch is accepted and each of its requests is refused inside it.
func (s *Server) denied(w http.ResponseWriter, c graphCall, tok issuedToken) bool {
	s.mu.Lock()
	denied := s.deniedClients[strings.ToLower(tok.clientID)]
	s.mu.Unlock()
	if denied {
		c.graphError(w, http.StatusForbidden, "Authorization_RequestDenied", "Insufficient privileges to complete the operation.")
	}
	return denied
}

// route resolves the URL to a resource. Only reads exist today; a write (addPassword, ...) would
// be one more case here, reading its body with readBody.
func (s *Server) route(w http.ResponseWriter, r *http.Request, c graphCall, tok issuedToken, segs []string) {
	if len(segs) > 0 && segs[0] == "beta" {
		s.routeBeta(w, r, c, tok, segs[1:])
		return
	}
	if len(segs) == 0 || segs[0] != "v1.0" {
		v := ""
		if len(segs) > 0 {
			v = segs[0]
		}
		c.graphError(w, http.StatusBadRequest, "BadRequest", "Invalid version: "+v)
		return
	}
	segs = segs[1:]
	if len(segs) == 1 && segs[0] == "$batch" {
		s.batch(w, r, c, tok)
		return
	}
	if len(segs) == 0 {
		if !s.onlyGET(w, r, c) {
			return
		}
		writeJSON(w, http.StatusOK, object{
			{"@odata.context", s.URL() + "/v1.0/$metadata"},
			{"value", []object{
				{{"name", applicationsSet.name}, {"kind", "EntitySet"}, {"url", applicationsSet.name}},
				{{"name", servicePrincipalsSet.name}, {"kind", "EntitySet"}, {"url", servicePrincipalsSet.name}},
			}},
		})
		return
	}
	if s.denied(w, c, tok) {
		return
	}
	if len(segs) == 2 && segs[0] == "auditLogs" && segs[1] == "directoryAudits" {
		s.directoryAudits(w, r, c, tok)
		return
	}
	if len(segs) == 1 && segs[0] == "organization" {
		if s.onlyGET(w, r, c) && s.spend(w, c, tok, 1) {
			s.organization(w, tok)
		}
		return
	}

	name, key, hasKey := strings.Cut(segs[0], "(")
	set := entitySets[strings.ToLower(name)]
	if set == nil {
		c.graphError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Resource not found for the segment '%s'.", name))
		return
	}
	var byAppID, byID string
	owners := false
	switch {
	case !hasKey && len(segs) == 3 && (segs[2] == "addPassword" || segs[2] == "removePassword"):
		s.passwordAction(w, r, c, set, tok, segs[1], segs[2])
		return
	case !hasKey && len(segs) == 3 && segs[2] == "owners":
		byID, owners = segs[1], true
	case hasKey && len(segs) == 1:
		if !strings.HasSuffix(key, ")") {
			c.graphError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Bad Request - Error in query syntax: '%s'.", segs[0]))
			return
		}
		key = strings.TrimSuffix(key, ")")
		if k, v, ok := strings.Cut(key, "="); ok {
			if !strings.EqualFold(strings.TrimSpace(k), "appId") {
				c.graphError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Resource not found for the segment '%s'.", segs[0]))
				return
			}
			byAppID = odataString(v)
		} else {
			byID = odataString(key)
		}
	case !hasKey && len(segs) == 2 && (segs[1] == "delta" || segs[1] == "microsoft.graph.delta"):
		s.delta(w, r, c, set, tok)
		return
	case !hasKey && len(segs) == 2:
		byID = segs[1]
	case !hasKey && len(segs) == 1:
	default:
		c.graphError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Resource not found for the segment '%s'.", segs[len(segs)-1]))
		return
	}
	if !s.onlyGET(w, r, c) {
		return
	}
	if owners {
		if !s.spend(w, c, tok, 1) {
			return
		}
		s.owners(w, c, set, tok, byID)
		return
	}
	q, errMsg := parseQuery(r.URL.RawQuery, set)
	if errMsg != "" {
		code := "Request_BadRequest"
		if strings.HasPrefix(errMsg, "fakegraph") || strings.HasPrefix(errMsg, "Too many child clauses") {
			code = "Request_UnsupportedQuery"
		}
		c.graphError(w, http.StatusBadRequest, code, errMsg)
		return
	}
	single := byAppID != "" || byID != ""
	if single && q.filter != nil {
		c.graphError(w, http.StatusBadRequest, "BadRequest", "The query specified in the URI is not valid. Query option 'Filter' is not allowed.")
		return
	}
	ru := set.baseRU
	if q.selected != nil {
		ru--
	}
	if !single && q.topGiven && q.top < 20 {
		ru--
	}
	ru = max(ru, 1)
	if !s.spend(w, c, tok, ru) {
		return
	}
	w.Header().Set("x-ms-resource-unit", strconv.Itoa(ru))

	if !single {
		s.list(w, r, set, tok, q)
		return
	}
	s.mu.Lock()
	var found *Object
	var hidden bool
	fault, faulty := 0, strings.ToLower(byAppID)
	if st := s.lookupLocked(set, tok, byAppID, byID); st != nil {
		o := st.obj.clone()
		found, hidden, faulty = &o, s.hiddenLocked(set, tok, st), strings.ToLower(o.AppID)
	}
	if f := s.appFaults[faulty]; !set.sps && len(f) > 0 {
		fault, s.appFaults[faulty] = f[0], f[1:]
	}
	s.mu.Unlock()
	switch {
	case found == nil && fault == 0:
		c.notFound(w, byAppID+byID)
		return
	case hidden && fault == 0:
		c.graphError(w, http.StatusForbidden, "Authorization_RequestDenied", "Insufficient privileges to complete the operation.")
		return
	case fault != 0:
		code, msg := "UnknownError", ""
		switch fault {
		case http.StatusInternalServerError:
			code, msg = "generalException", "General exception while processing."
		case http.StatusServiceUnavailable:
			code, msg = "serviceNotAvailable", "Service is temporarily unavailable."
		}
		c.graphError(w, fault, code, msg)
		return
	}
	body := object{{"@odata.context", s.URL() + "/v1.0/$metadata#" + set.name + q.contextSelect() + "/$entity"}}
	body = append(body, render(set, *found, q.selected, q.selected != nil)...)
	writeJSON(w, http.StatusOK, body)
}

// lookup finds an object of set in the token's tenant, by appId or by object ID, as a copy;
// the caller holds s.mu.
func (s *Server) lookupLocked(set *entitySet, tok issuedToken, byAppID, byID string) *stored {
	t := s.tenantLocked(tok.tenantID, false)
	if t == nil {
		return nil
	}
	m := t.apps
	if set.sps {
		m = t.sps
	}
	if byAppID != "" {
		return m[strings.ToLower(byAppID)]
	}
	if t.byID == nil {
		t.byID = map[bool]map[string]*stored{}
	}
	index := t.byID[set.sps]
	if index == nil {
		index = make(map[string]*stored, len(m))
		for _, st := range m {
			index[strings.ToLower(st.obj.ID)] = st
		}
		t.byID[set.sps] = index
	}
	return index[strings.ToLower(byID)]
}

// notFound answers as Graph does for an object that does not exist.
func (c graphCall) notFound(w http.ResponseWriter, key string) {
	c.graphError(w, http.StatusNotFound, "Request_ResourceNotFound", fmt.Sprintf(
		"Resource '%s' does not exist or one of its queried reference-property objects are not present.", key))
}

func (s *Server) onlyGET(w http.ResponseWriter, r *http.Request, c graphCall) bool {
	if r.Method == http.MethodGet {
		return true
	}
	w.Header().Set("Allow", http.MethodGet)
	c.graphError(w, http.StatusMethodNotAllowed, "Request_BadRequest", "Specified HTTP method is not allowed for the request target.")
	return false
}

// odataString reads an OData key literal: quoted, with a doubled quote standing for one, or a bare
// GUID.
func odataString(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'")
	}
	return v
}
