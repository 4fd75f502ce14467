package delta

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
)

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

const (
	appID = "0f0e0d0c-0000-4000-8000-000000000001"
	appOB = "a0000000-0000-4000-8000-000000000001"
	spOB  = "b0000000-0000-4000-8000-000000000002"
)

func secret(src graph.Source, key string) graph.Credential {
	return graph.Credential{KeyID: key, Type: graph.Password, Source: src, End: t0.AddDate(1, 0, 0)}
}

func cert(src graph.Source, key string) graph.Credential {
	return graph.Credential{KeyID: key, Type: graph.Certificate, Source: src, End: t0.AddDate(1, 0, 0)}
}

// known is what a watch recorded: a secret and a certificate on the application, a secret on
// the service principal.
func known() graph.Snapshot {
	return graph.Snapshot{AppID: appID, DisplayName: "payments", ApplicationObjectID: appOB, ServicePrincipalObjectID: spOB,
		Credentials: []graph.Credential{secret(graph.Application, "k1"), cert(graph.Application, "c1"), secret(graph.ServicePrincipal, "s1")}}
}

func keys(s graph.Snapshot) string {
	var out []string
	for _, c := range s.Credentials {
		out = append(out, fmt.Sprintf("%s/%s/%s", c.Source[:1], c.Type[:1], c.KeyID))
	}
	return strings.Join(out, " ")
}

func TestAnswer(t *testing.T) {
	addedSecret := graph.Change{Source: graph.Application, ObjectID: appOB, HasPasswords: true,
		Passwords: []graph.Credential{secret(graph.Application, "k1"), secret(graph.Application, "k2")}}
	spCleared := graph.Change{Source: graph.ServicePrincipal, ObjectID: strings.ToUpper(spOB), HasPasswords: true}
	renamed := graph.Change{Source: graph.Application, ObjectID: appOB, HasDisplayName: true, DisplayName: "payments-v2"}
	removed := graph.Change{Source: graph.ServicePrincipal, ObjectID: spOB, Removed: true}
	newSP := graph.Change{Source: graph.ServicePrincipal, ObjectID: spOB, HasAppID: true, AppID: appID, HasPasswords: true, HasCertificates: true,
		Passwords: []graph.Credential{secret(graph.ServicePrincipal, "s9")}}
	newSPInPart := graph.Change{Source: graph.ServicePrincipal, ObjectID: spOB, HasAppID: true, AppID: appID, HasPasswords: true}
	other := graph.Change{Source: graph.Application, ObjectID: "c0000000-0000-4000-8000-000000000003", HasPasswords: true}
	type seen struct {
		ch graph.Change
		at time.Duration // after t0
	}
	tests := []struct {
		name    string
		since   time.Duration
		changes []seen
		knownAt time.Duration
		known   func() graph.Snapshot
		want    string // keys, or "" when the watch must be read
		name2   string
		// slack is how long before knownAt a change may not be in what the watch knows.
		slack time.Duration
	}{
		{name: "nothing changed", knownAt: 2 * time.Hour, want: "A/P/k1 A/C/c1 S/P/s1"},
		{name: "another object changed", changes: []seen{{other, 3 * time.Hour}}, knownAt: 2 * time.Hour, want: "A/P/k1 A/C/c1 S/P/s1"},
		{name: "a secret added after the read", changes: []seen{{addedSecret, 3 * time.Hour}}, knownAt: 2 * time.Hour,
			want: "A/C/c1 S/P/s1 A/P/k1 A/P/k2"},
		{name: "reported before the read: in the status already", changes: []seen{{addedSecret, time.Hour}}, knownAt: 2 * time.Hour,
			want: "A/P/k1 A/C/c1 S/P/s1"},
		{name: "reported within the slack before a read of Graph: unknown order", changes: []seen{{addedSecret, 2*time.Hour - 30*time.Second}},
			knownAt: 2 * time.Hour, slack: Slack},
		{name: "reported before an answer of the log: in it", changes: []seen{{addedSecret, 2*time.Hour - 30*time.Second}},
			knownAt: 2 * time.Hour, want: "A/P/k1 A/C/c1 S/P/s1"},
		{name: "reported half a second after the read", changes: []seen{{addedSecret, 2*time.Hour + 500*time.Millisecond}},
			knownAt: 2 * time.Hour, slack: Slack, want: "A/C/c1 S/P/s1 A/P/k1 A/P/k2"},
		{name: "an entry of another application under the object's ID is not the watch's",
			changes: []seen{{graph.Change{Source: graph.Application, ObjectID: appOB, HasAppID: true, AppID: "someone-else", HasPasswords: true}, 3 * time.Hour}},
			knownAt: 2 * time.Hour, want: "A/P/k1 A/C/c1 S/P/s1"},
		{name: "an entry of the other collection under the object's ID is not the watch's",
			changes: []seen{{graph.Change{Source: graph.ServicePrincipal, ObjectID: appOB, HasPasswords: true}, 3 * time.Hour}},
			knownAt: 2 * time.Hour, want: "A/P/k1 A/C/c1 S/P/s1"},
		{name: "the service principal's secrets all removed", changes: []seen{{spCleared, 3 * time.Hour}}, knownAt: 2 * time.Hour,
			want: "A/P/k1 A/C/c1"},
		{name: "renamed: the credentials stay", changes: []seen{{renamed, 3 * time.Hour}}, knownAt: 2 * time.Hour,
			want: "A/P/k1 A/C/c1 S/P/s1", name2: "payments-v2"},
		{name: "two rounds, property by property", changes: []seen{{addedSecret, 3 * time.Hour}, {renamed, 4 * time.Hour}}, knownAt: 2 * time.Hour,
			want: "A/C/c1 S/P/s1 A/P/k1 A/P/k2", name2: "payments-v2"},
		{name: "a removed object is confirmed by a read", changes: []seen{{removed, 3 * time.Hour}}, knownAt: 2 * time.Hour},
		{name: "a log younger than the read's base", since: 2*time.Hour + time.Second, knownAt: 2 * time.Hour},
		{name: "a log as old as the read's base", since: 2 * time.Hour, knownAt: 2 * time.Hour, want: "A/P/k1 A/C/c1 S/P/s1"},
		{name: "a watch that never read", knownAt: 0},
		{name: "a slack of 20m: a change 10m before may not be in it", changes: []seen{{addedSecret, 110 * time.Minute}},
			knownAt: 2 * time.Hour, slack: 20 * time.Minute},
		{name: "a slack of 20m: a change 30m before is in it", changes: []seen{{addedSecret, 90 * time.Minute}},
			knownAt: 2 * time.Hour, slack: 20 * time.Minute, want: "A/P/k1 A/C/c1 S/P/s1"},
		{name: "a slack of 20m, and a log younger than that", since: 110 * time.Minute,
			knownAt: 2 * time.Hour, slack: 20 * time.Minute},
		{name: "a watch that found nothing", knownAt: 2 * time.Hour, known: func() graph.Snapshot { return graph.Snapshot{AppID: appID} }},
		{name: "a service principal created since, whole", changes: []seen{{newSP, 3 * time.Hour}}, knownAt: 2 * time.Hour,
			known: func() graph.Snapshot {
				s := known()
				s.ServicePrincipalObjectID, s.Credentials = "", s.Credentials[:2]
				return s
			}, want: "A/P/k1 A/C/c1 S/P/s9"},
		{name: "a service principal created since, in part", changes: []seen{{newSPInPart, 3 * time.Hour}}, knownAt: 2 * time.Hour,
			known: func() graph.Snapshot {
				s := known()
				s.ServicePrincipalObjectID, s.Credentials = "", s.Credentials[:2]
				return s
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(t0.Add(tt.since))
			for _, s := range tt.changes {
				l.Add(s.ch, t0.Add(s.at))
			}
			l.Round = t0.Add(5 * time.Hour)
			k := known()
			if tt.known != nil {
				k = tt.known()
			}
			knownAt := time.Time{}
			if tt.knownAt != 0 {
				knownAt = t0.Add(tt.knownAt)
			}
			got, ok := l.Answer(k, knownAt, tt.slack)
			if tt.want == "" {
				if ok {
					t.Fatalf("answered %s, want a read", keys(got))
				}
				return
			}
			if !ok {
				t.Fatal("no answer, want one")
			}
			if keys(got) != tt.want {
				t.Errorf("credentials %s, want %s", keys(got), tt.want)
			}
			if !got.ReadAt.Equal(l.Round) {
				t.Errorf("read at %v, want the round's start", got.ReadAt)
			}
			if tt.name2 != "" && got.DisplayName != tt.name2 {
				t.Errorf("name %q, want %q", got.DisplayName, tt.name2)
			}
			if keys(k) != keys(known()) && tt.known == nil {
				t.Errorf("the answer changed what the watch knew: %s", keys(k))
			}
		})
	}
}

func TestPruneAndEncode(t *testing.T) {
	l := New(t0)
	for i := range 30 {
		l.Add(graph.Change{Source: graph.Application, ObjectID: fmt.Sprintf("o%02d", i), HasAppID: true, AppID: fmt.Sprintf("app%02d", i),
			HasPasswords: true, Passwords: []graph.Credential{secret(graph.Application, fmt.Sprint(i))}}, t0.Add(time.Duration(i)*time.Hour))
	}
	l.Links[graph.Application] = "https://graph.example/v1.0/applications/delta?$deltatoken=x"
	l.Prune(t0.Add(Keep + 12*time.Hour))
	if len(l.Objects) != 18 || !l.Since.Equal(t0.Add(12*time.Hour)) {
		t.Fatalf("after pruning to Keep: %d objects since %v", len(l.Objects), l.Since)
	}
	if l.Covers(t0.Add(12*time.Hour-time.Second), 0) || !l.Covers(t0.Add(12*time.Hour), 0) || l.Covers(t0.Add(12*time.Hour+time.Minute), 2*time.Minute) {
		t.Error("the log covers reads from its start, and no earlier")
	}

	b, err := l.Encode(2000)
	if err != nil || len(b) > 2000 {
		t.Fatalf("encoded %d bytes, %v", len(b), err)
	}
	back, err := Decode(b, t0.Add(Keep+12*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Objects) == 0 || len(back.Objects) >= 18 || back.Links[graph.Application] != l.Links[graph.Application] || !back.Since.After(t0.Add(12*time.Hour)) {
		t.Fatalf("decoded %d objects since %v, links %v", len(back.Objects), back.Since, back.Links)
	}
	if len(back.byApp) != len(back.Objects) {
		t.Errorf("decoding indexes the appIds: %d for %d objects", len(back.byApp), len(back.Objects))
	}
}

func TestDecodeDropsWhatCannotBe(t *testing.T) {
	now := t0.Add(time.Hour)
	l := New(t0)
	l.Add(graph.Change{Source: graph.Application, ObjectID: appOB, HasPasswords: true}, t0.Add(time.Minute))
	l.Add(graph.Change{Source: graph.Application, ObjectID: spOB, HasPasswords: true}, t0.Add(2*time.Hour))
	b, err := l.Encode(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"Objects":{`, `"Objects":{"x":null,"y":{"ObjectID":"z"},`, 1))
	back, err := Decode(b, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Objects) != 1 || back.Objects[appOB] == nil {
		t.Errorf("kept %v; want only the entry that is its object's and not from the future", back.Objects)
	}
	future := New(t0.Add(2 * time.Hour))
	b, _ = future.Encode(1 << 20)
	if _, err := Decode(b, now); err == nil {
		t.Error("a log that starts in the future was read")
	}
}
