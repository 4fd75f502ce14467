package fakegraph

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The directory audit log, as far as credentials go: GET /v1.0/auditLogs/directoryAudits with
// $filter=targetResources/any(t:t/id eq '…') [and activityDateTime ge …], which Graph supports
// (learn.microsoft.com/graph/api/directoryaudit-list). A change to an object's credentials is
// logged as Entra logs it: "Update application – Certificates and secrets management" for an
// application, "Add service principal credentials" or "Remove service principal credentials"
// for a service principal, its KeyDescription listing every key before and after the change. Through addPassword it is
// initiated by the calling application; through the admin API (PutApplication) by the actor of
// SetAuditActor. A client DenyReports refused has no AuditLog.Read.All.

// audit is one entry of a tenant's audit log: as Entra logs a credential change, the object's
// keys before it and after it.
type audit struct {
	id, activity, objectID string
	at                     time.Time
	user, ip, app          string
	before, after          []string
}

// SetAuditActor names who the audit log says made the changes of the admin API, and from where.
func (s *Server) SetAuditActor(userPrincipalName, ipAddress string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auditUser, s.auditIP = userPrincipalName, ipAddress
}

// auditLocked logs a change to the credentials of an object of t, from the keys before to the
// keys after; by the client app, or by the audit actor when app is empty.
func (s *Server) auditLocked(t *tenant, sps bool, objectID string, before, after []string, app string) {
	if t == nil || slices.Equal(before, after) {
		return
	}
	a := audit{id: newUUID(), objectID: strings.ToLower(objectID), at: s.deltaNowLocked(), before: before, after: after, app: app}
	switch {
	case !sps:
		a.activity = "Update application – Certificates and secrets management"
	case len(after) >= len(before):
		a.activity = "Add service principal credentials"
	default:
		a.activity = "Remove service principal credentials"
	}
	if app == "" {
		a.user, a.ip = s.auditUser, s.auditIP
		if a.user == "" {
			a.user, a.ip = "admin@contoso.example", "203.0.113.5"
		}
	}
	t.audits = append(t.audits, a)
}

// keyIDsOf are the keyIds of o's secrets and certificates.
func keyIDsOf(o Object) []string {
	var out []string
	for _, p := range o.Passwords {
		out = append(out, strings.ToLower(p.KeyID))
	}
	for _, k := range o.Keys {
		out = append(out, strings.ToLower(k.KeyID))
	}
	return out
}

// auditChangeLocked logs what a write through the admin API did to o's credentials.
func (s *Server) auditChangeLocked(t *tenant, sps bool, old, o Object) {
	s.auditLocked(t, sps, o.ID, keyIDsOf(old), keyIDsOf(o), "")
}

var auditFilter = regexp.MustCompile(`^targetResources/any\(\s*t\s*:\s*t/id eq '([0-9a-fA-F-]{36})'\s*\)(?:\s+and\s+activityDateTime ge (\S+))?$`)

// directoryAudits answers GET /v1.0/auditLogs/directoryAudits.
func (s *Server) directoryAudits(w http.ResponseWriter, r *http.Request, c graphCall, tok issuedToken) {
	if !s.onlyGET(w, r, c) {
		return
	}
	s.mu.Lock()
	denied := s.reportsDenied[strings.ToLower(tok.clientID)]
	s.mu.Unlock()
	if denied {
		c.graphError(w, http.StatusForbidden, "Authorization_RequestDenied", "Insufficient privileges to complete the operation.")
		return
	}
	vals, _ := url.ParseQuery(r.URL.RawQuery)
	m := auditFilter.FindStringSubmatch(strings.TrimSpace(vals.Get("$filter")))
	if m == nil {
		c.graphError(w, http.StatusBadRequest, "Request_UnsupportedQuery", "fakegraph filters the audit log by targetResources/any(t:t/id eq '…') [and activityDateTime ge …] only.")
		return
	}
	var since time.Time
	if m[2] != "" {
		var err error
		if since, err = time.Parse(time.RFC3339, m[2]); err != nil {
			c.graphError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Invalid filter clause: the DateTimeOffset '%s' is not valid.", m[2]))
			return
		}
	}
	if !s.spend(w, c, tok, 1) {
		return
	}
	s.mu.Lock()
	var found []audit
	if t := s.tenantLocked(tok.tenantID, false); t != nil {
		for _, a := range t.audits {
			if a.objectID == strings.ToLower(m[1]) && !a.at.Before(since) {
				found = append(found, a)
			}
		}
	}
	s.mu.Unlock()
	values := make([]object, 0, len(found))
	for _, a := range slices.Backward(found) {
		values = append(values, renderAudit(a))
	}
	writeJSON(w, http.StatusOK, object{{"@odata.context", s.URL() + "/v1.0/$metadata#auditLogs/directoryAudits"}, {"value", values}})
}

func renderAudit(a audit) object {
	var user, app any
	if a.user != "" {
		user = object{{"id", newUUID()}, {"displayName", nil}, {"userPrincipalName", a.user}, {"ipAddress", a.ip}}
	}
	if a.app != "" {
		app = object{{"appId", nil}, {"displayName", a.app}, {"servicePrincipalId", nil}, {"servicePrincipalName", nil}}
	}
	describe := func(keys []string) string {
		var desc []string
		for _, k := range keys {
			desc = append(desc, fmt.Sprintf("\"[KeyIdentifier=%s,KeyType=Password,KeyUsage=Verify,DisplayName=]\"", k))
		}
		return "[" + strings.Join(desc, ",") + "]"
	}
	return object{
		{"id", a.id}, {"category", "ApplicationManagement"}, {"activityDateTime", graphTime(a.at)}, {"activityDisplayName", a.activity},
		{"operationType", "Update"}, {"result", "success"}, {"loggedByService", "Core Directory"},
		{"initiatedBy", object{{"user", user}, {"app", app}}},
		{"targetResources", []object{{{"id", a.objectID}, {"type", "Application"}, {"modifiedProperties", []object{
			{{"displayName", "KeyDescription"}, {"oldValue", describe(a.before)}, {"newValue", describe(a.after)}},
		}}}}},
	}
}
