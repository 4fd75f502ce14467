package main

import (
	"os"
	"strings"
	"testing"

	clientfeatures "k8s.io/client-go/features"

	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/pullauth"
)

// gates answers as client-go's would with the environment given.
type gates map[clientfeatures.Feature]bool

func (g gates) Enabled(f clientfeatures.Feature) bool { return g[f] }

func TestStreamedLists(t *testing.T) {
	tests := map[string]struct {
		env    map[string]string
		client gates
		want   bool
	}{
		"streamed unless told":               {client: gates{}, want: true},
		"KUBE_FEATURE_WatchListClient=false": {env: map[string]string{"KUBE_FEATURE_WatchListClient": "false"}, client: gates{}, want: false},
		"KUBE_FEATURE_WatchListClient=true":  {env: map[string]string{"KUBE_FEATURE_WatchListClient": "true"}, client: gates{clientfeatures.WatchListClient: true}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := streamedLists{tc.client, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }}
			if got := g.Enabled(clientfeatures.WatchListClient); got != tc.want {
				t.Errorf("WatchListClient enabled = %v, want %v", got, tc.want)
			}
			if g.Enabled(clientfeatures.ClientsAllowCBOR) {
				t.Error("another client-go feature was turned on: only the streamed list should be")
			}
		})
	}
}

func TestCloudOptions(t *testing.T) {
	tests := map[string]struct {
		o               options
		wantGraph       string
		wantAuth        string
		wantARMAudience string
		wantGraphScope  string
		wantErr         bool
	}{
		"public by default": {
			o:         options{cloudName: "AzurePublic"},
			wantGraph: "https://graph.microsoft.com", wantAuth: "https://login.microsoftonline.com/",
		},
		"sovereign cloud": {
			o:         options{cloudName: "AzureChina"},
			wantGraph: "https://microsoftgraph.chinacloudapi.cn", wantAuth: "https://login.chinacloudapi.cn/",
		},
		"endpoints overridden, as the demo and tests point at fakes": {
			o:         options{cloudName: "AzurePublic", graphEndpoint: "https://127.0.0.1:9443", authorityHost: "https://127.0.0.1:9443/", armEndpoint: "https://127.0.0.1:9444"},
			wantGraph: "https://127.0.0.1:9443", wantAuth: "https://127.0.0.1:9443/", wantARMAudience: "https://127.0.0.1:9444/",
		},
		"a Graph behind another name keeps Graph's audience": {
			o:         options{cloudName: "AzurePublic", graphEndpoint: "https://graph-proxy.corp.example", graphAudience: "https://graph.microsoft.com"},
			wantGraph: "https://graph-proxy.corp.example", wantAuth: "https://login.microsoftonline.com/", wantGraphScope: "https://graph.microsoft.com/.default",
		},
		"unknown cloud":       {o: options{cloudName: "AzureMoon"}, wantErr: true},
		"plain-HTTP override": {o: options{cloudName: "AzurePublic", graphEndpoint: "http://127.0.0.1:9443"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := tc.o.cloud()
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && tc.wantARMAudience != "" && c.ARMAudience != tc.wantARMAudience {
				t.Errorf("ARM audience = %q, want %q", c.ARMAudience, tc.wantARMAudience)
			}
			wantScope := tc.wantGraphScope
			if wantScope == "" {
				wantScope = tc.wantGraph + "/.default"
			}
			if err == nil && c.GraphScope() != wantScope {
				t.Errorf("Graph scope = %q, want %q", c.GraphScope(), wantScope)
			}
			if err == nil && (c.GraphEndpoint != tc.wantGraph || c.AuthorityHost != tc.wantAuth) {
				t.Errorf("cloud = %+v, want Graph %s and authority %s", c, tc.wantGraph, tc.wantAuth)
			}
		})
	}
}

// A Slack API root other than Slack's carries every watch's bot token: over https, or plain http
// only to loopback or an address the admin allowed for alert destinations.
func TestSlackAPIURL(t *testing.T) {
	var allowRelay egress.Policy
	if err := allowRelay.Allow.Set("10.77.0.1/32"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url     string
		policy  egress.Policy
		wantErr bool
	}{
		{"", egress.Policy{}, false},
		{"https://slack-gov.com/api/", egress.Policy{}, false},
		{"http://127.0.0.1:8080/", egress.Policy{}, false},
		{"http://10.77.0.1:8080/", allowRelay, false},
		{"http://10.77.0.2:8080/", allowRelay, true},
		{"http://slack.example/api/", allowRelay, true},
		{"ftp://slack.example/", egress.Policy{}, true},
		{"slack.example/api", egress.Policy{}, true},
	} {
		o := options{slackAPIURL: tc.url, destinations: tc.policy}
		if err := o.checkSlackAPIURL(); (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.url, err, tc.wantErr)
		}
	}
}

// The operator finds its namespace from the flag, then its pod's service account; with the
// issuer checks on and no namespace, it refuses to start rather than run without them.
func TestOperatorNamespace(t *testing.T) {
	inPod := func(string) ([]byte, error) { return []byte("credwatch-system\n"), nil }
	outside := func(string) ([]byte, error) { return nil, os.ErrNotExist }
	for _, tc := range []struct {
		name, flagged string
		read          func(string) ([]byte, error)
		want          string
	}{
		{"the flag, or POD_NAMESPACE", "ops", inPod, "ops"},
		{"the pod's service account", "", inPod, "credwatch-system"},
		{"outside a pod, told nothing", "", outside, ""},
	} {
		if got := operatorNamespace(tc.flagged, tc.read); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}

	o := options{cloudName: "AzurePublic", graphBudget: 3500, issuerChecks: true, pullThresholds: pullauth.DefaultThresholds}
	if _, _, err := o.validate(); err == nil || !strings.Contains(err.Error(), "--service-account-issuer=false") {
		t.Errorf("issuer checks on, no namespace: %v, want a refusal that says how to mend it", err)
	}
	o.issuerChecks = false
	if _, _, err := o.validate(); err != nil {
		t.Errorf("issuer checks off, no namespace: %v", err)
	}
	o.issuerChecks, o.namespace = true, "credwatch-system"
	if _, _, err := o.validate(); err != nil {
		t.Errorf("issuer checks on, with a namespace: %v", err)
	}
}
