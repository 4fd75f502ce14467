package policy

import (
	"strings"
	"testing"
)

func TestMailableOwners(t *testing.T) {
	for _, tc := range []struct {
		name            string
		owners, domains []string
		want            string
		dropped         int
	}{
		{name: "in a verified domain", owners: []string{"ada@Contoso.com"}, domains: []string{"contoso.com"}, want: "ada@Contoso.com"},
		{name: "an outside address", owners: []string{"mallory@evil.example", "ada@contoso.com"}, domains: []string{"contoso.com"},
			want: "ada@contoso.com", dropped: 1},
		{name: "a subdomain is not its parent", owners: []string{"bob@mail.contoso.com"}, domains: []string{"contoso.com"}, dropped: 1},
		{name: "a guest's user principal name", owners: []string{"mallory_evil.example#EXT#@contoso.onmicrosoft.com"},
			domains: []string{"contoso.onmicrosoft.com"}, dropped: 1},
		{name: "no domains: nobody", owners: []string{"ada@contoso.com"}, dropped: 1},
		{name: "not an address", owners: []string{"contoso.com", "@contoso.com"}, domains: []string{"contoso.com"}, dropped: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, dropped := MailableOwners(tc.owners, tc.domains)
			if strings.Join(keep, ",") != tc.want || dropped != tc.dropped {
				t.Fatalf("kept %v, dropped %d; want %q, %d", keep, dropped, tc.want, tc.dropped)
			}
		})
	}
}
