package main

import "testing"

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
