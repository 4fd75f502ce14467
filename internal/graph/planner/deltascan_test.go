package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
)

// scanTenantOf is n applications, each with its service principal and one secret.
func scanTenantOf(n int) []graph.Object {
	var out []graph.Object
	for i, id := range appIDs(n) {
		out = append(out,
			graph.Object{Source: graph.Application, AppID: id, ObjectID: fmt.Sprintf("a%d", i), DisplayName: "app",
				Credentials: []graph.Credential{{KeyID: "k" + id, Type: graph.Password, Source: graph.Application}}},
			graph.Object{Source: graph.ServicePrincipal, AppID: id, ObjectID: fmt.Sprintf("s%d", i), DisplayName: "app"})
	}
	return out
}

// scan scans h's tenant and returns what it was handed, by object ID.
func (h *deltaHarness) scan() map[string]graph.Object {
	h.t.Helper()
	got := map[string]graph.Object{}
	if err := h.p.Scan(context.Background(), h.cred, func(o graph.Object) { got[o.ObjectID] = o }); err != nil {
		h.t.Fatal(err)
	}
	return got
}

func (h *deltaHarness) listings() int {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.r.scans
}

func (h *deltaHarness) report(chs ...graph.Change) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	h.d.changes = append(h.d.changes, chs...)
}

// scanApps is the size of the tenants these tests scan: a listing is four pages, and a round of
// a few changes costs less.
const scanApps = 1000

func TestUnitTenantScanReadsChangesAfterItsFirstListing(t *testing.T) {
	h := newDeltaHarness(t, &keeper{kept: map[string][]byte{}}, 0)
	h.r.tenant = scanTenantOf(scanApps)
	if got := h.scan(); len(got) != 2*scanApps || h.listings() != 1 {
		t.Fatalf("first scan: %d objects from %d listings, want %d from 1", len(got), h.listings(), 2*scanApps)
	}
	added := graph.Credential{KeyID: "new", Type: graph.Password, Source: graph.Application}
	h.report(
		graph.Change{Source: graph.Application, ObjectID: "a0", HasPasswords: true, Passwords: []graph.Credential{added}},
		graph.Change{Source: graph.ServicePrincipal, ObjectID: "s1", Removed: true},
		graph.Change{Source: graph.ServicePrincipal, ObjectID: "s-new", HasAppID: true, AppID: "NEW-APP", HasDisplayName: true, DisplayName: "new",
			HasPasswords: true, HasCertificates: true},
	)
	got := h.scan()
	if h.listings() != 1 {
		t.Fatalf("the second scan listed the tenant; it should read the changes only")
	}
	if c := got["a0"].Credentials; len(c) != 1 || c[0].KeyID != "new" || got["a0"].DisplayName != "app" {
		t.Errorf("a0 after a new secret = %+v, want its name kept and the secret replaced", got["a0"])
	}
	if _, ok := got["s1"]; ok {
		t.Error("a removed service principal is still scanned")
	}
	if o := got["s-new"]; o.AppID != "new-app" || o.Source != graph.ServicePrincipal {
		t.Errorf("a created service principal = %+v", o)
	}
	if len(got) != 2*scanApps {
		t.Errorf("scanned %d objects, want %d", len(got), 2*scanApps)
	}
	h.clock.Step(time.Minute)
	if got := h.scan(); len(got) != 2*scanApps || h.listings() != 1 {
		t.Errorf("a quiet round: %d objects from %d listings", len(got), h.listings())
	}
}

// A round that reported more objects than a listing holds pages for says the tenant changes
// faster than rounds pay: the next scan lists it, and the one after reads the round since.
func TestUnitTenantScanListsATenantThatChangesFast(t *testing.T) {
	h := newDeltaHarness(t, &keeper{kept: map[string][]byte{}}, 0)
	h.r.tenant = scanTenantOf(10)
	h.scan()
	for i := range 10 {
		h.report(graph.Change{Source: graph.Application, ObjectID: fmt.Sprintf("a%d", i), HasDisplayName: true, DisplayName: "renamed"},
			graph.Change{Source: graph.ServicePrincipal, ObjectID: fmt.Sprintf("s%d", i), HasDisplayName: true, DisplayName: "renamed"})
	}
	if got := h.scan(); h.listings() != 1 || got["a3"].DisplayName != "renamed" {
		t.Fatalf("the round of 20 changes: %d listings, a3 = %+v", h.listings(), got["a3"])
	}
	if h.scan(); h.listings() != 2 {
		t.Errorf("after a round of 20 objects (3 requests) in a tenant listed in 2: %d listings, want the tenant listed", h.listings())
	}
	if h.scan(); h.listings() != 2 {
		t.Errorf("after the listing: %d listings, want a round", h.listings())
	}
}

func TestUnitTenantScanListsAgainWhenTheRoundsCannotSay(t *testing.T) {
	for _, tc := range []struct {
		name     string
		before   func(h *deltaHarness)
		resynced bool
	}{
		{name: "Graph lost the round's state", resynced: true,
			before: func(h *deltaHarness) { h.d.err = fmt.Errorf("reading: %w", graph.ErrResync) }},
		{name: "the links are older than Graph keeps them", resynced: true,
			before: func(h *deltaHarness) {
				// Rounds fail for days: a scan still uses the tenant, whose links grow old.
				for range 6 {
					h.clock.Step(24 * time.Hour)
					h.d.err = errors.New("Graph is down")
					if err := h.p.Scan(context.Background(), h.cred, func(graph.Object) {}); err == nil {
						h.t.Fatal("a scan whose round failed did not fail")
					}
				}
				h.clock.Step(time.Hour)
			}},
		{name: "an object it does not hold reported in part",
			before: func(h *deltaHarness) {
				h.report(graph.Change{Source: graph.Application, ObjectID: "unknown", HasPasswords: true})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep := &keeper{kept: map[string][]byte{}}
			h := newDeltaHarness(t, keep, 0)
			h.r.tenant = scanTenantOf(scanApps)
			h.scan()
			tc.before(h)
			if got := h.scan(); len(got) != 2*scanApps || h.listings() != 2 {
				t.Errorf("%d objects from %d listings, want %d from 2", len(got), h.listings(), 2*scanApps)
			}
			if (len(keep.resynced) == 1) != tc.resynced {
				t.Errorf("resynced: %q", keep.resynced)
			}
			if h.scan(); h.listings() != 2 {
				t.Errorf("the scan after the new listing listed again")
			}
		})
	}
}

func TestUnitTenantScanComparesItsListingWithTheRounds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		nextReport bool
		missed     int
	}{
		{name: "a change the rounds missed", missed: 1},
		{name: "a change made between the round and the listing", nextReport: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep := &keeper{kept: map[string][]byte{}}
			h := newDeltaHarness(t, keep, 24*time.Hour)
			h.r.tenant = scanTenantOf(scanApps)
			h.scan()
			// Graph's tenant changes, and no round says so.
			h.r.mu.Lock()
			h.r.tenant = slices.Clone(h.r.tenant)
			h.r.tenant[0].Credentials = nil
			h.r.mu.Unlock()
			h.clock.Step(25 * time.Hour)
			if got := h.scan(); h.listings() != 2 || len(got["a0"].Credentials) != 0 {
				t.Fatalf("the scan a day later: %d listings, a0 = %+v; want a listing that found a0's change", h.listings(), got["a0"])
			}
			if tc.nextReport {
				h.report(graph.Change{Source: graph.Application, ObjectID: "a0", HasPasswords: true})
			}
			h.clock.Step(time.Minute)
			h.scan()
			if len(keep.missed) != tc.missed || tc.missed > 0 && !strings.Contains(keep.missed[0], "object a0") {
				t.Errorf("missed: %q, want %d naming a0", keep.missed, tc.missed)
			}
		})
	}
}
