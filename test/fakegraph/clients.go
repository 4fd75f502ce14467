package fakegraph

import (
	"strings"
	"time"
)

// AddClient lets clientID obtain tokens in tenantID with secret. Secrets accumulate: calling it
// again adds a second valid secret, as an app can hold several. Independently of this, the current
// (not expired) SecretTexts of the tenant's application or service principal with that appId are
// accepted too, as Entra does, so rotating a secret through Graph takes effect here.
func (s *Server) AddClient(tenantID, clientID, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(tenantID, true)
	key := strings.ToLower(clientID)
	if t.clients[key] == nil {
		t.clients[key] = map[string]bool{}
	}
	t.clients[key][secret] = true
}

// RemoveClient forgets the secrets AddClient registered for clientID in tenantID. Tokens already
// issued stay valid until they expire, as in Entra.
func (s *Server) RemoveClient(tenantID, clientID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenantLocked(tenantID, false); t != nil {
		delete(t.clients, strings.ToLower(clientID))
	}
}

// Deny makes Graph answer 403 Authorization_RequestDenied to that client's tokens in every tenant,
// as when the app lacks the Application.Read.All permission or consent. Inside a $batch, which
// Graph accepts from any signed-in client, each request is refused on its own.
func (s *Server) Deny(clientID string, denied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	markClient(s.deniedClients, clientID, denied)
}

// HideUsers makes Graph answer that client as one that may not read users: in a list of directory
// objects, such as an application's owners, each user comes with its @odata.type and id only,
// every other property null ("limited information for inaccessible member objects"), and no 403.
func (s *Server) HideUsers(clientID string, hidden bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	markClient(s.usersHidden, clientID, hidden)
}

// markClient puts clientID, as Entra compares it (case aside), in set or takes it out.
func markClient(set map[string]bool, clientID string, in bool) {
	if in {
		set[strings.ToLower(clientID)] = true
	} else {
		delete(set, strings.ToLower(clientID))
	}
}

// SetTokenLifetime sets expires_in for tokens issued from now on, so tests can watch a client
// renew tokens. Lifetimes are whole seconds, at least one.
func (s *Server) SetTokenLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d < time.Second {
		d = time.Second
	}
	s.tokenLifetime = d.Truncate(time.Second)
}

// RevokeTokens invalidates every token issued so far; clients that cache tokens (MSAL does) then
// get 401 from Graph until they fetch a new one, which is how a revoked session looks.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]issuedToken{}
}
