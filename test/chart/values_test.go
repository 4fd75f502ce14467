package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// TestValuesSchemaRefusesWhatIsNoValue: a value of the wrong type, and a key the chart does not
// know, at the top or nested, are refused before anything is rendered, naming what is wrong.
func TestValuesSchemaRefusesWhatIsNoValue(t *testing.T) {
	for set, want := range map[string]string{
		"replicaCount=two":                   "at '/replicaCount': got string, want integer",
		"replicaCout=2":                      "additional properties 'replicaCout' not allowed",
		"metrics.serviceMonitor.enable=true": "additional properties 'enable' not allowed",
		"azure.cloud=AzureGerman":            "at '/azure/cloud'",
		"networkPolicy.egressCIDRs={any}":    "at '/networkPolicy/egressCIDRs/0'",
	} {
		if got := helmRefuses(t, "template", "credwatch", chartDir, "--kube-version", "1.34.4", "--set", set); !strings.Contains(got, want) {
			t.Errorf("--set %s: %s\nwant it to say %q", set, got, want)
		}
	}
}

// TestValuesSchemaCoversEveryValue: every key values.yaml sets is one the schema describes, with
// the type values.yaml gives it, so that the schema refuses nothing the chart documents.
func TestValuesSchemaCoversEveryValue(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any, s map[string]any)
	walk = func(path string, v any, s map[string]any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		props, described := s["properties"].(map[string]any)
		if !described {
			return // free-form, such as resources or affinity
		}
		for k, child := range m {
			cs, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s%s is in values.yaml and not in the schema", path, k)
				continue
			}
			if typ, ok := cs["type"].(string); ok && typ != jsonType(child) {
				t.Errorf("%s%s: values.yaml gives a %s, the schema wants a %s", path, k, jsonType(child), typ)
			}
			walk(path+k+".", child, cs)
		}
	}
	walk("", values, schema)
}

// jsonType is the JSON schema type of a value decoded from YAML.
func jsonType(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case nil:
		return "null"
	}
	return "unknown"
}

// TestNetworkPolicyLetsThroughOnlyWhatTheOperatorUses: opted in, the operator's pods take metrics
// scrapes from the peers listed and probes, and reach the API server, DNS, and 443 and the SMTP
// ports at the CIDRs listed.
func TestNetworkPolicyLetsThroughOnlyWhatTheOperatorUses(t *testing.T) {
	var np networkingv1.NetworkPolicy
	for _, obj := range render(t, valuesFile(t)) {
		if obj.GetKind() == "NetworkPolicy" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &np); err != nil {
				t.Fatal(err)
			}
		}
	}
	ports := func(ps []networkingv1.NetworkPolicyPort) (out []string) {
		for _, p := range ps {
			out = append(out, string(*p.Protocol)+"/"+p.Port.String())
		}
		return out
	}
	if len(np.Spec.Ingress) != 2 || !slices.Equal(ports(np.Spec.Ingress[0].Ports), []string{"TCP/8443"}) || len(np.Spec.Ingress[0].From) != 1 ||
		!slices.Equal(ports(np.Spec.Ingress[1].Ports), []string{"TCP/8081"}) {
		t.Errorf("ingress %+v; want metrics from the monitoring namespace, and the probes", np.Spec.Ingress)
	}
	if len(np.Spec.Egress) != 3 {
		t.Fatalf("egress %+v; want the API server, DNS, and Azure and the channels", np.Spec.Egress)
	}
	api, dns, out := np.Spec.Egress[0], np.Spec.Egress[1], np.Spec.Egress[2]
	if !slices.Equal(ports(api.Ports), []string{"TCP/443", "TCP/6443"}) || len(api.To) != 1 || api.To[0].IPBlock.CIDR != "10.0.0.1/32" {
		t.Errorf("to the API server: %+v", api)
	}
	if !slices.Equal(ports(dns.Ports), []string{"UDP/53", "TCP/53"}) || len(dns.To) != 0 {
		t.Errorf("to DNS: %+v", dns)
	}
	if !slices.Equal(ports(out.Ports), []string{"TCP/443", "TCP/25", "TCP/465", "TCP/587"}) || len(out.To) != 2 || out.To[1].IPBlock.CIDR != "40.126.0.0/18" {
		t.Errorf("to Azure and the channels: %+v", out)
	}
}
