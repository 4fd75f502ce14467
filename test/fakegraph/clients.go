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

// HideApplication makes Graph answer that client as one that may read the application's service
// principal and not the application, as it answers an identity with Application.ReadWrite.OwnedBy
// that does not own it: a point read of the application is refused 403 Authorization_RequestDenied,
// and lists leave it out, without an error.
func (s *Server) HideApplication(clientID, appID string, hidden bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{strings.ToLower(clientID), strings.ToLower(appID)}
	if hidden {
		s.appsHidden[k] = true
	} else {
		delete(s.appsHidden, k)
	}
}

// hiddenLocked reports whether the client of tok may not read st, an application; the caller
// holds s.mu.
func (s *Server) hiddenLocked(set *entitySet, tok issuedToken, st *stored) bool {
	return !set.sps && s.appsHidden[[2]string{strings.ToLower(tok.clientID), strings.ToLower(st.obj.AppID)}]
}

// FailApplication makes the next point reads of the application answer statuses, one each, with
// Graph's error body: 500 generalException, 503 serviceNotAvailable, or any other as
// UnknownError. The SDK retries 503 and 504 on its own, three times.
func (s *Server) FailApplication(appID string, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appFaults[strings.ToLower(appID)] = statuses
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
