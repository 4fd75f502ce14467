// Package promtool runs Prometheus's promtool, which `make test` builds into bin/ from the module
// pinned in hack/promtool, and turns scrapes of the operator into the input series of its unit
// tests, so that queries are evaluated by Prometheus's own engine against what the operator serves.
package promtool

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Run runs promtool with args and stdin, and returns what it wrote; it fails t if promtool fails.
func Run(t testing.TB, stdin io.Reader, args ...string) string {
	t.Helper()
	out, err := Try(t, stdin, args...)
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Try runs promtool with args and stdin, and returns what it wrote and how it ended.
func Try(t testing.TB, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs promtool, built by make test: skipped under -short")
	}
	bin := os.Getenv("PROMTOOL_BIN")
	if bin == "" {
		t.Fatal("PROMTOOL_BIN is not set: run `make test`, which builds promtool into bin/")
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Series are the input series of a promtool unit test: each series of the scrapes, in the order
// scraped, one interval apart; a series missing from a scrape is missing there ("_"), as it is
// from Prometheus's storage. A scrape is the text format the operator serves.
func Series(scrapes ...[]byte) ([]InputSeries, error) {
	values := map[string][]string{}
	for i, scrape := range scrapes {
		p := expfmt.NewTextParser(model.UTF8Validation)
		families, err := p.TextToMetricFamilies(bytes.NewReader(scrape))
		if err != nil {
			return nil, fmt.Errorf("scrape %d: %w", i+1, err)
		}
		for _, mf := range families {
			for _, smp := range samples(mf) {
				key := smp.name + smp.labels.String()
				if len(smp.labels) == 0 {
					key = smp.name
				}
				if values[key] == nil {
					values[key] = slices.Repeat([]string{"_"}, len(scrapes))
				}
				values[key][i] = strconv.FormatFloat(smp.value, 'g', -1, 64)
			}
		}
	}
	out := make([]InputSeries, 0, len(values))
	for _, key := range slices.Sorted(maps.Keys(values)) {
		out = append(out, InputSeries{Series: key, Values: strings.Join(values[key], " ")})
	}
	return out, nil
}

// InputSeries is one series of a promtool unit test, as its YAML has it.
type InputSeries struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type sample struct {
	name   string
	labels model.LabelSet
	value  float64
}

// samples are the series a family stores as, as Prometheus stores them: a histogram or summary as
// its buckets or quantiles, sum and count.
func samples(mf *dto.MetricFamily) []sample {
	var out []sample
	name := mf.GetName()
	for _, m := range mf.GetMetric() {
		ls := model.LabelSet{}
		for _, l := range m.GetLabel() {
			ls[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
		}
		with := func(k, v string) model.LabelSet {
			c := ls.Clone()
			c[model.LabelName(k)] = model.LabelValue(v)
			return c
		}
		switch {
		case m.GetHistogram() != nil:
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				out = append(out, sample{name + "_bucket", with("le", fmt.Sprint(b.GetUpperBound())), float64(b.GetCumulativeCount())})
			}
			out = append(out, sample{name + "_bucket", with("le", "+Inf"), float64(h.GetSampleCount())},
				sample{name + "_sum", ls, h.GetSampleSum()}, sample{name + "_count", ls, float64(h.GetSampleCount())})
		case m.GetSummary() != nil:
			sm := m.GetSummary()
			for _, q := range sm.GetQuantile() {
				out = append(out, sample{name, with("quantile", fmt.Sprint(q.GetQuantile())), q.GetValue()})
			}
			out = append(out, sample{name + "_sum", ls, sm.GetSampleSum()}, sample{name + "_count", ls, float64(sm.GetSampleCount())})
		case m.GetCounter() != nil:
			out = append(out, sample{name, ls, m.GetCounter().GetValue()})
		case m.GetGauge() != nil:
			out = append(out, sample{name, ls, m.GetGauge().GetValue()})
		default:
			out = append(out, sample{name, ls, m.GetUntyped().GetValue()})
		}
	}
	return out
}
