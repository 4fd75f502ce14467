package rotation

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/keyvault"
	"github.com/credwatch/credwatch/internal/secret"
	"github.com/credwatch/credwatch/internal/target"
)

// fakeVaults are Key Vaults in memory: each secret's versions, with the keyId each holds.
type fakeVaults struct {
	versions map[string][]vaultVersion // by vault URL and name
	sets     int
	err      error // every call fails with it
	now      func() time.Time
}

type vaultVersion struct {
	keyvault.Version
	text    string
	expires time.Time
}

func (f *fakeVaults) List(_ context.Context, vaultURL, name string) ([]keyvault.Version, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []keyvault.Version
	for _, v := range f.versions[vaultURL+name] {
		out = append(out, v.Version)
	}
	return out, nil
}

func (f *fakeVaults) Set(_ context.Context, vaultURL, name string, value secret.Text, appID, keyID string, expires time.Time) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	f.sets++
	v := vaultVersion{Version: keyvault.Version{Version: fmt.Sprintf("v%d", f.sets), AppID: appID, KeyID: keyID, Enabled: true, Created: f.now()},
		text: value.Reveal(), expires: expires}
	f.versions[vaultURL+name] = append(f.versions[vaultURL+name], v)
	return v.Version.Version, nil
}

func (f *fakeVaults) Disable(_ context.Context, vaultURL, name, version string) error {
	if f.err != nil {
		return f.err
	}
	for i, v := range f.versions[vaultURL+name] {
		if v.Version.Version == version {
			f.versions[vaultURL+name][i].Enabled = false
		}
	}
	return nil
}

var testVault = v1alpha1.KeyVaultSink{VaultURL: "https://payments-kv.vault.azure.net/", SecretName: "payments-sp"}

func publishingWorld(t *testing.T) *world {
	w := newWorld(t)
	w.publish = []v1alpha1.PublishSink{{KeyVault: &testVault}}
	w.vaults = &fakeVaults{versions: map[string][]vaultVersion{}, now: func() time.Time { return w.now }}
	return w
}

// The new secret is written to the Key Vault before the grace period for the old ones starts,
// once, recorded in status; a rotation resumed from a status written before that record finds
// the version it wrote, and writes no second one.
func TestARotationPublishesToKeyVaultOnceBeforeRetiring(t *testing.T) {
	w := publishingWorld(t)
	st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
	versions := w.vaults.versions[testVault.VaultURL+testVault.SecretName]
	if len(versions) != 1 || versions[0].text != "text-1" || versions[0].KeyID != "k-1" || versions[0].AppID != testApp || !versions[0].expires.Equal(st.Expiry.Time) {
		t.Fatalf("the vault holds %+v, want the new secret k-1 expiring with it", versions)
	}
	if len(st.Published) != 1 || st.Published[0].Sink != testVault.Name() || st.Published[0].Version != "v1" || st.RetireTime == nil {
		t.Fatalf("status %+v: want the sink recorded and the grace period started", st)
	}
	if !slices.Contains(w.eventReasons(), EventPublished) {
		t.Errorf("events %v", w.eventReasons())
	}

	// An operator stopped between the write and its record.
	resumed := st.DeepCopy()
	resumed.Published, resumed.RetireTime = nil, nil
	st, _ = w.run(resumed, false)
	if w.vaults.sets != 1 || len(st.Published) != 1 || st.Published[0].Version != "v1" || st.RetireTime == nil {
		t.Errorf("resumed: %d sets, status %+v; want the version found, not written again", w.vaults.sets, st)
	}
}

// A vault that refuses the identity holds the retirement, says which sink and what it needs, and
// the rotation goes on once the vault lets it.
func TestAVaultThatRefusesHoldsTheRetirement(t *testing.T) {
	w := publishingWorld(t)
	w.vaults.err = fmt.Errorf("secret payments-sp of Key Vault %s: %w", testVault.VaultURL,
		&azerr.Error{Kind: azerr.KindForbidden, Status: http.StatusForbidden, Code: "Forbidden", Needs: "Microsoft.KeyVault/vaults/secrets/setSecret/action"})
	st, res := w.until(nil, false, v1alpha1.StepRetiring, 10)
	if st.RetireTime != nil || len(st.Published) != 0 || res.Condition.Reason != v1alpha1.ReasonRotationBlocked ||
		!strings.Contains(res.Condition.Message, "publishing to "+testVault.Name()) || !strings.Contains(res.Condition.Message, "setSecret/action") {
		t.Fatalf("status %+v, condition %+v: want the retirement held, blocked, naming the sink and what it needs", st, res.Condition)
	}
	if !slices.Contains(w.eventReasons(), EventPublishFailed) {
		t.Errorf("events %v", w.eventReasons())
	}
	if !w.listed("k-old") {
		t.Error("an old secret was retired although the vault does not hold the new one")
	}
	w.vaults.err = nil
	w.now = st.NextAttemptTime.Time
	st, _ = w.run(st, false)
	if st.RetireTime == nil || len(st.Published) != 1 {
		t.Errorf("after the vault let the identity in: %+v", st)
	}
}

// At retirement, the old secret's version in the vault is disabled with it; a sink whose version
// was disabled meanwhile is written again, and the old secrets wait a grace period more.
func TestRetirementDisablesTheOldVersionAndRechecksTheSinks(t *testing.T) {
	w := publishingWorld(t)
	key := testVault.VaultURL + testVault.SecretName
	w.vaults.versions[key] = []vaultVersion{{Version: keyvault.Version{Version: "v0", AppID: testApp, KeyID: "k-old", Enabled: true, Created: w.now.Add(-time.Hour)}}}
	st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
	first := st.RetireTime.Time
	// Someone disables the new secret's version during the grace period.
	w.vaults.versions[key][1].Enabled = false
	st, _ = w.run(st, false)
	if st == nil || w.vaults.sets != 2 || !st.RetireTime.After(first) || !w.listed("k-old") {
		t.Fatalf("status %+v after %d sets: want the sink written again and a grace period more, k-old kept", st, w.vaults.sets)
	}
	st, _ = w.run(st, false)
	if st != nil || w.listed("k-old") {
		t.Fatalf("status %+v: want the rotation completed and k-old retired", st)
	}
	for _, v := range w.vaults.versions[key] {
		if v.KeyID == "k-old" && v.Enabled {
			t.Errorf("the retired secret's version %s is still enabled", v.Version.Version)
		}
	}
}

// A secret whose versions credwatch did not write for this application is not written to, and a
// version tagged with the keyId before the rotation began is not taken for the rotation's.
func TestASinkThatIsNotTheRotationsIsLeftAlone(t *testing.T) {
	w := publishingWorld(t)
	key := testVault.VaultURL + testVault.SecretName
	w.vaults.versions[key] = []vaultVersion{{Version: keyvault.Version{Version: "db", Enabled: true}}}
	st, res := w.until(nil, false, v1alpha1.StepRetiring, 10)
	if w.vaults.sets != 0 || st.RetireTime != nil || res.Condition.Reason != v1alpha1.ReasonRotationBlocked || !strings.Contains(res.Condition.Message, "did not write for application") {
		t.Fatalf("a foreign secret: %d sets, status %+v, condition %+v", w.vaults.sets, st, res.Condition)
	}

	w = publishingWorld(t)
	w.vaults.versions[key] = []vaultVersion{{Version: keyvault.Version{Version: "planted", AppID: testApp, KeyID: "k-1", Enabled: true, Created: w.now.Add(-time.Minute)}}}
	st, _ = w.until(nil, false, v1alpha1.StepRetiring, 10)
	if w.vaults.sets != 1 || st.Published[0].Version == "planted" {
		t.Errorf("a version planted before the rotation: %d sets, published %+v; want the secret written", w.vaults.sets, st.Published)
	}
}

// Publishing changes the rotation's own copy of status, never the status it was read from: the
// status write compares the two.
func TestPublishingLeavesTheStatusItWasGivenAlone(t *testing.T) {
	w := publishingWorld(t)
	st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
	given := st.DeepCopy()
	given.Published = append(given.Published, v1alpha1.PublishedSink{Sink: "keyVault https://gone.vault.azure.net/ old", Version: "v9"})
	before := given.DeepCopy()
	w.run(given, false)
	if !equality.Semantic.DeepEqual(given.Published, before.Published) {
		t.Errorf("the status given changed: %+v, was %+v", given.Published, before.Published)
	}
}

// A Key Vault sink may name an identity of its own: the vault is reached as that identity, which
// must allow PublishKeyVault for the application and list the vault, whatever the rotation's
// identity allows (here, Rotate alone). One that is missing, or does not allow it, pauses the
// rotation before anything is made, naming the sink.
func TestAKeyVaultSinkWritesAsItsOwnIdentity(t *testing.T) {
	allowed := v1alpha1.IdentityAllow{Tenants: []string{"t"}, Applications: []string{testApp},
		Operations: []v1alpha1.Operation{v1alpha1.OperationPublishKeyVault}, KeyVaults: []string{testVault.VaultURL}}
	otherVault := allowed
	otherVault.KeyVaults = []string{"https://other-kv.vault.azure.net/"}
	for _, tc := range []struct {
		name   string
		writer *v1alpha1.IdentityAllow
		want   string
	}{
		{"missing", nil, "does not exist"},
		{"another vault", &otherVault, "allow.keyVaults does not list " + testVault.VaultURL},
		{"allowed", &allowed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := newRunWorld(t, v1alpha1.RotationDryRun)
			rw.kvWriter = tc.writer
			rw.vaults = &fakeVaults{versions: map[string][]vaultVersion{}, now: func() time.Time { return rw.now }}
			sink := testVault
			sink.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "kv-writer"}
			rw.obj.Spec.Rotation.Publish = []v1alpha1.PublishSink{{KeyVault: &sink}}
			if _, err := rw.reconcile(); err != nil {
				t.Fatal(err)
			}
			c := target.Condition(rw.obj, v1alpha1.ConditionRotating)
			if tc.want != "" {
				if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "the identityRef of "+sink.Name()) || !strings.Contains(c.Message, tc.want) || len(rw.vaultsAs) != 0 {
					t.Fatalf("Rotating %s %q, vaults reached as %v; want paused, naming the sink and %q, before any vault", c.Status, c.Message, rw.vaultsAs, tc.want)
				}
				return
			}
			if c.Reason != v1alpha1.ReasonDryRun || !slices.Equal(rw.vaultsAs, []string{"kv-writer"}) ||
				len(rw.events) != 1 || !strings.Contains(rw.events[0], sink.Name()+" can be read (0 versions)") {
				t.Fatalf("Rotating %s, vaults reached as %v, events %q; want the plan, the vault read as kv-writer", c.Reason, rw.vaultsAs, rw.events)
			}
		})
	}
}

// Consumers read a secret's latest version: one of the rotation's behind a newer version is not
// held. A newer version someone else wrote (a pipeline restoring the old secret, say) holds the
// retirement as foreign; a newer one credwatch wrote for an older keyId has the new secret written
// again, and the old secrets wait a grace period more.
func TestOnlyTheLatestVersionHoldsTheNewSecret(t *testing.T) {
	for _, tc := range []struct {
		name     string
		newer    keyvault.Version
		sets     int
		foreign  bool
		retiring bool
	}{
		{"someone else's", keyvault.Version{Version: "restored", Enabled: true}, 1, true, false},
		{"an older keyId's", keyvault.Version{Version: "restored", AppID: testApp, KeyID: "k-old", Enabled: true}, 2, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := publishingWorld(t)
			key := testVault.VaultURL + testVault.SecretName
			st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
			first := st.RetireTime.Time
			newer := tc.newer
			newer.Created = w.now.Add(time.Minute)
			w.vaults.versions[key] = append(w.vaults.versions[key], vaultVersion{Version: newer})
			w.now = first
			st, res := w.run(st, false)
			if st == nil || w.vaults.sets != tc.sets || !w.listed("k-old") {
				t.Fatalf("status %+v after %d sets: want %d sets, k-old kept", st, w.vaults.sets, tc.sets)
			}
			if blocked := strings.Contains(res.Condition.Message, "did not write for application"); blocked != tc.foreign {
				t.Errorf("condition %q: blocked as foreign %v, want %v", res.Condition.Message, blocked, tc.foreign)
			}
			if tc.retiring && !st.RetireTime.After(first) {
				t.Errorf("retire time %v: want a grace period more after the new secret was written again", st.RetireTime)
			}
		})
	}
}
