package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

var (
	expirationDesc = prometheus.NewDesc(
		"credwatch_credential_expiration_timestamp_seconds",
		"The date after which the credential expires, as a Unix timestamp.",
		[]string{"namespace", "name", "client_id", "key_id", "type", "source"}, nil)
	readyDesc = prometheus.NewDesc(
		"credwatch_watch_ready_status",
		"The Ready condition of a CredentialWatch: 1, labelled with the condition's status (True, False, Unknown).",
		[]string{"namespace", "name", "client_id", "condition"}, nil)
	lastCheckDesc = prometheus.NewDesc(
		"credwatch_watch_last_check_timestamp_seconds",
		"When Microsoft Graph was last read successfully for the watch, as a Unix timestamp.",
		[]string{"namespace", "name", "client_id"}, nil)
	failuresDesc = prometheus.NewDesc(
		"credwatch_watch_consecutive_check_failures",
		"Failed checks of the watch since its last successful one; absent while checks succeed.",
		[]string{"namespace", "name", "client_id"}, nil)
	stateDesc = prometheus.NewDesc(
		"credwatch_watch_state",
		"The worst state of the watch's credentials: 1, labelled with the state (Valid, Warning, Critical, Expired); absent before the first check.",
		[]string{"namespace", "name", "client_id", "state"}, nil)
	lastRotationDesc = prometheus.NewDesc(
		"credwatch_watch_last_rotation_timestamp_seconds",
		"When the watch last completed a rotation of its secret, as a Unix timestamp.",
		[]string{"namespace", "name", "client_id"}, nil)
	rotatingDesc = prometheus.NewDesc(
		"credwatch_watch_rotation_in_progress",
		"1 while a rotation is in progress, labelled with its step; absent otherwise.",
		[]string{"namespace", "name", "client_id", "step"}, nil)
)

// listTimeout bounds a scrape's read of the cache, which only blocks before the cache has synced.
const listTimeout = 10 * time.Second

// Collector turns the CredentialWatches in a cache into metrics at each scrape.
type Collector struct {
	reader client.Reader
	scans  Scans
}

// Scans gives the credentials a tenant scan last found, which are more than its status lists.
type Scans interface {
	Get(watch types.NamespacedName) ([]v1alpha1.Credential, bool)
}

// NewCollector returns a Collector reading watches through reader, which should be a cache, and
// the credentials of tenant scans from scans. A process that has not scanned a tenant itself (a
// replica that is not the leader) reports the credentials the scan's status lists.
func NewCollector(reader client.Reader, scans Scans) *Collector {
	return &Collector{reader: reader, scans: scans}
}

var _ prometheus.Collector = &Collector{}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{expirationDesc, readyDesc, lastCheckDesc, failuresDesc, stateDesc, lastRotationDesc, rotatingDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	var list v1alpha1.CredentialWatchList
	// Read only, so the cache's objects themselves: copying 10,000 watches at every scrape would
	// double the operator's memory for a moment each time.
	if err := c.reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(expirationDesc, err)
		return
	}
	for i := range list.Items {
		c.collectWatch(ch, &list.Items[i])
	}
}

func (c *Collector) collectWatch(ch chan<- prometheus.Metric, w *v1alpha1.CredentialWatch) {
	clientID := w.AppID()
	creds := w.Status.Credentials
	if w.Spec.Target.TenantScan != nil {
		if all, ok := c.scans.Get(types.NamespacedName{Namespace: w.Namespace, Name: w.Name}); ok {
			creds = all
		}
	}
	for _, cr := range creds {
		id := clientID
		if cr.AppID != "" {
			id = cr.AppID
		}
		ch <- prometheus.MustNewConstMetric(expirationDesc, prometheus.GaugeValue, float64(cr.EndTime.Unix()),
			w.Namespace, w.Name, id, cr.KeyID, string(cr.Type), string(cr.Source))
	}
	// One series for the status or state a watch is in, not one per possible value: a scrape of
	// 10,000 watches builds every series at once, and zeros would double them.
	ready := metav1.ConditionUnknown
	for _, cond := range w.Status.Conditions {
		if cond.Type == v1alpha1.ConditionReady {
			ready = cond.Status
		}
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, 1, w.Namespace, w.Name, clientID, string(ready))
	if t := w.Status.LastCheckTime; t != nil {
		ch <- prometheus.MustNewConstMetric(lastCheckDesc, prometheus.GaugeValue, float64(t.Unix()), w.Namespace, w.Name, clientID)
	}
	if n := w.Status.ConsecutiveFailures; n > 0 {
		ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.GaugeValue, float64(n), w.Namespace, w.Name, clientID)
	}
	if w.Status.State != "" {
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, 1, w.Namespace, w.Name, clientID, string(w.Status.State))
	}
	if r := w.Status.LastRotation; r != nil {
		ch <- prometheus.MustNewConstMetric(lastRotationDesc, prometheus.GaugeValue, float64(r.Time.Unix()), w.Namespace, w.Name, clientID)
	}
	if r := w.Status.Rotation; r != nil {
		ch <- prometheus.MustNewConstMetric(rotatingDesc, prometheus.GaugeValue, 1, w.Namespace, w.Name, clientID, string(r.Step))
	}
}
