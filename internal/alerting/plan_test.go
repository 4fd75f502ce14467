package alerting

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestCurrentStepAndNextStepDue(t *testing.T) {
	tests := map[string]struct {
		left     time.Duration
		wantStep string // "" for none
		wantDue  time.Duration
		wantNext time.Duration
	}{
		"far away: nothing yet, first reminder at 30d": {left: 45 * day, wantNext: 15 * day},
		"exactly 30d: the 30d reminder":                {left: 30 * day, wantStep: "30d", wantDue: 0, wantNext: 16 * day},
		"20d: still the 30d reminder":                  {left: 20 * day, wantStep: "30d", wantDue: -10 * day, wantNext: 6 * day},
		"operator was down past 14d and 7d: only 7d":   {left: 5 * day, wantStep: "7d", wantDue: -2 * day, wantNext: 2 * day},
		"12h: the 1d reminder, next at expiry":         {left: 12 * time.Hour, wantStep: "1d", wantDue: -12 * time.Hour, wantNext: 12 * time.Hour},
		"at expiry: day 0":                             {left: 0, wantStep: "expired+0d", wantDue: 0, wantNext: day},
		"3d12h after expiry: day 3":                    {left: -(3*day + 12*time.Hour), wantStep: "expired+3d", wantDue: -12 * time.Hour, wantNext: 12 * time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			end := now.Add(tc.left)
			step, ok := CurrentStep(end, now, DefaultRemindBefore)
			if (tc.wantStep != "") != ok || step.Name != tc.wantStep {
				t.Fatalf("CurrentStep = %+v, %v; want %q", step, ok, tc.wantStep)
			}
			if ok && step.Due.Sub(now) != tc.wantDue {
				t.Errorf("step due at now%+v, want now%+v", step.Due.Sub(now), tc.wantDue)
			}
			if got := NextStepDue(end, now, DefaultRemindBefore).Sub(now); got != tc.wantNext {
				t.Errorf("NextStepDue = now+%v, want now+%v", got, tc.wantNext)
			}
		})
	}
}

func TestRemindBefore(t *testing.T) {
	got, err := RemindBefore([]v1alpha1.Duration{"1d", "2w", "3d"})
	if err != nil || len(got) != 3 || got[0] != 14*day || got[2] != day {
		t.Errorf("RemindBefore = %v, %v; want latest first", got, err)
	}
	if got, _ := RemindBefore(nil); len(got) != len(DefaultRemindBefore) {
		t.Errorf("RemindBefore(nil) = %v, want the default", got)
	}
}

func sentAlert(ch, subject, step string, due time.Time) v1alpha1.SentAlert {
	return v1alpha1.SentAlert{Channel: ch, Subject: subject, Step: step, DueTime: metav1.NewTime(due), SentTime: metav1.NewTime(due)}
}

func pull(scope v1alpha1.PullScope) v1alpha1.PullIncident {
	return v1alpha1.PullIncident{Registry: "myacr.azurecr.io", Scope: scope, Nodes: []string{"n1", "n2", "n3"}, FailingNodes: 3,
		Since: metav1.NewTime(now.Add(-5 * time.Minute))}
}

func TestPlan(t *testing.T) {
	secret := v1alpha1.Credential{KeyID: "k1", Source: v1alpha1.SourceApplication, EndTime: metav1.NewTime(now.Add(5 * day))}
	cert := v1alpha1.Credential{KeyID: "k2", Source: v1alpha1.SourceServicePrincipal, EndTime: metav1.NewTime(now.Add(100 * day))}
	ok := &metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}
	failingFor := func(d time.Duration) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-d))}
	}
	base := func() Inputs {
		return Inputs{Credentials: []v1alpha1.Credential{secret, cert}, Checked: true, Ready: ok,
			Channels: []string{"slack", "email"}, RemindBefore: DefaultRemindBefore, CheckFailureAfter: time.Hour}
	}
	tests := map[string]struct {
		edit      func(*Inputs)
		want      []string // channel kind subject step
		wantStale int
		wantNext  time.Duration
	}{
		"nothing sent yet: the 7d reminder on each channel": {
			edit:     func(*Inputs) {},
			want:     []string{"slack Reminder Application/k1 7d", "email Reminder Application/k1 7d"},
			wantNext: 2 * day,
		},
		"already sent on one channel: only the other": {
			edit: func(in *Inputs) {
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "7d", now.Add(-2*day))}
			},
			want:     []string{"email Reminder Application/k1 7d"},
			wantNext: 2 * day,
		},
		"an earlier step sent: the later one is due": {
			edit: func(in *Inputs) {
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "14d", now.Add(-9*day))}
			},
			want:     []string{"slack Reminder Application/k1 7d", "email Reminder Application/k1 7d"},
			wantNext: 2 * day,
		},
		"a credential alerted on is gone: resolved, once per channel that heard of it": {
			edit: func(in *Inputs) {
				in.Credentials = []v1alpha1.Credential{cert}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "7d", now.Add(-2*day))}
			},
			want:     []string{"slack Resolved Application/k1 resolved"},
			wantNext: 70 * day,
		},
		"no successful check: nothing is known, nothing resolved": {
			edit: func(in *Inputs) {
				in.Credentials, in.Checked = nil, false
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "7d", now.Add(-2*day))}
			},
		},
		"checks failing less than the allowance: nothing yet": {
			edit:     func(in *Inputs) { in.Ready = failingFor(20 * time.Minute); in.Channels = []string{"slack"} },
			want:     []string{"slack Reminder Application/k1 7d"},
			wantNext: 40 * time.Minute,
		},
		"checks failing past the allowance": {
			edit:     func(in *Inputs) { in.Ready = failingFor(2 * time.Hour); in.Channels = []string{"slack"} },
			want:     []string{"slack Reminder Application/k1 7d", "slack CheckFailing check failing"},
			wantNext: 2 * day,
		},
		"the same failure already announced": {
			edit: func(in *Inputs) {
				in.Ready, in.Channels = failingFor(2*time.Hour), []string{"slack"}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "7d", now.Add(-2*day)), sentAlert("slack", "check", "failing", now.Add(-time.Hour))}
			},
			wantNext: 2 * day,
		},
		"checks work again after an announced failure: recovered": {
			edit: func(in *Inputs) {
				in.Channels = []string{"slack"}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "7d", now.Add(-2*day)), sentAlert("slack", "check", "failing", now.Add(-time.Hour))}
			},
			want:     []string{"slack CheckRecovered check recovered"},
			wantNext: 2 * day,
		},
		"a rotation done: announced once per channel": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				in.LastRotation = &v1alpha1.LastRotation{Time: metav1.NewTime(now.Add(-time.Minute)), KeyID: "k9"}
			},
			want: []string{"slack Rotated rotation k9"}, wantNext: 70 * day,
		},
		"a rotation already announced": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				in.LastRotation = &v1alpha1.LastRotation{Time: metav1.NewTime(now.Add(-time.Minute)), KeyID: "k9"}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "rotation", "k9", now.Add(-time.Minute))}
			},
			wantNext: 70 * day,
		},
		"a rotation step failing again and again": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				in.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepClusterUpdating, DisplayName: "credwatch-x", Failures: 5, StartTime: metav1.NewTime(now.Add(-day))}
			},
			want: []string{"slack RotationFailing rotation credwatch-x/ClusterUpdating"}, wantNext: 70 * day,
		},
		"expired: daily": {
			edit: func(in *Inputs) {
				in.Credentials = []v1alpha1.Credential{{KeyID: "k1", Source: v1alpha1.SourceApplication, EndTime: metav1.NewTime(now.Add(-50 * time.Hour))}}
				in.Channels = []string{"slack"}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "expired+1d", now.Add(-26*time.Hour))}
			},
			want:     []string{"slack Expired Application/k1 expired+2d"},
			wantNext: 22 * time.Hour,
		},
		"a channel removed from the spec: its entry stays while the credential does": {
			edit: func(in *Inputs) {
				in.Channels = []string{"email"}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "7d", now.Add(-2*day))}
			},
			want:     []string{"email Reminder Application/k1 7d"},
			wantNext: 2 * day,
		},
		"a removed channel's entry about a credential that is gone: dropped quietly": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"email"}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "7d", now.Add(-2*day))}
			},
			wantStale: 1, wantNext: 70 * day,
		},
		"a registry refusing pulls cluster-wide: told once per channel": {
			edit: func(in *Inputs) {
				in.Credentials = []v1alpha1.Credential{cert}
				in.Pulls = []v1alpha1.PullIncident{pull(v1alpha1.PullScopeClusterWide)}
			},
			want:     []string{"slack PullsRefused pull/myacr.azurecr.io ClusterWide", "email PullsRefused pull/myacr.azurecr.io ClusterWide"},
			wantNext: 70 * day,
		},
		"the incident already told in its scope: nothing": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				in.Pulls = []v1alpha1.PullIncident{pull(v1alpha1.PullScopeClusterWide)}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "pull/myacr.azurecr.io", "ClusterWide", now.Add(-time.Minute))}
			},
			wantNext: 70 * day,
		},
		"node-local turning cluster-wide: told again": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				in.Pulls = []v1alpha1.PullIncident{pull(v1alpha1.PullScopeClusterWide)}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "pull/myacr.azurecr.io", "NodeLocal", now.Add(-time.Minute))}
			},
			want:     []string{"slack PullsRefused pull/myacr.azurecr.io ClusterWide"},
			wantNext: 70 * day,
		},
		"too early to tell whose fault: not told": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				undetermined := pull(v1alpha1.PullScopeUndetermined)
				undetermined.TellTime = &metav1.Time{Time: now.Add(9 * time.Minute)}
				in.Pulls = []v1alpha1.PullIncident{undetermined}
			},
			wantNext: 9 * time.Minute,
		},
		"still undetermined at the end of the window: told": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				undetermined := pull(v1alpha1.PullScopeUndetermined)
				undetermined.TellTime = &metav1.Time{Time: now}
				in.Pulls = []v1alpha1.PullIncident{undetermined}
			},
			want:     []string{"slack PullsRefused pull/myacr.azurecr.io Undetermined"},
			wantNext: 70 * day,
		},
		"a cluster-wide failure whose refusals are still settling: not told yet": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				settling := pull(v1alpha1.PullScopeClusterWide)
				settling.TellTime = &metav1.Time{Time: now.Add(20 * time.Second)}
				in.Pulls = []v1alpha1.PullIncident{settling}
			},
			wantNext: 20 * time.Second,
		},
		"refusals over after an announced incident: recovered, not a credential resolved": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = []v1alpha1.Credential{cert}, []string{"slack"}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "pull/myacr.azurecr.io", "NodeLocal", now.Add(-time.Minute))}
			},
			want:     []string{"slack PullsRecovered pull/myacr.azurecr.io recovered"},
			wantNext: 70 * day,
		},
		"signing keys drifting: told once per reason, with the watch's other alerts": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = nil, []string{"slack"}
				in.Drift = &metav1.Condition{Type: v1alpha1.ConditionSigningKeyDrift, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCanaryRejected,
					LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "issuer/drift", v1alpha1.ReasonSigningKeyNotShared, now.Add(-time.Hour))}
			},
			want: []string{"slack SigningKeyDrift issuer/drift CanaryRejected"},
		},
		"signing keys drifting, already told": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = nil, []string{"slack"}
				in.Drift = &metav1.Condition{Type: v1alpha1.ConditionSigningKeyDrift, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCanaryRejected}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "issuer/drift", v1alpha1.ReasonCanaryRejected, now.Add(-time.Minute))}
			},
		},
		"signing keys agree after a told drift: once, and not a credential resolved": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = nil, []string{"slack"}
				in.Drift = &metav1.Condition{Type: v1alpha1.ConditionSigningKeyDrift, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonKeysAgree}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "issuer/drift", v1alpha1.ReasonCanaryRejected, now.Add(-time.Minute))}
			},
			want: []string{"slack SigningKeysAgree issuer/drift agree"},
		},
		"the issuer changed: told once per change": {
			edit: func(in *Inputs) {
				in.Credentials, in.Channels = nil, []string{"slack", "email"}
				changed := metav1.NewTime(now.Add(-time.Minute))
				in.IssuerChanged = &changed
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "issuer/url", "changed", now.Add(-time.Minute))}
			},
			want: []string{"email IssuerChanged issuer/url changed"},
		},
		"renewed with --append by hand: the old secret keeps its reminders": {
			edit: func(in *Inputs) {
				old := secret
				old.StartTime = &metav1.Time{Time: now.Add(-360 * day)}
				renewed := v1alpha1.Credential{KeyID: "k3", Source: v1alpha1.SourceApplication, StartTime: &metav1.Time{Time: now.Add(-time.Hour)}, EndTime: metav1.NewTime(now.Add(365 * day))}
				in.Credentials, in.Channels = []v1alpha1.Credential{old, renewed}, []string{"slack"}
			},
			want:     []string{"slack Reminder Application/k1 7d"},
			wantNext: 2 * day,
		},
		"renewed by credwatch's rotation, done: the old secret is resolved, the new one is quiet": {
			edit: func(in *Inputs) {
				old := secret
				old.StartTime = &metav1.Time{Time: now.Add(-360 * day)}
				renewed := v1alpha1.Credential{KeyID: "k3", Source: v1alpha1.SourceApplication, StartTime: &metav1.Time{Time: now.Add(-time.Hour)}, EndTime: metav1.NewTime(now.Add(365 * day))}
				in.Credentials, in.Channels = []v1alpha1.Credential{old, renewed}, []string{"slack"}
				in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "Application/k1", "7d", now.Add(-2*day)), sentAlert("slack", RotationSubject, "k3", now.Add(-time.Hour))}
				in.LastRotation = &v1alpha1.LastRotation{KeyID: "k3", Time: metav1.NewTime(now.Add(-time.Hour))}
			},
			want:     []string{"slack Resolved Application/k1 resolved"},
			wantNext: 335 * day,
		},
		"a newer secret that ends sooner renews nothing": {
			edit: func(in *Inputs) {
				old := secret
				old.StartTime = &metav1.Time{Time: now.Add(-360 * day)}
				short := v1alpha1.Credential{KeyID: "k3", Source: v1alpha1.SourceApplication, StartTime: &metav1.Time{Time: now.Add(-time.Hour)}, EndTime: metav1.NewTime(now.Add(day))}
				in.Credentials, in.Channels = []v1alpha1.Credential{old, short}, []string{"slack"}
			},
			want:     []string{"slack Reminder Application/k1 7d", "slack Reminder Application/k3 1d"},
			wantNext: day,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := base()
			tc.edit(&in)
			plan := Decide(in, now)
			var got []string
			for _, p := range plan.Due {
				got = append(got, strings.Join([]string{p.Channel, string(p.Kind), p.Subject, p.Step.Name}, " "))
			}
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("due =\n  %s\nwant\n  %s", strings.Join(got, "; "), strings.Join(tc.want, "; "))
			}
			for _, p := range plan.Due {
				if p.Kind == alertkind.Resolved || p.Kind == alertkind.CheckRecovered {
					if p.Step.Due.Equal(now) {
						t.Errorf("%s is due at now: its ID would change with every plan", p.Kind)
					}
				}
			}
			if len(plan.Stale) != tc.wantStale {
				t.Errorf("stale = %v, want %d", plan.Stale, tc.wantStale)
			}
			var next time.Duration
			if !plan.Next.IsZero() {
				next = plan.Next.Sub(now)
			}
			if next != tc.wantNext {
				t.Errorf("next = now+%v, want now+%v", next, tc.wantNext)
			}
		})
	}
}

// The credential that renewed another is the newest of those that did; a rotation's secret that
// is in use quiets what it renewed, a secret made by hand does not.
func TestARenewedSecretThatExpiredIsToldOnce(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	old := v1alpha1.Credential{KeyID: "old", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword,
		StartTime: &metav1.Time{Time: now.Add(-400 * day)}, EndTime: metav1.NewTime(now.Add(-3 * day))}
	renewed := v1alpha1.Credential{KeyID: "new", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword,
		StartTime: &metav1.Time{Time: now.Add(-10 * day)}, EndTime: metav1.NewTime(now.Add(355 * day))}
	in := Inputs{Credentials: []v1alpha1.Credential{old, renewed}, Checked: true, Channels: []string{"slack"}, RemindBefore: []time.Duration{7 * day}}
	plan := Decide(in, now)
	if len(plan.Due) != 1 || plan.Due[0].Step.Name != "expired" || plan.Due[0].Newer == nil || plan.Due[0].Newer.KeyID != "new" {
		t.Fatalf("due %+v, want the expiry once, naming the newer secret", plan.Due)
	}
	in.Sent = []v1alpha1.SentAlert{sentAlert("slack", SubjectOf(old), "expired", now)}
	if plan := Decide(in, now.Add(2*day)); len(plan.Due) != 0 {
		t.Errorf("due %+v two days on, want nothing more", plan.Due)
	}
}

// A told incident that falls to Undetermined is no news; one never told, without a tell time
// (from an earlier version), waits.
func TestUndeterminedPullsAreToldOnlyFirst(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	told := metav1.NewTime(now.Add(-time.Hour))
	in := Inputs{Channels: []string{"slack"},
		Pulls: []v1alpha1.PullIncident{{Registry: "myacr.azurecr.io", Scope: v1alpha1.PullScopeUndetermined, Since: told, TellTime: &told}},
		Sent:  []v1alpha1.SentAlert{sentAlert("slack", PullSubject("myacr.azurecr.io"), "NodeLocal", told.Time)}}
	if plan := Decide(in, now); len(plan.Due) != 0 {
		t.Errorf("due %+v, want nothing for a node-local incident fallen to Undetermined", plan.Due)
	}
	in.Sent, in.Pulls[0].TellTime = nil, nil
	if plan := Decide(in, now); len(plan.Due) != 0 {
		t.Errorf("due %+v, want nothing for an Undetermined incident with no tell time", plan.Due)
	}
}

func TestReplacedByRotation(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	old := v1alpha1.Credential{KeyID: "old", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword, StartTime: at(-360 * day), EndTime: *at(5 * day)}
	hand := v1alpha1.Credential{KeyID: "hand", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword, StartTime: at(-day), EndTime: *at(300 * day)}
	all := []v1alpha1.Credential{old, hand}
	byHand := newPlanner(Inputs{Credentials: all}, now)
	byRotation := newPlanner(Inputs{Credentials: all, Rotation: &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring, KeyID: "hand", RetireTime: at(7 * day)}}, now)
	notYet := newPlanner(Inputs{Credentials: all, Rotation: &v1alpha1.RotationStatus{Step: v1alpha1.StepSecretVerified, KeyID: "hand"}}, now)
	// Retiring, but its Secret not written yet (RetireTime comes with it): the old is all some have.
	notPublished := newPlanner(Inputs{Credentials: all, Rotation: &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring, KeyID: "hand"}}, now)
	if byHand.replacedByRotation(old) || !byRotation.replacedByRotation(old) || notYet.replacedByRotation(old) || notPublished.replacedByRotation(old) {
		t.Error("want old quiet only once the rotation's secret that renewed it is in use and in the watch's Secret")
	}
}
