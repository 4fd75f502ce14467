package serviceprincipal

import (
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Seen is the credentials the checks of every watch last found on each application, by tenant,
// the identity's client and appId, for as long as the operator runs (an identity may see less of
// an application than another: only its service principal, say). A watch's own status is its baseline, but a watch
// deleted and created again, or turned to another application and back, starts with none, and
// its first check marks nothing added: whoever may create watches could hide a credential they
// added that way. And when several watches check one application, an addition is counted, and
// told in an event, by the first check that claims it, not once per watch; each watch's
// channels are still told, from its status.
type Seen struct {
	mu     sync.Mutex
	apps   map[string]*seenApp
	pruned time.Time
}

type seenApp struct {
	creds []seenCredential
	at    time.Time
}

// seenCredential is a credential by its object, type and keyId, and when a check marked it
// added; nil when it was there at the first check.
type seenCredential struct {
	source v1alpha1.CredentialSource
	typ    v1alpha1.CredentialType
	keyID  string
	added  *metav1.Time
}

// seenFor is how long an application no check found stays known: longer than the longest check
// interval (7d).
const seenFor = 8 * 24 * time.Hour

func seenKey(tenantID, clientID, appID string) string {
	return strings.ToLower(tenantID) + "/" + strings.ToLower(clientID) + "/" + strings.ToLower(appID)
}

// Before is what the last check of any watch found on appID of tenantID as clientID, as
// credentials with their AddedTime; false when no check found it since the operator started. A
// nil Seen knows nothing.
func (s *Seen) Before(tenantID, clientID, appID string) ([]v1alpha1.Credential, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[seenKey(tenantID, clientID, appID)]
	if a == nil {
		return nil, false
	}
	out := make([]v1alpha1.Credential, 0, len(a.creds))
	for _, c := range a.creds {
		out = append(out, v1alpha1.Credential{Source: c.source, Type: c.typ, KeyID: c.keyID, AddedTime: c.added})
	}
	return out, true
}

// Claim records creds as what a check found on appID at at, and returns those of marked, the
// credentials it marked added, that no other check claimed first. One another check claimed
// takes its AddedTime in creds from that claim. One another check recorded unmarked stays marked
// and is claimed: that check may have had no baseline (a watch created after the operator
// started), and must not silence one that had.
func (s *Seen) Claim(tenantID, clientID, appID string, creds []v1alpha1.Credential, marked []v1alpha1.Credential, at time.Time) []v1alpha1.Credential {
	if s == nil {
		return marked
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apps == nil {
		s.apps = map[string]*seenApp{}
	}
	s.pruneLocked(at)
	key := seenKey(tenantID, clientID, appID)
	a := s.apps[key]
	if a == nil {
		a = &seenApp{}
		s.apps[key] = a
	}
	recorded := func(c v1alpha1.Credential) (seenCredential, bool) {
		for _, r := range a.creds {
			if r.source == c.Source && r.typ == c.Type && strings.EqualFold(r.keyID, c.KeyID) {
				return r, true
			}
		}
		return seenCredential{}, false
	}
	var claimed []v1alpha1.Credential
	for _, m := range marked {
		r, ok := recorded(m)
		if !ok || r.added == nil {
			claimed = append(claimed, m)
			continue
		}
		for i := range creds {
			if c := &creds[i]; c.Source == m.Source && c.Type == m.Type && strings.EqualFold(c.KeyID, m.KeyID) {
				c.AddedTime = r.added
			}
		}
	}
	next := make([]seenCredential, 0, len(creds))
	for _, c := range creds {
		next = append(next, seenCredential{source: c.Source, typ: c.Type, keyID: c.KeyID, added: c.AddedTime})
	}
	a.creds, a.at = next, at
	return claimed
}

// pruneLocked lets go, once an hour, of the applications no check found for seenFor.
func (s *Seen) pruneLocked(now time.Time) {
	if now.Sub(s.pruned) < time.Hour {
		return
	}
	s.pruned = now
	for k, a := range s.apps {
		if now.Sub(a.at) > seenFor {
			delete(s.apps, k)
		}
	}
}
