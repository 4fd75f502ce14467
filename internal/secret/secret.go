// Package secret holds secret text (a client secret, a new secret on its way to a cluster) in a
// value that prints as [redacted] through fmt with any verb, JSON and logr, however deep in a
// struct it sits, so that formatting a value by mistake cannot leak it.
package secret

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

const redacted = "[redacted]"

// Text is secret text. Its zero value holds none. The text sits behind a pointer, so that even
// fmt's reflection over a struct holding Text in an unexported field prints an address, not it.
// Text cannot be compared with ==, which would compare pointers: nor can what holds it.
type Text struct {
	_ [0]func()
	p *string
}

// New holds s.
func New(s string) Text { return Text{p: &s} }

// Reveal is the text itself, for the one call that must send it.
func (t Text) Reveal() string {
	if t.p == nil {
		return ""
	}
	return *t.p
}

// Digest is the SHA-256 of the text, in hex: what may be kept in status to tell later that a copy
// of the text is still the same, without keeping the text.
func (t Text) Digest() string {
	sum := sha256.Sum256([]byte(t.Reveal()))
	return hex.EncodeToString(sum[:])
}

// Hint is the text's first three characters, as Microsoft Graph shows of every client secret.
func (t Text) Hint() string {
	r := []rune(t.Reveal())
	return string(r[:min(3, len(r))])
}

// IsZero reports whether t holds no text, or empty text.
func (t Text) IsZero() bool { return t.Reveal() == "" }

// String is what every fmt verb prints.
func (t Text) String() string { return redacted }

// GoString keeps %#v from printing the text.
func (t Text) GoString() string { return redacted }

// Format prints [redacted] for every verb, %d and %x included.
func (t Text) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// MarshalJSON keeps the text out of JSON.
func (t Text) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalLog keeps the text out of structured logs (logr.Marshaler).
func (t Text) MarshalLog() any { return redacted }
