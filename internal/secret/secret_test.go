package secret

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// holder holds Text as structs in the code do, exported and not.
type holder struct {
	Name   string
	Secret Text
	hidden Text
}

func TestTextNeverPrints(t *testing.T) {
	const s = "cLi~SECRET-value-0123"
	h := holder{Name: "n", Secret: New(s), hidden: New(s)}
	var printed []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t", "%p"} {
		printed = append(printed, fmt.Sprintf(verb, h.Secret), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h))
	}
	j, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	printed = append(printed, string(j), fmt.Sprint(h.Secret.MarshalLog()), fmt.Errorf("wrapped: %v", h).Error())
	for _, p := range printed {
		if strings.Contains(p, s) || strings.Contains(p, fmt.Sprintf("%x", s)) {
			t.Errorf("printed %q holds the secret", p)
		}
	}
	if h.Secret.Reveal() != s || h.hidden.Reveal() != s {
		t.Error("Reveal does not give the text back")
	}
}

func TestZero(t *testing.T) {
	if !(Text{}).IsZero() || !New("").IsZero() || New("x").IsZero() {
		t.Error("IsZero is wrong")
	}
	if (Text{}).Reveal() != "" {
		t.Error("the zero Text reveals text")
	}
}

// What may be kept or compared of a text without keeping it: its SHA-256, and the three
// characters Graph shows as a secret's hint.
func TestDigestAndHint(t *testing.T) {
	abc := New("abc")
	if got := abc.Digest(); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("Digest = %s, want SHA-256 of abc", got)
	}
	for text, want := range map[string]string{"": "", "ab": "ab", "Kq8~secret": "Kq8", "héllo": "hél"} {
		if got := New(text).Hint(); got != want {
			t.Errorf("Hint of %q = %q, want %q", text, got, want)
		}
	}
}
