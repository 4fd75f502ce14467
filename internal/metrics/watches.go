package metrics

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// Watches writes the per-watch series straight from the informer cache as Prometheus text, at
// each scrape. It does not go through a prometheus.Registry on purpose: a registry builds every
// series of a scrape as protobuf objects before encoding any, which at 10,000 watches is about
// 50,000 series and 37 MiB at once, enough on its own to break the operator's memory budget.
// kube-state-metrics writes its object series as text for the same reason.
type Watches struct {
	list   List
	scans  Scans
	fleets Fleets
	clock  clock.PassiveClock
}

// List returns the watches to report. A scrape only reads them, so they may be the cache's own
// objects: copying 10,000 watches at each scrape would cost more memory than the rest of it.
type List func() ([]*v1alpha1.CredentialWatch, error)

// Scans gives the credentials a tenant scan last found, which are more than its status lists.
type Scans interface {
	Get(watch types.NamespacedName) (tenantscan.Found, bool)
}

// Fleets gives the clusters a fleet's check last found that its identity still lets it show,
// which are more than its status lists.
type Fleets interface {
	Shown(watch types.NamespacedName) (aksfleet.Found, bool)
}

// NewWatches returns a Watches reporting the watches list returns, the credentials of tenant
// scans from scans, and the clusters of fleets from fleets. A process that has not scanned a
// tenant itself (a replica that is not the leader) reports the credentials the scan's status
// lists, and the clusters a fleet's status lists.
func NewWatches(list List, scans Scans, fleets Fleets, clk clock.PassiveClock) *Watches {
	return &Watches{list: list, scans: scans, fleets: fleets, clock: clk}
}

// CachedWatches lists the CredentialWatches in the informer of c, the cached objects themselves.
// It keeps a pointer to each, updated by the informer's events, because the cache can only list
// by copying, and a multi-namespace cache's informer has no store of its own to read.
func CachedWatches(ctx context.Context, c cache.Cache) (List, error) {
	informer, err := c.GetInformer(ctx, &v1alpha1.CredentialWatch{})
	if err != nil {
		return nil, err
	}
	idx := &index{watches: map[types.NamespacedName]*v1alpha1.CredentialWatch{}}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    idx.put,
		UpdateFunc: func(_, obj any) { idx.put(obj) },
		DeleteFunc: idx.delete,
	})
	if err != nil {
		return nil, err
	}
	return func() ([]*v1alpha1.CredentialWatch, error) {
		if !reg.HasSynced() {
			return nil, errors.New("the CredentialWatch cache has not synced yet")
		}
		return idx.list(), nil
	}, nil
}

type index struct {
	mu      sync.Mutex
	watches map[types.NamespacedName]*v1alpha1.CredentialWatch
}

func (x *index) put(obj any) {
	if w, ok := obj.(*v1alpha1.CredentialWatch); ok {
		x.mu.Lock()
		defer x.mu.Unlock()
		x.watches[types.NamespacedName{Namespace: w.Namespace, Name: w.Name}] = w
	}
}

func (x *index) delete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if w, ok := obj.(*v1alpha1.CredentialWatch); ok {
		x.mu.Lock()
		defer x.mu.Unlock()
		delete(x.watches, types.NamespacedName{Namespace: w.Namespace, Name: w.Name})
	}
}

func (x *index) list() []*v1alpha1.CredentialWatch {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Collect(maps.Values(x.watches))
}

// MetricsPath is where the watches' series are appended to the registry's.
const MetricsPath = "/metrics"

// Handler serves registry's series (controller-runtime's, Go's, the Graph request counter)
// followed by the watches', as one text exposition. Requests to other paths go to registry alone.
func (w *Watches) Handler(registry http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != MetricsPath {
			registry.ServeHTTP(rw, r)
			return
		}
		// List first, so a failure can still be answered with an error status.
		list, err := w.list()
		if err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		// The registry's part is asked for as uncompressed text, so the watches' text can follow it.
		plain := r.Clone(r.Context())
		plain.Header.Set("Accept", string(textFormat))
		plain.Header.Del("Accept-Encoding")
		head := &recorder{header: http.Header{}, code: http.StatusOK}
		registry.ServeHTTP(head, plain)
		if head.code != http.StatusOK {
			maps.Copy(rw.Header(), head.header)
			rw.WriteHeader(head.code)
			_, _ = rw.Write(head.body.Bytes())
			return
		}
		rw.Header().Set("Content-Type", string(textFormat))
		bw := bufio.NewWriter(rw)
		_, _ = bw.Write(head.body.Bytes())
		w.write(bw, list)
		// The client hung up if this fails; there is no one left to tell.
		_ = bw.Flush()
	})
}

var textFormat = expfmt.NewFormat(expfmt.TypeTextPlain)

// textWriter writes gauges in the Prometheus text format, version 0.0.4. Every value credwatch
// reports is a whole number, so values are written as integers. A family's HELP and TYPE lines
// are written with its first series, so a family without series is left out, as a registry does.
type textWriter struct {
	w          *bufio.Writer
	name, help string
	started    bool
	num        [20]byte
}

var (
	helpEscaper       = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelValueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func (t *textWriter) family(name, help string) {
	t.name, t.help, t.started = name, help, false
}

// sample writes one series; labels are name, value pairs.
func (t *textWriter) sample(value int64, labels ...string) {
	if !t.started {
		t.started = true
		t.w.WriteString("# HELP " + t.name + " ")
		_, _ = helpEscaper.WriteString(t.w, t.help)
		t.w.WriteString("\n# TYPE " + t.name + " gauge\n")
	}
	t.w.WriteString(t.name)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			t.w.WriteByte('{')
		} else {
			t.w.WriteByte(',')
		}
		t.w.WriteString(labels[i])
		t.w.WriteString(`="`)
		_, _ = labelValueEscaper.WriteString(t.w, labels[i+1])
		t.w.WriteByte('"')
	}
	if len(labels) > 0 {
		t.w.WriteByte('}')
	}
	t.w.WriteByte(' ')
	t.w.Write(strconv.AppendInt(t.num[:0], value, 10))
	t.w.WriteByte('\n')
}

// recorder keeps the registry's response, so the watches' series can be appended to it.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
