package delta

import (
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/credwatch/credwatch/internal/graph"
)

// Tenant is every application and service principal of a tenant, as a listing found them and
// the delta rounds since changed them: what a tenant scan reads when little changed, without
// listing the tenant again. It is held in memory only: at a tenant's size it would not fit the
// place a Log is kept, and a restarted operator lists the tenant once, as a first scan does.
type Tenant struct {
	// Links are the deltaLinks the next round reads from, by graph.Source.
	Links map[graph.Source]string
	// Listed is when the listing the tenant started from was read; Round, when the last round
	// ended.
	Listed, Round time.Time

	// objects are the objects by object ID, packed; others, those whose ID is no GUID (Graph's
	// always are).
	objects map[uuid.UUID]packed
	others  map[string]packed
}

// NewTenant is an empty tenant whose rounds go on from links, listed at listed.
func NewTenant(links map[graph.Source]string, listed time.Time) *Tenant {
	return &Tenant{Links: links, Listed: listed, Round: listed, objects: map[uuid.UUID]packed{}, others: map[string]packed{}}
}

// Put adds o, as a listing found it.
func (t *Tenant) Put(o graph.Object) {
	t.put(strings.ToLower(o.ObjectID), pack(o))
}

func (t *Tenant) put(id string, p packed) {
	if u, ok := guidOf(id); ok {
		t.objects[u] = p
	} else {
		t.others[id] = p
	}
}

// get is the object of id, when the tenant holds it.
func (t *Tenant) get(id string) (graph.Object, bool) {
	var p packed
	var ok bool
	if u, isGUID := guidOf(id); isGUID {
		p, ok = t.objects[u]
	} else {
		p, ok = t.others[id]
	}
	if !ok {
		return graph.Object{}, false
	}
	return unpack(id, p), true
}

func (t *Tenant) remove(id string) {
	if u, ok := guidOf(id); ok {
		delete(t.objects, u)
	} else {
		delete(t.others, id)
	}
}

// Len is how many objects the tenant holds.
func (t *Tenant) Len() (apps, sps int) {
	count := func(p packed) {
		if p[0] == 1 { // a packed object starts with its source
			sps++
		} else {
			apps++
		}
	}
	for _, p := range t.objects {
		count(p)
	}
	for _, p := range t.others {
		count(p)
	}
	return apps, sps
}

// Apply applies what a round reported of one object. It is false when the round reported in part
// an object the tenant does not hold, which only a listing can say the rest of.
func (t *Tenant) Apply(ch graph.Change) bool {
	id := strings.ToLower(ch.ObjectID)
	if ch.Removed {
		t.remove(id)
		return true
	}
	o, ok := t.get(id)
	if !ok || o.Source != ch.Source {
		if !ch.HasAppID || !ch.HasPasswords || !ch.HasCertificates {
			return false
		}
		o = graph.Object{Source: ch.Source, ObjectID: id}
	}
	if ch.HasAppID {
		o.AppID = strings.ToLower(ch.AppID)
	}
	if ch.HasDisplayName {
		o.DisplayName = ch.DisplayName
	}
	if ch.HasSingleSignOn {
		o.SingleSignOnMode = ch.SingleSignOnMode
	}
	if ch.HasTags {
		o.Tags = ch.Tags
	}
	if ch.HasAppOwner {
		o.AppOwnerTenantID = ch.AppOwnerTenantID
	}
	replace := func(typ graph.Type, with []graph.Credential) {
		creds := slices.DeleteFunc(o.Credentials, func(c graph.Credential) bool { return c.Type == typ })
		o.Credentials = append(creds, with...)
	}
	if ch.HasPasswords {
		replace(graph.Password, ch.Passwords)
	}
	if ch.HasCertificates {
		replace(graph.Certificate, ch.Certificates)
	}
	t.put(id, pack(o))
	return true
}

// Visit hands every object to visit, in no set order, decoded for the call: its strings share
// the bytes the tenant holds, and keep them alive while visit keeps them.
func (t *Tenant) Visit(visit func(graph.Object)) {
	for u, p := range t.objects {
		visit(unpack(u.String(), p))
	}
	for id, p := range t.others {
		visit(unpack(id, p))
	}
}

// Differs is the objects listed holds otherwise than t, each by its object ID and appId: those
// t holds and listed does not, those listed holds and t does not, and those whose properties or
// credentials differ.
func (t *Tenant) Differs(listed *Tenant) map[string]string {
	out := map[string]string{}
	t.Visit(func(o graph.Object) {
		if l, ok := listed.get(o.ObjectID); !ok || !sameObject(o, l) {
			out[o.ObjectID] = o.AppID
		}
	})
	listed.Visit(func(l graph.Object) {
		if _, ok := t.get(l.ObjectID); !ok {
			out[l.ObjectID] = l.AppID
		}
	})
	return out
}

func sameObject(a, b graph.Object) bool {
	if a.Source != b.Source || a.AppID != b.AppID || a.DisplayName != b.DisplayName ||
		a.SingleSignOnMode != b.SingleSignOnMode || a.AppOwnerTenantID != b.AppOwnerTenantID || !slices.Equal(a.Tags, b.Tags) || len(a.Credentials) != len(b.Credentials) {
		return false
	}
	byKey := func(x, y graph.Credential) int {
		return strings.Compare(string(x.Type)+x.KeyID, string(y.Type)+y.KeyID)
	}
	ac, bc := slices.SortedFunc(slices.Values(a.Credentials), byKey), slices.SortedFunc(slices.Values(b.Credentials), byKey)
	return slices.EqualFunc(ac, bc, func(x, y graph.Credential) bool {
		return x.KeyID == y.KeyID && x.Type == y.Type && x.DisplayName == y.DisplayName && x.Hint == y.Hint &&
			x.Start.Equal(y.Start) && x.End.Equal(y.End)
	})
}
