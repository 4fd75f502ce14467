package delta

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/credwatch/credwatch/internal/graph"
)

// A Tenant holds each object packed into one string: its GUIDs in 16 bytes, its strings and
// dates length-prefixed. A tenant of 100,000 applications and their service principals held as
// graph.Objects in a map took 76 MiB; what a scan needs of it is about a quarter of that, and a
// scan decodes each object once, as a listing parses it.

// packed is an object, packed.
type packed string

func pack(o graph.Object) packed {
	b := make([]byte, 0, 64+48*len(o.Credentials))
	src := byte(0)
	if o.Source == graph.ServicePrincipal {
		src = 1
	}
	b = append(b, src)
	b = appendID(b, o.AppID)
	b = appendString(b, o.DisplayName)
	b = appendString(b, o.SingleSignOnMode)
	b = appendID(b, o.AppOwnerTenantID)
	b = binary.AppendUvarint(b, uint64(len(o.Tags)))
	for _, t := range o.Tags {
		b = appendString(b, t)
	}
	b = binary.AppendUvarint(b, uint64(len(o.Credentials)))
	for _, c := range o.Credentials {
		typ := byte(0)
		if c.Type == graph.Certificate {
			typ = 1
		}
		b = append(b, typ)
		b = appendID(b, c.KeyID)
		b = appendString(b, c.DisplayName)
		b = appendString(b, c.Hint)
		b = appendTime(b, c.Start)
		b = appendTime(b, c.End)
	}
	return packed(b)
}

// unpack is the object p packs, whose object ID is id.
func unpack(id string, p packed) graph.Object {
	r := reader{s: string(p)}
	o := graph.Object{Source: graph.Application, ObjectID: id}
	if r.byte() == 1 {
		o.Source = graph.ServicePrincipal
	}
	o.AppID = r.id()
	o.DisplayName = r.string()
	o.SingleSignOnMode = r.string()
	o.AppOwnerTenantID = r.id()
	if n := r.uvarint(); n > 0 {
		o.Tags = make([]string, n)
		for i := range o.Tags {
			o.Tags[i] = r.string()
		}
	}
	if n := r.uvarint(); n > 0 {
		o.Credentials = make([]graph.Credential, n)
		for i := range o.Credentials {
			c := &o.Credentials[i]
			c.Type, c.Source = graph.Password, o.Source
			if r.byte() == 1 {
				c.Type = graph.Certificate
			}
			c.KeyID = r.id()
			c.DisplayName = r.string()
			c.Hint = r.string()
			c.Start = r.time()
			c.End = r.time()
		}
	}
	if r.err != nil {
		// Only pack writes what unpack reads: a failure here is a bug, and panics as one.
		panic(r.err)
	}
	return o
}

// guidOf is id's 16 bytes, when id is a GUID as Graph writes them (lower case), which it then
// is again when printed.
func guidOf(id string) (uuid.UUID, bool) {
	if len(id) != 36 {
		return uuid.UUID{}, false
	}
	u, err := uuid.Parse(id)
	return u, err == nil && u.String() == id
}

func appendID(b []byte, id string) []byte {
	if u, ok := guidOf(id); ok {
		return append(append(b, 1), u[:]...)
	}
	return appendString(append(b, 0), id)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	return binary.AppendVarint(binary.AppendVarint(append(b, 1), t.Unix()), int64(t.Nanosecond()))
}

// reader reads what pack wrote, keeping the first error.
type reader struct {
	s   string
	err error
}

var errShort = errors.New("delta: a packed object ends early")

func (r *reader) byte() byte {
	if len(r.s) == 0 {
		r.err = errShort
		return 0
	}
	b := r.s[0]
	r.s = r.s[1:]
	return b
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint([]byte(r.s[:min(len(r.s), binary.MaxVarintLen64)]))
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.s = r.s[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint([]byte(r.s[:min(len(r.s), binary.MaxVarintLen64)]))
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.s = r.s[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if uint64(len(r.s)) < n {
		r.err = errShort
		return ""
	}
	// A part of the packed string, not a copy: what a scan keeps of it shares its bytes.
	s := r.s[:n]
	r.s = r.s[n:]
	return s
}

func (r *reader) id() string {
	if r.byte() == 0 {
		return r.string()
	}
	if len(r.s) < 16 {
		r.err = errShort
		return ""
	}
	var u uuid.UUID
	copy(u[:], r.s[:16])
	r.s = r.s[16:]
	return u.String()
}

func (r *reader) time() time.Time {
	if r.byte() == 0 {
		return time.Time{}
	}
	sec := r.varint()
	return time.Unix(sec, r.varint()).UTC()
}
