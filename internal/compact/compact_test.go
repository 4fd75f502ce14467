package compact

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// decoder decodes as the informer does: the scheme's JSON serializer, into a new object.
func decoder(t testing.TB) func([]byte) *v1alpha1.CredentialWatch {
	s := k8sruntime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(s).UniversalDeserializer()
	return func(raw []byte) *v1alpha1.CredentialWatch {
		o, _, err := dec.Decode(raw, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*v1alpha1.CredentialWatch)
	}
}

// watches are n copies of testdata/watch.json, a watch as a sweep leaves it, each with its own
// name, UID and application.
func watches(t testing.TB, n int) [][]byte {
	raw, err := os.ReadFile("testdata/watch.json")
	if err != nil {
		t.Fatal(err)
	}
	docs := make([][]byte, n)
	for i := range docs {
		d := strings.ReplaceAll(string(raw), "sp-00000", fmt.Sprintf("sp-%05d", i))
		d = strings.ReplaceAll(d, "904c-fb243e91c49b", fmt.Sprintf("904c-%012d", i))
		d = strings.ReplaceAll(d, "8000-00000000000", fmt.Sprintf("8000-%011d", i))
		d = strings.ReplaceAll(d, "app-00000", fmt.Sprintf("app-%05d", i))
		docs[i] = []byte(d)
	}
	return docs
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// noCollection holds the collector off for the test: a shared copy lasts until the next collection.
func noCollection(t *testing.T) {
	percent := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent) })
}

func TestWatchSharesRepeatedText(t *testing.T) {
	noCollection(t)
	decode := decoder(t)
	docs := watches(t, 2)
	a, b := decode(docs[0]), decode(docs[1])
	before := a.DeepCopy()
	for _, w := range []*v1alpha1.CredentialWatch{a, b} {
		if _, err := Transform(w); err != nil {
			t.Fatal(err)
		}
	}
	if a.ManagedFields != nil {
		t.Error("managedFields kept")
	}
	before.ManagedFields = nil
	if diff := cmp.Diff(before, a); diff != "" {
		t.Errorf("Transform changed the watch (-before +after):\n%s", diff)
	}

	shared := map[string][2]string{
		"kind":                   {a.Kind, b.Kind},
		"apiVersion":             {a.APIVersion, b.APIVersion},
		"namespace":              {a.Namespace, b.Namespace},
		"finalizer":              {a.Finalizers[0], b.Finalizers[0]},
		"tenantID":               {a.Spec.Target.ServicePrincipal.TenantID, b.Spec.Target.ServicePrincipal.TenantID},
		"identityRef.name":       {a.Spec.IdentityRef.Name, b.Spec.IdentityRef.Name},
		"checkInterval":          {string(a.Spec.CheckInterval), string(b.Spec.CheckInterval)},
		"thresholds.warning":     {string(a.Spec.Thresholds.Warning), string(b.Spec.Thresholds.Warning)},
		"condition type":         {a.Status.Conditions[1].Type, b.Status.Conditions[1].Type},
		"condition reason":       {a.Status.Conditions[1].Reason, b.Status.Conditions[1].Reason},
		"condition message":      {a.Status.Conditions[1].Message, b.Status.Conditions[1].Message},
		"condition status":       {string(a.Status.Conditions[1].Status), string(b.Status.Conditions[1].Status)},
		"credential type":        {string(a.Status.Credentials[0].Type), string(b.Status.Credentials[0].Type)},
		"credential source":      {string(a.Status.Credentials[0].Source), string(b.Status.Credentials[0].Source)},
		"state":                  {string(a.Status.State), string(b.Status.State)},
		"expiresIn":              {a.Status.ExpiresIn, b.Status.ExpiresIn},
		"credential state":       {string(a.Status.Credentials[0].State), string(b.Status.Credentials[0].State)},
		"condition status again": {string(a.Status.Conditions[0].Status), string(b.Status.Conditions[0].Status)},
	}
	for field, s := range shared {
		if s[0] != s[1] {
			t.Fatalf("%s: the fixture's watches differ: %q, %q", field, s[0], s[1])
		}
		if !same(s[0], s[1]) {
			t.Errorf("%s %q is held twice", field, s[0])
		}
	}
}

// Text nearly always unique to a watch stays out of the shared table, where it would cost an
// entry and save nothing: two decodings of one watch share its namespace, not its name or UID.
func TestWatchLeavesUniqueText(t *testing.T) {
	noCollection(t)
	decode := decoder(t)
	doc := watches(t, 1)[0]
	a, b := decode(doc), decode(doc)
	Watch(a)
	Watch(b)
	if !same(a.Namespace, b.Namespace) {
		t.Fatal("namespace not shared")
	}
	for field, s := range map[string][2]string{
		"name":  {a.Name, b.Name},
		"uid":   {string(a.UID), string(b.UID)},
		"keyID": {a.Status.Credentials[0].KeyID, b.Status.Credentials[0].KeyID},
		"servicePrincipal.applicationObjectID": {a.Status.ServicePrincipal.ApplicationObjectID,
			b.Status.ServicePrincipal.ApplicationObjectID},
		// It names the application.
		"Ready message": {a.Status.Conditions[0].Message, b.Status.Conditions[0].Message},
	} {
		if same(s[0], s[1]) {
			t.Errorf("%s %q was shared", field, s[0])
		}
	}
}

// Only a message naming the application as messages do, quoted, is left alone: a name that is
// also a word of the shared messages leaves them shared.
func TestWatchSharesMessagesAShortNameIsIn(t *testing.T) {
	noCollection(t)
	decode := decoder(t)
	docs := watches(t, 2)
	a, b := decode(docs[0]), decode(docs[1])
	for _, w := range []*v1alpha1.CredentialWatch{a, b} {
		w.Status.ServicePrincipal.DisplayName = "credential" // as in "No credential has expired"
		Watch(w)
	}
	if !same(a.Status.Conditions[2].Message, b.Status.Conditions[2].Message) {
		t.Errorf("%q is held twice", a.Status.Conditions[2].Message)
	}
}

// A watch's fields that repeat another of its own hold one copy.
func TestWatchSharesWithinAWatch(t *testing.T) {
	decode := decoder(t)
	w := decode(watches(t, 1)[0])
	want := w.DeepCopy()
	Watch(w)
	s := &w.Status
	if !same(s.ServicePrincipal.AppID, w.Spec.Target.ServicePrincipal.ClientID) {
		t.Error("the appId found is held apart from the target's")
	}
	if s.EarliestExpiry != &s.Credentials[0].EndTime {
		t.Error("the earliest expiry is held apart from the credential's end")
	}
	if s.LastCheckTime != &s.Conditions[0].LastTransitionTime {
		t.Error("the last check is held apart from the conditions' transition")
	}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("Watch changed the watch (-before +after):\n%s", diff)
	}

	// Times that differ stay apart.
	w = decode(watches(t, 1)[0])
	w.Status.EarliestExpiry = &metav1.Time{Time: w.Status.Credentials[0].EndTime.Add(time.Second)}
	Watch(w)
	if w.Status.EarliestExpiry == &w.Status.Credentials[0].EndTime {
		t.Error("an earliest expiry that is no credential's end was replaced")
	}
}

func TestFit(t *testing.T) {
	for _, tc := range []struct{ len, cap int }{{0, 0}, {0, 4}, {3, 3}, {3, 4}, {5, 8}} {
		s := append(make([]int, 0, tc.cap), make([]int, tc.len)...)
		for i := range s {
			s[i] = i + 1
		}
		got := fit(s)
		if len(got) != tc.len || cap(got) != tc.len {
			t.Errorf("fit(len %d, cap %d) = len %d, cap %d", tc.len, tc.cap, len(got), cap(got))
		}
		if !cmp.Equal(append([]int{}, s...), append([]int{}, got...)) {
			t.Errorf("fit(%v) = %v", s, got)
		}
	}
}

func TestTransformOtherObjects(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	out, err := Transform(cm)
	if err != nil || out != cm || cm.ManagedFields != nil {
		t.Errorf("Transform(ConfigMap) = %v, %v; managedFields %v", out, err, cm.ManagedFields)
	}
	if out, err := Transform("not an object"); err != nil || out != "not an object" {
		t.Errorf("Transform(string) = %v, %v", out, err)
	}
}

// BenchmarkCachedWatch measures what the informer holds per watch, with and without Transform.
func BenchmarkCachedWatch(b *testing.B) {
	decode := decoder(b)
	const n = 10000
	docs := watches(b, n)
	for _, mode := range []string{"managedFieldsStripped", "compact"} {
		b.Run(mode, func(b *testing.B) {
			var perWatch float64
			for range b.N {
				held := make([]*v1alpha1.CredentialWatch, n)
				before := heapInUse()
				for i, d := range docs {
					w := decode(d)
					w.ManagedFields = nil
					if mode == "compact" {
						Watch(w)
					}
					held[i] = w
				}
				perWatch = float64(heapInUse()-before) / n
				runtime.KeepAlive(held)
			}
			b.ReportMetric(perWatch, "B/watch")
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
