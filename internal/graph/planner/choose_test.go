package planner

import "testing"

func TestChooseReads(t *testing.T) {
	tests := []struct {
		name          string
		due, apps, sp int
		mayList       bool
		want          Reads
	}{
		{"a whole tenant of 10,000 is 22 pages against 1,334 lists in 134 requests", 10000, 10000, 10000, true, FullListing},
		{"a sixth of it: 22 pages against 228 lists in 23 requests", 1700, 10000, 10000, true, FullListing},
		{"a little less: 22 pages against 220 lists in 22 requests", 1650, 10000, 10000, true, InLists},
		{"a hundred of 10,000: two requests", 100, 10000, 10000, true, InLists},
		{"the whole tenant, not allowed to list it", 10000, 10000, 10000, false, InLists},
		{"a tenant of unknown size", 10000, 0, 0, true, InLists},
		{"nothing due", 0, 10, 10, true, InLists},
		{"a small tenant, all due: 2 pages against 2 lists in 1 request", 10, 10, 10, true, InLists},
		{"service principals only: a tenant of other tenants' applications", 5000, 0, 9000, true, FullListing},
		{"100,000 due of 100,000: 202 pages against 13,334 lists", 100000, 100000, 100000, true, FullListing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChooseReads(tc.due, tc.apps, tc.sp, tc.mayList); got != tc.want {
				t.Errorf("ChooseReads(%d, %d, %d, %t) = %v, want %v", tc.due, tc.apps, tc.sp, tc.mayList, got, tc.want)
			}
		})
	}
}

func TestChooseDelta(t *testing.T) {
	tests := []struct {
		name              string
		watched, reported int
		mayList           bool
		want              bool
	}{
		{"10,000 watched of a quiet tenant: 2 requests against 1,334 lists", 10000, 0, true, true},
		{"10,000 watched, 1% changed: 4 requests against 1,334 lists", 10000, 200, true, true},
		{"one watch: 2 requests against 2 lists", 1, 0, true, false},
		{"fifteen watches: one list of each collection", 15, 0, true, false},
		{"sixteen watches: 4 lists against 2 requests", 16, 0, true, true},
		{"not allowed to list the tenant", 10000, 0, false, false},
		{"a tenant changing faster than its watches are read: 102 pages against 68 lists", 500, 10000, true, false},
		{"nothing watched", 0, 0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChooseDelta(tc.watched, tc.reported, tc.mayList); got != tc.want {
				t.Errorf("ChooseDelta(%d, %d, %t) = %t, want %t", tc.watched, tc.reported, tc.mayList, got, tc.want)
			}
		})
	}
}

func TestUnitChooseScanDelta(t *testing.T) {
	for _, tc := range []struct {
		name                string
		apps, sps, reported int
		want                bool
	}{
		{name: "a quiet tenant of 100,000", apps: 100000, sps: 100000, want: true},
		{name: "1% changed", apps: 100000, sps: 100000, reported: 2000, want: true},
		{name: "as many pages as the listing", apps: 100000, sps: 100000, reported: 20000, want: true},
		{name: "more pages than the listing", apps: 100000, sps: 100000, reported: 20001},
		{name: "a small tenant, quiet", apps: 10, sps: 10, want: true},
		{name: "a small tenant whose every object changed", apps: 10, sps: 10, reported: 20},
		{name: "an empty tenant", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChooseScanDelta(tc.apps, tc.sps, tc.reported); got != tc.want {
				t.Errorf("ChooseScanDelta(%d, %d, %d) = %v, want %v", tc.apps, tc.sps, tc.reported, got, tc.want)
			}
		})
	}
}
