package fakegraph

import (
	"fmt"
	"strings"
)

// PutApplication creates or replaces (by AppID) an application. Missing IDs, AppID and KeyIDs are
// generated and a missing Hint is derived from SecretText, as Azure would; read the result back
// with Application. It panics on a KeyID that is not a GUID: Graph's always are, and Kiota fails
// to parse the whole object otherwise, far from the test's mistake.
func (s *Server) PutApplication(tenantID string, app Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(tenantID, true)
	s.putLocked(t, false, app)
}

// PutServicePrincipal creates or replaces (by AppID) a service principal; see PutApplication.
func (s *Server) PutServicePrincipal(tenantID string, sp Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(tenantID, true)
	if app := t.apps[strings.ToLower(sp.AppID)]; app != nil && sp.AppOwnerOrganizationID == "" {
		sp.AppOwnerOrganizationID = strings.ToLower(t.id)
	}
	s.putLocked(t, true, sp)
}

func (s *Server) putLocked(t *tenant, sps bool, o Object) {
	m := t.apps
	if sps {
		m = t.sps
	}
	o = o.clone()
	if o.AppID == "" {
		o.AppID = newUUID()
	}
	key := strings.ToLower(o.AppID)
	old := m[key]
	t.byID = nil
	if o.ID == "" {
		if old != nil {
			o.ID = old.obj.ID
		} else {
			o.ID = newUUID()
		}
	}
	for i := range o.Passwords {
		p := &o.Passwords[i]
		if p.KeyID == "" {
			p.KeyID = newUUID()
		}
		mustGUID("password KeyID", p.KeyID)
		if p.Hint == "" && p.SecretText != "" {
			p.Hint = prefix(p.SecretText, 3)
		}
	}
	for i := range o.Keys {
		if o.Keys[i].KeyID == "" {
			o.Keys[i].KeyID = newUUID()
		}
		mustGUID("certificate KeyID", o.Keys[i].KeyID)
	}
	if old != nil {
		s.auditChangeLocked(t, sps, old.obj, o)
		if props := changedProps(sps, old.obj, o); len(props) > 0 {
			s.recordLocked(t, sps, o.ID, props, false)
		}
		old.obj = o
		return
	}
	s.seq++
	m[key] = &stored{obj: o, seq: s.seq}
	t.listed = nil
	s.recordLocked(t, sps, o.ID, nil, false)
	s.auditChangeLocked(t, sps, Object{}, o)
}

func mustGUID(what, s string) {
	if !isGUID(s) {
		panic(fmt.Sprintf("fakegraph: %s %q is not a GUID; Graph key IDs are GUIDs and Kiota cannot parse anything else", what, s))
	}
}

// isGUID accepts the 8-4-4-4-12 hex form Graph writes and uuid.Parse reads.
func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

func prefix(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		r = r[:n]
	}
	return string(r)
}

// DeleteApplication removes the application with that appId; absent objects are ignored.
func (s *Server) DeleteApplication(tenantID, appID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenantLocked(tenantID, false); t != nil {
		if st := t.apps[strings.ToLower(appID)]; st != nil {
			s.recordLocked(t, false, st.obj.ID, nil, true)
		}
		delete(t.apps, strings.ToLower(appID))
		t.listed, t.byID = nil, nil
	}
}

// DeleteServicePrincipal removes the service principal with that appId; absent objects are ignored.
func (s *Server) DeleteServicePrincipal(tenantID, appID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenantLocked(tenantID, false); t != nil {
		if st := t.sps[strings.ToLower(appID)]; st != nil {
			s.recordLocked(t, true, st.obj.ID, nil, true)
		}
		delete(t.sps, strings.ToLower(appID))
		t.listed, t.byID = nil, nil
	}
}

// Application reads back an application, secrets included, so tests can see what Graph writes did.
func (s *Server) Application(tenantID, appID string) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenantLocked(tenantID, false); t != nil {
		if st := t.apps[strings.ToLower(appID)]; st != nil {
			return st.obj.clone(), true
		}
	}
	return Object{}, false
}

// ServicePrincipal reads back a service principal; see Application.
func (s *Server) ServicePrincipal(tenantID, appID string) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenantLocked(tenantID, false); t != nil {
		if st := t.sps[strings.ToLower(appID)]; st != nil {
			return st.obj.clone(), true
		}
	}
	return Object{}, false
}

func (o Object) clone() Object {
	o.Passwords = append([]PasswordCredential(nil), o.Passwords...)
	o.Keys = append([]KeyCredential(nil), o.Keys...)
	o.Owners = append([]Owner(nil), o.Owners...)
	o.Tags = append([]string(nil), o.Tags...)
	for i := range o.Keys {
		o.Keys[i].CustomKeyIdentifier = append([]byte(nil), o.Keys[i].CustomKeyIdentifier...)
		o.Keys[i].Key = append([]byte(nil), o.Keys[i].Key...)
	}
	return o
}
