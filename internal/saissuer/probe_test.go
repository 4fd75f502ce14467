package saissuer

import (
	"context"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestServiceEndpoints(t *testing.T) {
	s := runtime.NewScheme()
	if err := discoveryv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	slice := func(name string, family discoveryv1.AddressType, port int32, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
			AddressType: family,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port)}},
			Endpoints:   endpoints,
		}
	}
	ready := func(addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	}
	other := slice("other", discoveryv1.AddressTypeIPv4, 443, ready("10.9.9.9"))
	other.Labels[discoveryv1.LabelServiceName] = "not-kubernetes"
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		slice("kubernetes", discoveryv1.AddressTypeIPv4, 6443, ready("10.0.0.5", "10.0.0.4"),
			discoveryv1.Endpoint{Addresses: []string{"10.0.0.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}),
		slice("kubernetes-v6", discoveryv1.AddressTypeIPv6, 6443, ready("fd00::4")),
		other,
	).Build()
	got, err := (&Prober{Reader: c}).serviceEndpoints(context.Background())
	want := []string{"https://10.0.0.4:6443", "https://10.0.0.5:6443", "https://[fd00::4]:6443"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("serviceEndpoints = %v, %v; want %v", got, err, want)
	}

	empty := fake.NewClientBuilder().WithScheme(s).Build()
	if _, err := (&Prober{Reader: empty}).serviceEndpoints(context.Background()); err == nil {
		t.Error("no EndpointSlice gave no error")
	}
}

func TestExplain(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct{ name, body, want string }{
		{"an API server's Status", `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"serviceaccounts \"credwatch-canary\" not found","code":404}`,
			`serviceaccounts "credwatch-canary" not found`},
		{"a proxy's page", "<html>\n  <body>Bad   Gateway</body>\n</html>", "<html> <body>Bad Gateway</body> </html>"},
		{"JSON that is not a Status", `{"error":"nope"}`, `{"error":"nope"}`},
		{"a long body", long, long[:maxExplained] + "…"},
	} {
		if got := explain([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: explain = %q, want %q", tc.name, got, tc.want)
		}
	}
}
