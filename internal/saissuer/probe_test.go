package saissuer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
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
	// Not finding the API servers is not reaching them.
	var ee *EndpointError
	if _, err := (&Prober{Reader: empty}).Probe(context.Background(), nil); !errors.As(err, &ee) {
		t.Errorf("probing without endpoints to find: %v, want an EndpointError", err)
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
		{"a long Status message", `{"kind":"Status","message":"` + long + `"}`, long[:maxExplained] + "…"},
		{"characters of several bytes", strings.Repeat("é", 300), strings.Repeat("é", maxExplained) + "…"},
	} {
		if got := explain([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: explain = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Something between the operator and an API server that echoes the review it was sent does not
// get the canary token into conditions and events.
func TestReviewNeverSaysTheToken(t *testing.T) {
	const token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJl"
	for name, status := range map[string]int{"an error echoing the request": http.StatusBadGateway, "a review echoing it": http.StatusOK} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				w.WriteHeader(status)
				if status != http.StatusOK {
					// Long enough that the token straddles where an error is cut.
					_, _ = w.Write(append([]byte(strings.Repeat("x", maxExplained-100)), body...))
					return
				}
				_ = json.NewEncoder(w).Encode(authenticationv1.TokenReview{Status: authenticationv1.TokenReviewStatus{Error: "cannot verify " + string(body)}})
			}))
			defer srv.Close()
			why, err := review(context.Background(), srv.Client(), srv.URL, token)
			said := why
			if err != nil {
				said = err.Error()
			}
			if said == "" || strings.Contains(said, token) || !strings.Contains(said, redactedToken) {
				t.Errorf("review said %q", said)
			}
		})
	}
}

// A watch may name only API servers of this cluster: anything else is refused before the
// operator connects to it with its credentials.
func TestNamedEndpointsMustBeAPIServers(t *testing.T) {
	var conns atomic.Int32
	inside := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { conns.Add(1) }))
	t.Cleanup(inside.Close)
	p := &Prober{Config: &rest.Config{Host: "https://10.0.0.1:6443"}, Allowed: []string{"https://api-b.example:443"}}
	for _, tc := range []struct {
		endpoints []string
		refused   string
	}{
		{[]string{inside.URL}, inside.URL},
		{[]string{"https://10.0.0.1:6443", "https://169.254.169.254"}, "https://169.254.169.254"},
		{[]string{"https://10.0.0.1:6443", "https://API-B.example"}, ""},
		{[]string{"https://10.0.0.1:6443/api/v1/secrets?"}, "https://10.0.0.1:6443/api/v1/secrets?"},
		{[]string{"https://user@10.0.0.1:6443"}, "https://user@10.0.0.1:6443"},
		{[]string{"http://10.0.0.1:6443"}, "http://10.0.0.1:6443"},
	} {
		err := p.checkNamed(context.Background(), tc.endpoints)
		var ne *NotAPIServerError
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%v refused: %v", tc.endpoints, err)
		case tc.refused != "" && (!errors.As(err, &ne) || ne.Endpoint != tc.refused):
			t.Errorf("%v: %v, want %s refused", tc.endpoints, err, tc.refused)
		}
	}
	if _, err := p.Probe(context.Background(), []string{inside.URL}); err == nil || conns.Load() != 0 {
		t.Errorf("Probe of an endpoint inside: %v, %d connections; want refused before connecting", err, conns.Load())
	}
}
