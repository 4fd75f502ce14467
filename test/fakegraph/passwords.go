package fakegraph

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// defaultSecretLifetime is what Graph gives a secret whose endDateTime is not set.
const defaultSecretLifetime = 2 * 365 * 24 * time.Hour

// passwordAction answers POST /{set}/{id}/addPassword and removePassword as Graph does: addPassword
// returns the new credential with its secretText, the only time anyone sees it.
func (s *Server) passwordAction(w http.ResponseWriter, r *http.Request, c graphCall, set *entitySet, tok issuedToken, id, action string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		c.graphError(w, http.StatusMethodNotAllowed, "Request_BadRequest", "Specified HTTP method is not allowed for the request target.")
		return
	}
	body, err := readBody(r)
	if err != nil {
		c.graphError(w, http.StatusBadRequest, "BadRequest", "Unable to read JSON request payload. "+err.Error())
		return
	}
	var in struct {
		PasswordCredential *struct {
			DisplayName   string     `json:"displayName"`
			EndDateTime   *time.Time `json:"endDateTime"`
			StartDateTime *time.Time `json:"startDateTime"`
		} `json:"passwordCredential"`
		KeyID string `json:"keyId"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		c.graphError(w, http.StatusBadRequest, "BadRequest", "Unable to read JSON request payload. Please ensure Content-Type header is set and payload is of valid JSON format.")
		return
	}
	w.Header().Set("x-ms-resource-unit", "1")

	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.lookupLocked(set, tok, "", id)
	if st == nil {
		c.notFound(w, id)
		return
	}
	now := time.Now().UTC()
	if action == "removePassword" {
		kept := st.obj.Passwords[:0]
		found := false
		for _, p := range st.obj.Passwords {
			if strings.EqualFold(p.KeyID, in.KeyID) {
				found = true
				continue
			}
			kept = append(kept, p)
		}
		if !found {
			c.graphError(w, http.StatusBadRequest, "Request_BadRequest", fmt.Sprintf("No password credential found with keyId %s.", in.KeyID))
			return
		}
		before := keyIDsOf(st.obj)
		st.obj.Passwords = kept
		s.recordLocked(s.tenantLocked(tok.tenantID, false), set.sps, st.obj.ID, []string{"passwordCredentials"}, false)
		s.auditLocked(s.tenantLocked(tok.tenantID, false), set.sps, st.obj.ID, before, keyIDsOf(st.obj), "app "+tok.clientID)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	pc := PasswordCredential{KeyID: newUUID(), SecretText: newSecretText(), Start: now, End: now.Add(defaultSecretLifetime), UsableAt: now.Add(s.propagation)}
	if p := in.PasswordCredential; p != nil {
		pc.DisplayName = p.DisplayName
		if p.StartDateTime != nil {
			pc.Start = p.StartDateTime.UTC()
		}
		if p.EndDateTime != nil {
			pc.End = p.EndDateTime.UTC()
		}
	}
	if !pc.End.After(pc.Start) {
		c.graphError(w, http.StatusBadRequest, "Request_BadRequest", "Invalid value specified for property 'endDateTime' of resource 'PasswordCredential'.")
		return
	}
	pc.Hint = prefix(pc.SecretText, 3)
	before := keyIDsOf(st.obj)
	st.obj.Passwords = append(st.obj.Passwords, pc)
	s.recordLocked(s.tenantLocked(tok.tenantID, false), set.sps, st.obj.ID, []string{"passwordCredentials"}, false)
	s.auditLocked(s.tenantLocked(tok.tenantID, false), set.sps, st.obj.ID, before, keyIDsOf(st.obj), "app "+tok.clientID)
	writeJSON(w, http.StatusOK, object{
		{"@odata.context", s.URL() + "/v1.0/$metadata#microsoft.graph.passwordCredential"},
		{"customKeyIdentifier", nil},
		{"displayName", nullable(pc.DisplayName)},
		{"endDateTime", graphTime(pc.End)},
		{"hint", pc.Hint},
		{"keyId", pc.KeyID},
		{"secretText", pc.SecretText},
		{"startDateTime", graphTime(pc.Start)},
	})
}

// owners answers GET /{set}/{id}/owners as Graph does, each owner typed by @odata.type. It pages
// nothing: an application has a handful of owners.
func (s *Server) owners(w http.ResponseWriter, c graphCall, set *entitySet, tok issuedToken, id string) {
	w.Header().Set("x-ms-resource-unit", "1")
	s.mu.Lock()
	var found *Object
	if st := s.lookupLocked(set, tok, "", id); st != nil {
		o := st.obj.clone()
		found = &o
	}
	usersHidden := s.usersHidden[strings.ToLower(tok.clientID)]
	s.mu.Unlock()
	if found == nil {
		c.notFound(w, id)
		return
	}
	value := []object{}
	for _, o := range found.Owners {
		kind := "#microsoft.graph.user"
		if o.ServicePrincipal {
			kind = "#microsoft.graph.servicePrincipal"
		}
		if usersHidden && !o.ServicePrincipal {
			value = append(value, object{{"@odata.type", kind}, {"id", o.ID}, {"displayName", nil}, {"mail", nil}, {"userPrincipalName", nil}})
			continue
		}
		userType := "Member"
		if o.Guest {
			userType = "Guest"
		}
		if o.ServicePrincipal {
			value = append(value, object{{"@odata.type", kind}, {"id", o.ID}, {"displayName", o.DisplayName}})
			continue
		}
		value = append(value, object{{"@odata.type", kind}, {"id", o.ID}, {"displayName", o.DisplayName},
			{"mail", nullable(o.Mail)}, {"userPrincipalName", nullable(o.UserPrincipalName)}, {"userType", userType}})
	}
	writeJSON(w, http.StatusOK, object{{"@odata.context", s.URL() + "/v1.0/$metadata#directoryObjects"}, {"value", value}})
}
