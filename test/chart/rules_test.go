package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/credwatch/credwatch/test/promtool"
)

// rulesFile writes the rule groups of the PrometheusRule the chart renders to a rule file in dir,
// as the Prometheus Operator hands them to Prometheus.
func rulesFile(t *testing.T, dir string) string {
	t.Helper()
	for _, obj := range render(t, valuesFile(t)) {
		if obj.GetKind() != "PrometheusRule" {
			continue
		}
		spec, err := yaml.Marshal(obj.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "prometheusrule.rules.yaml")
		if err := os.WriteFile(p, spec, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Fatal("the chart renders no PrometheusRule")
	return ""
}

// TestRulesAreValid has promtool check the rendered rules: every expression parses, every
// template and duration is valid, no rule is repeated. docs/metrics.md's table lists each alert.
func TestRulesAreValid(t *testing.T) {
	rules := rulesFile(t, t.TempDir())
	names := alertNames(t, rules)
	out := promtool.Run(t, nil, "check", "rules", "--lint=all", "--lint-fatal", rules)
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(names)); !strings.Contains(out, want) {
		t.Errorf("promtool check rules does not say %q:\n%s", want, out)
	}
	readme, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.Contains(string(readme), "| `"+name+"` (") {
			t.Errorf("docs/metrics.md's table of alerts does not list %s", name)
		}
	}
}

// TestAlertsFireWhenTheyShould runs the chart's promtool unit tests (charts/credwatch/tests)
// against the rendered rules: each alert fires at the time, with the labels and the annotations,
// they say, and not before or after.
func TestAlertsFireWhenTheyShould(t *testing.T) {
	dir := t.TempDir()
	rules := rulesFile(t, dir)
	tests, err := filepath.Glob(filepath.Join(chartDir, "tests", "*.test.yaml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no promtool tests beside the chart: %v", err)
	}
	args := []string{"test", "rules"}
	fired := map[string]bool{}
	for _, src := range tests {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Tests []struct {
				AlertRuleTest []struct {
					AlertName string           `json:"alertname"`
					ExpAlerts []map[string]any `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(data, &file); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		for _, tc := range file.Tests {
			for _, a := range tc.AlertRuleTest {
				fired[a.AlertName] = fired[a.AlertName] || len(a.ExpAlerts) > 0
			}
		}
		dst := filepath.Join(dir, filepath.Base(src))
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, dst)
	}
	for _, name := range alertNames(t, rules) {
		if !fired[name] {
			t.Errorf("no promtool test sees %s fire", name)
		}
	}
	promtool.Run(t, nil, args...)
}

// alertNames are the alerts of a rule file.
func alertNames(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Alert)
		}
	}
	return out
}
