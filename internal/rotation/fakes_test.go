package rotation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/secret"
)

// Func-field fakes of the machine's edges.

type fakeApp struct {
	SecretsFunc func(context.Context) ([]Secret, error)
	AddFunc     func(context.Context, string, time.Time) (NewSecret, error)
	RemoveFunc  func(context.Context, string) error
}

var _ Application = fakeApp{}

func (f fakeApp) Secrets(ctx context.Context) ([]Secret, error) { return f.SecretsFunc(ctx) }
func (f fakeApp) Add(ctx context.Context, name string, end time.Time) (NewSecret, error) {
	return f.AddFunc(ctx, name, end)
}
func (f fakeApp) Remove(ctx context.Context, keyID string) error { return f.RemoveFunc(ctx, keyID) }

type fakeCluster struct {
	ReadFunc       func(context.Context) (ClusterState, error)
	StartResetFunc func(context.Context, string, secret.Text) (Operation, bool, error)
	PollResetFunc  func(context.Context, string) (bool, error)
}

var _ Cluster = fakeCluster{}

func (f fakeCluster) Read(ctx context.Context) (ClusterState, error) { return f.ReadFunc(ctx) }
func (f fakeCluster) StartReset(ctx context.Context, clientID string, text secret.Text) (Operation, bool, error) {
	return f.StartResetFunc(ctx, clientID, text)
}
func (f fakeCluster) PollReset(ctx context.Context, token string) (bool, error) {
	return f.PollResetFunc(ctx, token)
}

type fakeStore struct {
	HeldFunc    func(context.Context) (Held, error)
	WriteFunc   func(context.Context, string, NewSecret, bool) error
	TextFunc    func(context.Context, string) (secret.Text, error)
	PublishFunc func(context.Context, string, string) error
	DiscardFunc func(context.Context) error
}

var _ Store = fakeStore{}

func (f fakeStore) Held(ctx context.Context) (Held, error) { return f.HeldFunc(ctx) }
func (f fakeStore) Write(ctx context.Context, name string, s NewSecret, dryRun bool) error {
	return f.WriteFunc(ctx, name, s, dryRun)
}
func (f fakeStore) Text(ctx context.Context, keyID string) (secret.Text, error) {
	return f.TextFunc(ctx, keyID)
}
func (f fakeStore) Publish(ctx context.Context, keyID, digest string) error {
	return f.PublishFunc(ctx, keyID, digest)
}
func (f fakeStore) Discard(ctx context.Context) error { return f.DiscardFunc(ctx) }

type fakeLedger struct {
	SaveFunc    func(context.Context, v1alpha1.RotationStatus) error
	FinishFunc  func(context.Context, v1alpha1.LastRotation) error
	AbandonFunc func(context.Context, string) error
}

func (f fakeLedger) Save(ctx context.Context, st v1alpha1.RotationStatus) error {
	return f.SaveFunc(ctx, st)
}
func (f fakeLedger) Finish(ctx context.Context, done v1alpha1.LastRotation) error {
	return f.FinishFunc(ctx, done)
}
func (f fakeLedger) Abandon(ctx context.Context, why string) error { return f.AbandonFunc(ctx, why) }

type fakePacer struct {
	ReadFunc     func(context.Context, string, string) (pacing.Record, error)
	StartedFunc  func(context.Context, pacing.Record, time.Time, string, bool) error
	ReleasedFunc func(context.Context, pacing.Record, time.Time, *pacing.Pending) error
	AdoptedFunc  func(context.Context, pacing.Record) error
}

func (f fakePacer) Read(ctx context.Context, tenantID, appID string) (pacing.Record, error) {
	return f.ReadFunc(ctx, tenantID, appID)
}
func (f fakePacer) Started(ctx context.Context, rec pacing.Record, at time.Time, uid string, spend bool) error {
	return f.StartedFunc(ctx, rec, at, uid, spend)
}
func (f fakePacer) Released(ctx context.Context, rec pacing.Record, quietUntil time.Time, p *pacing.Pending) error {
	return f.ReleasedFunc(ctx, rec, quietUntil, p)
}
func (f fakePacer) Adopted(ctx context.Context, rec pacing.Record) error {
	return f.AdoptedFunc(ctx, rec)
}

type eventFunc func(eventtype, reason, message string)

func (f eventFunc) Event(eventtype, reason, message string) { f(eventtype, reason, message) }

// world is Graph, Entra, a cluster, the Store and the watch's status, in memory, behind the
// fakes: tests change what they need and read what happened.
type world struct {
	t   *testing.T
	now time.Time

	// Graph: the application's secrets, and the text of each secret credwatch added.
	secrets []Secret
	texts   map[string]string
	adds    int
	// Entra: signIn answers a sign-in with a secret's text.
	signIn func(text string) error
	// The cluster: its state, and what each reset operation does to it.
	cluster ClusterState
	resets  []string // the text each reset was sent
	// startReset answers a reset's request; nil starts operation op-<n>, left running.
	startReset func(n int) (done bool, err error)
	// pollReset answers a poll of a running operation; nil ends it well, having applied it.
	pollReset func(token string) (done bool, err error)
	// The Store: the staging Secret (held), and the target (published).
	held          Held
	heldText      string
	published     Held
	publishedText string
	discards      int
	abandoned     bool
	storeErr      error // Write's answer, dry runs included
	dryRuns       int
	saved         []v1alpha1.RotationStatus
	finished      *v1alpha1.LastRotation
	events        []string
	confirmed     string
	// signIns is what the watch read of the secrets' sign-ins; nil: it reads none.
	signIns *SignIns
	// publish are the watch's sinks, written to vaults.
	publish []v1alpha1.PublishSink
	vaults  *fakeVaults
	github  *fakeGitHub
}

const testApp = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"

var testCluster = &v1alpha1.RotationCluster{SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg-prod", Name: "aks-prod"}

func newWorld(t *testing.T) *world {
	return &world{t: t, now: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), texts: map[string]string{},
		signIn:  func(string) error { return nil },
		cluster: ClusterState{ClientID: testApp, ProvisioningState: "Succeeded", PowerState: "Running"},
		secrets: []Secret{
			{KeyID: "k-old", DisplayName: "credwatch-2b9c0c1e-20251203T090000Z", End: time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)},
			{KeyID: "k-hand", DisplayName: "made by hand", End: time.Date(2026, 12, 21, 0, 0, 0, 0, time.UTC)},
		}}
}

func (w *world) listed(keyID string) bool {
	return slices.ContainsFunc(w.secrets, func(s Secret) bool { return s.KeyID == keyID })
}

// machine is a Machine on the world, for one reconcile at w.now.
func (w *world) machine(withCluster bool) *Machine {
	m := &Machine{
		App: fakeApp{
			SecretsFunc: func(context.Context) ([]Secret, error) { return slices.Clone(w.secrets), nil },
			AddFunc: func(_ context.Context, name string, end time.Time) (NewSecret, error) {
				w.adds++
				text := fmt.Sprintf("text-%d", w.adds)
				s := Secret{KeyID: fmt.Sprintf("k-%d", w.adds), DisplayName: name, Hint: text[:3], End: end}
				w.secrets = append(w.secrets, s)
				w.texts[s.KeyID] = text
				return NewSecret{KeyID: s.KeyID, Text: secret.New(w.texts[s.KeyID]), End: end}, nil
			},
			RemoveFunc: func(_ context.Context, keyID string) error {
				w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == keyID })
				return nil
			},
		},
		Store: fakeStore{
			HeldFunc: func(context.Context) (Held, error) { return w.held, nil },
			WriteFunc: func(_ context.Context, name string, s NewSecret, dryRun bool) error {
				if dryRun {
					w.dryRuns++
					return w.storeErr
				}
				if w.storeErr != nil {
					return w.storeErr
				}
				w.held, w.heldText = Held{KeyID: s.KeyID, DisplayName: name, End: s.End}, s.Text.Reveal()
				return nil
			},
			TextFunc: func(_ context.Context, keyID string) (secret.Text, error) {
				switch keyID {
				case w.held.KeyID:
					return secret.New(w.heldText), nil
				case w.published.KeyID:
					return secret.New(w.publishedText), nil
				}
				return secret.Text{}, fmt.Errorf("the Store no longer holds %s", keyID)
			},
			PublishFunc: func(_ context.Context, keyID, digest string) error {
				if w.held.KeyID != keyID && w.published.KeyID != keyID {
					return fmt.Errorf("the Store no longer holds %s", keyID)
				}
				kept := w.heldText
				if w.held.KeyID != keyID {
					kept = w.publishedText
				}
				if digest != "" && secret.New(kept).Digest() != digest {
					return fmt.Errorf("%w: another text under %s", ErrSecretChanged, keyID)
				}
				if w.held.KeyID == keyID {
					w.published, w.publishedText, w.held, w.heldText = w.held, w.heldText, Held{}, ""
				}
				return nil
			},
			DiscardFunc: func(context.Context) error { w.discards++; w.held, w.heldText = Held{}, ""; return nil },
		},
		SignIn: func(_ context.Context, text secret.Text) error { return w.signIn(text.Reveal()) },
		Ledger: fakeLedger{
			SaveFunc:    func(_ context.Context, st v1alpha1.RotationStatus) error { w.saved = append(w.saved, st); return nil },
			FinishFunc:  func(_ context.Context, done v1alpha1.LastRotation) error { w.finished = &done; return nil },
			AbandonFunc: func(context.Context, string) error { w.abandoned = true; return nil },
		},
		Events: eventFunc(func(eventtype, reason, message string) {
			if strings.Contains(message, "text-") {
				w.t.Errorf("event %s carries a secret's text: %s", reason, message)
			}
			w.events = append(w.events, eventtype+" "+reason+" "+message)
		}),
		Settings: Settings{Validity: 365 * 24 * time.Hour, GracePeriod: 7 * 24 * time.Hour, RemoveOld: v1alpha1.RemoveOldCreatedByCredwatch,
			Prefix: "credwatch-2b9c0c1e-", Target: "application payments", Watch: "payments", SecretNamespace: "team-a", SecretName: "payments-sp",
			StagingName:  "credwatch-rotation-payments",
			ConfirmReset: w.confirmed, SignIns: w.signIns, Publish: w.publish},
		Now: w.now,
	}
	if w.vaults != nil {
		m.Vaults = func(context.Context, *v1alpha1.KeyVaultSink) (KeyVaults, error) { return w.vaults, nil }
	}
	if w.github != nil {
		m.GitHub = w.github
		m.Token = func(_ context.Context, ref v1alpha1.SecretKeyRef) (secret.Text, error) {
			return secret.New("token-of-" + ref.Name), nil
		}
	}
	if withCluster {
		m.Cluster = fakeCluster{
			ReadFunc: func(context.Context) (ClusterState, error) { return w.cluster, nil },
			StartResetFunc: func(_ context.Context, clientID string, text secret.Text) (Operation, bool, error) {
				w.resets = append(w.resets, text.Reveal())
				n := len(w.resets)
				if w.startReset != nil {
					done, err := w.startReset(n)
					if err != nil || done {
						return Operation{}, done, err
					}
				}
				w.cluster.ProvisioningState = "Updating"
				return Operation{Token: fmt.Sprintf("token-%d", n), ID: fmt.Sprintf("op-%d", n)}, false, nil
			},
			PollResetFunc: func(_ context.Context, token string) (bool, error) {
				if w.pollReset != nil {
					return w.pollReset(token)
				}
				w.cluster.ProvisioningState = "Succeeded"
				return true, nil
			},
		}
	}
	return m
}

// run starts a rotation, or moves st on, and steps the clock to when it asks to be back;
// it returns the rotation in progress (as the deferred patch would write it) and the result.
func (w *world) run(st *v1alpha1.RotationStatus, withCluster bool) (*v1alpha1.RotationStatus, Result) {
	w.t.Helper()
	m := w.machine(withCluster)
	var res Result
	var err error
	if st == nil {
		pin := Pin{TenantID: "t", AppID: testApp, ApplicationObjectID: "a0e1"}
		if withCluster {
			pin.Cluster = testCluster
		}
		res, err = m.Start(context.Background(), pin, Asked{})
	} else {
		res, err = m.Advance(context.Background(), *st)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	if !res.Next.IsZero() && res.Next.After(w.now) {
		w.now = res.Next
	}
	return res.Status, res
}

func (w *world) eventReasons() []string {
	var out []string
	for _, e := range w.events {
		out = append(out, strings.Fields(e)[1])
	}
	return out
}
