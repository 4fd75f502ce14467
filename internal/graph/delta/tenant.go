package delta

import (
	"slices"
	"strings"
	"time"

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

	objects map[string]graph.Object
}

// NewTenant is an empty tenant whose rounds go on from links, listed at listed.
func NewTenant(links map[graph.Source]string, listed time.Time) *Tenant {
	return &Tenant{Links: links, Listed: listed, Round: listed, objects: map[string]graph.Object{}}
}

// Put adds o, as a listing found it.
func (t *Tenant) Put(o graph.Object) {
	o.ObjectID = strings.ToLower(o.ObjectID)
	t.objects[o.ObjectID] = o
}

// Len is how many objects the tenant holds.
func (t *Tenant) Len() (apps, sps int) {
	for _, o := range t.objects {
		if o.Source == graph.Application {
			apps++
		} else {
			sps++
		}
	}
	return apps, sps
}

// Apply applies what a round reported of one object. It is false when the round reported in part
// an object the tenant does not hold, which only a listing can say the rest of.
func (t *Tenant) Apply(ch graph.Change) bool {
	id := strings.ToLower(ch.ObjectID)
	if ch.Removed {
		delete(t.objects, id)
		return true
	}
	o, ok := t.objects[id]
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
	replace := func(typ graph.Type, with []graph.Credential) {
		creds := slices.DeleteFunc(slices.Clone(o.Credentials), func(c graph.Credential) bool { return c.Type == typ })
		o.Credentials = append(creds, with...)
	}
	if ch.HasPasswords {
		replace(graph.Password, ch.Passwords)
	}
	if ch.HasCertificates {
		replace(graph.Certificate, ch.Certificates)
	}
	t.objects[id] = o
	return true
}

// Visit hands every object to visit, in no set order.
func (t *Tenant) Visit(visit func(graph.Object)) {
	for _, o := range t.objects {
		visit(o)
	}
}

// Differs is the objects listed holds otherwise than t, each by its object ID and appId: those
// t holds and listed does not, those listed holds and t does not, and those whose properties or
// credentials differ.
func (t *Tenant) Differs(listed *Tenant) map[string]string {
	out := map[string]string{}
	for id, o := range t.objects {
		if l, ok := listed.objects[id]; !ok || !sameObject(o, l) {
			out[id] = o.AppID
		}
	}
	for id, l := range listed.objects {
		if _, ok := t.objects[id]; !ok {
			out[id] = l.AppID
		}
	}
	return out
}

func sameObject(a, b graph.Object) bool {
	if a.Source != b.Source || a.AppID != b.AppID || a.DisplayName != b.DisplayName ||
		a.SingleSignOnMode != b.SingleSignOnMode || !slices.Equal(a.Tags, b.Tags) || len(a.Credentials) != len(b.Credentials) {
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
