package scale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/test/fakeazure"
	"github.com/credwatch/credwatch/test/kubecfg"
)

// auditPolicy records every write of the kinds the operator writes, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: "credwatch.dev"
    resources: ["credentialwatches", "credentialwatches/status"]
  - group: ""
    resources: ["events", "secrets"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: None
`

// BenchmarkManagerSweep runs the operator's binary against a real API server and etcd holding N
// CredentialWatches, each of its own service principal, and the fake Graph enforcing a small
// tenant's budget 30 ms away. It reports the first sweep (from the process's start until every
// watch is checked), what it cost Graph, the API-server writes it made, the writes of a quiet
// minute after it and of a restart (both should be none: status is written only when it
// changes), and the process's peak RSS through the sweep and then through the quiet minute,
// when its metrics are scraped every 15 s, and the processor time the operator used in all of
// that; and the restarted process's peak, beyond its binary's pages. Run with -benchtime=1x. CREDWATCH_BENCH_WATCHES lists the Ns (100, 1,000 and 10,000
// when unset); CREDWATCH_BENCH_PROFILE names a directory for the operator's memory over time
// and its heap profiles.
func BenchmarkManagerSweep(b *testing.B) {
	sizes := []int{100, 1000, 10000}
	if s := os.Getenv("CREDWATCH_BENCH_WATCHES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("CREDWATCH_BENCH_WATCHES=%q: want numbers of watches, such as 100,1000,10000", s)
			}
			sizes = append(sizes, n)
		}
	}
	bin := buildOperator(b)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("watches=%d", n), func(b *testing.B) {
			for range b.N {
				managerSweep(b, bin, n)
			}
		})
	}
}

// buildOperator builds the operator's binary, as the image holds it.
func buildOperator(b *testing.B) string {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Fatal("KUBEBUILDER_ASSETS is not set: run `make bench`, which builds kube-apiserver and etcd into bin/k8s")
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime; the figures are the output
	bin := filepath.Join(b.TempDir(), "credwatch")
	build := exec.Command("go", "build", "-o", bin, "./cmd")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd: %v\n%s", err, out)
	}
	return bin
}

func managerSweep(b *testing.B, bin string, n int) {
	b.StopTimer()
	cp := startControlPlane(b)
	cfg, scheme, k8s, work, auditLog := cp.cfg, cp.scheme, cp.k8s, cp.work, cp.auditLog
	kubeconfig := cp.kubeconfig

	azure, err := fakeazure.Start(work, tenant, client, secret, func(string, string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(azure.Close)
	appIDs := seedApps(azure.Graph, n)

	ctx := context.Background()
	const ns = "bench"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	createIdentity(b, k8s, ns)
	createWatches(b, k8s, ns, appIDs)

	azure.Graph.SetBudget(budget.SmallTenant, clock.RealClock{})
	azure.Graph.SetLatency(latency)
	azure.Graph.ResetRequests()
	before := auditWrites(b, auditLog)
	checked, firstWrite, stopFollowing := followWrites(b, auditLog, n)

	metricsAddr := freeAddr(b)
	op := startOperator(b, bin, kubeconfig, metricsAddr, azure, ns)
	b.StartTimer()
	began := time.Now()
	select {
	case <-checked:
	case err := <-op.exited:
		b.Fatalf("the operator exited during the sweep: %v\n%s", err, lastLines(op.logs.String(), 40))
	case <-time.After(patience(n)):
		b.Fatalf("the sweep did not end within %v", patience(n))
	}
	took := time.Since(began)
	b.StopTimer()
	stopFollowing()
	sweep := auditWrites(b, auditLog).minus(before)
	checkedAll(b, k8s, ns, n)

	sweepRSS := op.memory(b).peak

	// A quiet minute, scraped every 15 s as Prometheus would: nothing is due, so nothing should
	// be written; a scrape builds every watch's series at once, so it raises the peak.
	quietFrom := auditWrites(b, auditLog)
	stopScraping := scrapeEvery(metricsAddr, scrapeInterval)
	time.Sleep(time.Minute)
	stopScraping()
	quiet := auditWrites(b, auditLog).minus(quietFrom)
	mem := op.memory(b)
	op.stop(b)
	// What memory costs in processor time: the collector runs more often the less the heap may grow.
	cpu := op.cmd.ProcessState.UserTime() + op.cmd.ProcessState.SystemTime()

	// A restart reconciles every watch again; none is due, so none should be written.
	restartFrom := auditWrites(b, auditLog)
	requestsBefore := len(azure.Graph.Requests())
	op = startOperator(b, bin, kubeconfig, metricsAddr, azure, ns)
	waitReconciled(b, metricsAddr, n, patience(n))
	restart := auditWrites(b, auditLog).minus(restartFrom)
	restartReads := len(azure.Graph.Requests()) - requestsBefore
	// A restart lists every watch as checked, status and all: the operator's peak in production.
	restartMem := op.memory(b)
	op.stop(b)
	floor := statusWriteFloor(b, cfg, scheme, ns, false)
	watchedFloor := statusWriteFloor(b, cfg, scheme, ns, true)

	requests := 0
	for _, r := range azure.Graph.Requests()[:requestsBefore] {
		if !r.Batched && strings.HasPrefix(r.Path, "/v1.0/") {
			requests++
		}
	}
	units := azure.Graph.Spent()
	rate := float64(budget.SmallTenant) / budget.Window.Seconds()
	b.ReportMetric(took.Seconds(), "sweep-s")
	b.ReportMetric((<-firstWrite).Sub(began).Seconds(), "first-write-s")
	b.ReportMetric(floor.Seconds(), "write-floor-s")
	b.ReportMetric(took.Seconds()/floor.Seconds(), "sweep/floor")
	b.ReportMetric(watchedFloor.Seconds(), "watched-write-floor-s")
	b.ReportMetric(took.Seconds()/watchedFloor.Seconds(), "sweep/watched-floor")
	b.ReportMetric(max(0, float64(units-budget.SmallTenant))/rate, "budget-bound-s")
	b.ReportMetric(float64(requests)/float64(n), "requests/sp")
	b.ReportMetric(float64(units)/float64(n), "units/sp")
	b.ReportMetric(float64(azure.Graph.Throttled()), "429s")
	b.ReportMetric(float64(sweepRSS)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(mem.peak)/(1<<20), "peak-rss-scraped-MiB")
	b.ReportMetric(float64(mem.file)/(1<<20), "rss-file-MiB")
	b.ReportMetric(float64(restartMem.peak-restartMem.file)/(1<<20), "restart-beyond-MiB")
	b.ReportMetric(cpu.Seconds(), "operator-cpu-s")
	b.ReportMetric(float64(sweep.status)/float64(n), "status-writes/watch")
	b.ReportMetric(float64(sweep.other), "other-writes")
	b.ReportMetric(float64(quiet.total()), "quiet-minute-writes")
	b.ReportMetric(float64(restart.total()), "restart-writes")
	b.ReportMetric(float64(restartReads), "restart-graph-requests")
}

// controlPlane is a kube-apiserver and etcd holding the CRDs, writing an audit log of the
// operator's writes, and a client of it.
type controlPlane struct {
	cfg                        *rest.Config
	scheme                     *runtime.Scheme
	k8s                        crclient.WithWatch
	work, kubeconfig, auditLog string
}

func startControlPlane(b *testing.B) controlPlane {
	cp := controlPlane{work: b.TempDir()}
	cp.auditLog = filepath.Join(cp.work, "audit.log")
	policy := filepath.Join(cp.work, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		b.Fatal(err)
	}
	cp.scheme = runtime.NewScheme()
	_ = corev1.AddToScheme(cp.scheme)
	_ = v1alpha1.AddToScheme(cp.scheme)
	env := &envtest.Environment{CRDDirectoryPaths: []string{"../../config/crd/bases"}, ErrorIfCRDPathMissing: true, Scheme: cp.scheme}
	// The log is read whole: rotated (by default at 100 MB, 150,000 writes), it would count a
	// 100,000-watch sweep short.
	env.ControlPlane.GetAPIServer().Configure().Set("audit-policy-file", policy).Set("audit-log-path", cp.auditLog).
		Set("audit-log-maxsize", "1000000")
	// 100,000 watches, each written twice and again by the floors, outgrow etcd's default 2 GiB
	// before the API server compacts them.
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(8<<30))
	var err error
	b.Cleanup(func() { _ = env.Stop() }) // also what a failed Start started
	if cp.cfg, err = env.Start(); err != nil {
		b.Fatal(err)
	}
	cp.cfg.QPS, cp.cfg.Burst = 1000, 2000
	if cp.k8s, err = crclient.NewWithWatch(cp.cfg, crclient.Options{Scheme: cp.scheme}); err != nil {
		b.Fatal(err)
	}
	cp.kubeconfig = filepath.Join(cp.work, "kubeconfig")
	if err := kubecfg.Write(cp.cfg, "bench", cp.kubeconfig); err != nil {
		b.Fatal(err)
	}
	return cp
}

// statusWriteFloor is how long the API server takes for the sweep's status writes alone: each
// watch's status, as the operator wrote it, is cleared (untimed) and written again by the same
// merge patch, answered with the watch's metadata alone, from 20 writers without a client-side
// rate limit, as the operator's. Once Graph costs little, this is the floor of a sweep. watched
// keeps a watch of the namespace open and read meanwhile, as the operator's informer is during a
// sweep: each write is then an event the server encodes and sends.
func statusWriteFloor(b *testing.B, cfg *rest.Config, scheme *runtime.Scheme, ns string, watched bool) time.Duration {
	c := rest.CopyConfig(cfg)
	c.QPS = -1 // controller-runtime's default, the operator's: the server's fairness limits it
	k8s, err := crclient.NewWithWatch(c, crclient.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var list v1alpha1.CredentialWatchList
	if err := k8s.List(ctx, &list, crclient.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	cleared := make([]*v1alpha1.CredentialWatch, len(list.Items))
	each := func(fn func(i int) error) { inParallel(b, 20, len(list.Items), fn) }
	each(func(i int) error {
		w := list.Items[i].DeepCopy()
		w.Status = v1alpha1.CredentialWatchStatus{}
		if err := k8s.Status().Patch(ctx, w, crclient.MergeFrom(&list.Items[i])); err != nil {
			return err
		}
		cleared[i] = w
		return nil
	})
	if watched {
		var now v1alpha1.CredentialWatchList
		if err := k8s.List(ctx, &now, crclient.InNamespace(ns), crclient.Limit(1)); err != nil {
			b.Fatal(err)
		}
		w, err := k8s.Watch(ctx, &v1alpha1.CredentialWatchList{}, crclient.InNamespace(ns),
			&crclient.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: now.ResourceVersion}})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		go func() {
			for range w.ResultChan() {
			}
		}()
	}
	began := time.Now()
	each(func(i int) error {
		w := cleared[i].DeepCopy()
		w.Status = list.Items[i].Status
		patch, err := crclient.MergeFrom(cleared[i]).Data(w)
		if err != nil {
			return err
		}
		// Answered with the watch's metadata alone, as the operator asks.
		written := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}}
		written.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CredentialWatch"))
		return k8s.Status().Patch(ctx, written, crclient.RawPatch(types.MergePatchType, patch))
	})
	return time.Since(began)
}

// scrapeInterval is how often the harness scrapes the operator's metrics in the quiet minute.
const scrapeInterval = 15 * time.Second

// scrapeEvery reads the operator's metrics every interval until the function it returns is called.
func scrapeEvery(metricsAddr string, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}
		}
	}()
	return func() { close(done) }
}

// createWatches creates a watch per appId, sixteen at a time.
func createWatches(b *testing.B, k8s crclient.Client, ns string, appIDs []string) {
	inParallel(b, 16, len(appIDs), func(i int) error {
		return k8s.Create(context.Background(), &v1alpha1.CredentialWatch{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sp-%05d", i), Namespace: ns},
			Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{
				TenantID: tenant, ClientID: appIDs[i]}}},
		})
	})
}

// inParallel runs fn for 0 to n-1 from workers goroutines, and fails b with the first error.
func inParallel(b *testing.B, workers, n int, fn func(i int) error) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var failed error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := fn(i); err != nil {
					once.Do(func() { failed = err })
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
}

// followWrites closes the channel it returns once the audit log shows a status write, accepted,
// of each of n watches, from where the log ends now; the first such write's time is sent on the
// other channel. It reads the log the API server writes in the floors' runs too rather than
// watching the watches: a watch of its own would cost the server a second stream of every write
// the operator makes, which the floors do not pay (5% at 100,000 watches, a fifth to a third at
// 10,000), and decode each object in this process, on the cores the server shares. That the
// writes were checks is confirmed after, by checkedAll.
func followWrites(b *testing.B, path string, n int) (<-chan struct{}, <-chan time.Time, func()) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		b.Fatal(err)
	}
	done, stop, first := make(chan struct{}), make(chan struct{}), make(chan time.Time, 1)
	go func() {
		defer f.Close()
		seen := make(map[string]bool, n)
		var partial []byte
		buf := make([]byte, 1<<20)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for len(seen) < n {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for {
				k, _ := f.Read(buf)
				if k == 0 {
					break
				}
				partial = append(partial, buf[:k]...)
				last := bytes.LastIndexByte(partial, '\n')
				if last < 0 {
					continue
				}
				for _, line := range bytes.Split(partial[:last], []byte("\n")) {
					if name, ok := statusWritten(line); ok {
						if len(seen) == 0 {
							first <- time.Now()
						}
						seen[name] = true
					}
				}
				partial = append(partial[:0], partial[last+1:]...)
			}
		}
		close(done)
	}()
	return done, first, func() { close(stop) }
}

// statusWritten is the watch a line of the audit log wrote the status of, if it did and the
// server accepted it. Most lines are not status writes: they are passed over before decoding.
func statusWritten(line []byte) (string, bool) {
	if !bytes.Contains(line, []byte(`"subresource":"status"`)) {
		return "", false
	}
	e, ok := completed(line)
	if !ok || !e.statusWrite() || e.ResponseStatus.Code != http.StatusOK {
		return "", false
	}
	return e.ObjectRef.Name, true
}

// checkedAll fails unless every watch in ns carries a check.
func checkedAll(b *testing.B, k8s crclient.Client, ns string, n int) {
	var list v1alpha1.CredentialWatchList
	if err := k8s.List(context.Background(), &list, crclient.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	checked := 0
	for i := range list.Items {
		if list.Items[i].Status.LastCheckTime != nil {
			checked++
		}
	}
	if checked != n {
		b.Fatalf("the sweep wrote every watch's status, but only %d of %d watches carry a check", checked, n)
	}
}

// writes counts the API-server writes the audit log holds.
type writes struct{ status, other int }

func (w writes) minus(o writes) writes { return writes{w.status - o.status, w.other - o.other} }
func (w writes) total() int            { return w.status + w.other }

// auditWrites counts the completed writes in the audit log: status writes of watches, and any
// other write (events, secrets, watches themselves) except the harness's creation of watches.
func auditWrites(b *testing.B, path string) writes {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var w writes
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		e, ok := completed(sc.Bytes())
		if !ok {
			continue
		}
		switch {
		case e.statusWrite():
			w.status++
		case e.ObjectRef.Resource == "credentialwatches" && e.Verb == "create":
		default:
			w.other++
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return w
}

// auditEvent is what the harness reads of an audit log's line.
type auditEvent struct {
	Verb      string `json:"verb"`
	Stage     string `json:"stage"`
	ObjectRef struct {
		Resource, Subresource, Name string
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// completed is the event a line of the audit log records, if it records a completed request.
func completed(line []byte) (auditEvent, bool) {
	var e auditEvent
	if json.Unmarshal(line, &e) != nil || e.Stage != "ResponseComplete" {
		return e, false
	}
	return e, true
}

func (e auditEvent) statusWrite() bool {
	return e.ObjectRef.Resource == "credentialwatches" && e.ObjectRef.Subresource == "status"
}

// benchIdentity is the identity of the benchmark's watches: the operator's own.
const benchIdentity = "bench"

// createIdentity creates the watches' identity as signed in already: the benchmark measures the
// watches' sweep, not one sign-in before it.
func createIdentity(b *testing.B, k8s crclient.Client, ns string) {
	id := &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: benchIdentity}}
	id.Spec.Operator = &v1alpha1.OperatorSignIn{}
	id.Spec.Allow = v1alpha1.IdentityAllow{Tenants: []string{tenant}, Applications: []string{v1alpha1.AllApplications},
		Operations: []v1alpha1.Operation{v1alpha1.OperationTenantScan, v1alpha1.OperationReadOwners}}
	id.Spec.Conditions = []v1alpha1.NamespaceCondition{{Namespaces: []string{ns}}}
	ctx := context.Background()
	if err := k8s.Create(ctx, id); err != nil {
		b.Fatal(err)
	}
	id.Status = v1alpha1.IdentityStatus{ObservedGeneration: id.Generation, SignIn: "Operator", Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedIn, Message: "signed in",
		ObservedGeneration: id.Generation, LastTransitionTime: metav1.Now()}}}
	if err := k8s.Status().Update(ctx, id); err != nil {
		b.Fatal(err)
	}
}

type operator struct {
	cmd    *exec.Cmd
	exited chan error
	// done is closed once the process has exited.
	done chan struct{}
	logs *bytes.Buffer
}

func startOperator(b *testing.B, bin, kubeconfig, metricsAddr string, azure *fakeazure.Azure, ns string, flags ...string) *operator {
	op := &operator{logs: &bytes.Buffer{}, exited: make(chan error, 1), done: make(chan struct{})}
	op.cmd = exec.Command(bin, append(append([]string{"--kubeconfig", kubeconfig, "--leader-elect=false",
		"--health-probe-bind-address", freeAddr(b), "--metrics-bind-address", metricsAddr, "--metrics-secure=false",
		"--operator-namespace", ns, "--default-identity", benchIdentity}, azure.Flags()...), flags...)...)
	dir := os.Getenv("CREDWATCH_BENCH_PROFILE")
	pprofAddr := freeAddr(b)
	if dir != "" {
		op.cmd.Args = append(op.cmd.Args, "--pprof-bind-address", pprofAddr)
	}
	op.cmd.Env = append(os.Environ(), azure.Env()...)
	op.cmd.Stdout, op.cmd.Stderr = op.logs, op.logs
	if err := op.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		err := op.cmd.Wait()
		close(op.done)
		op.exited <- err
	}()
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		go profile(op, pprofAddr, dir)
	}
	b.Cleanup(func() {
		if op.cmd.ProcessState == nil {
			_ = op.cmd.Process.Kill()
			<-op.exited
		}
		if b.Failed() {
			b.Logf("the operator logged:\n%s", lastLines(op.logs.String(), 40))
		}
	})
	return op
}

// rss is a process's resident memory as the kernel counts it: its high-water mark, and how much
// of what is resident now is the binary's own pages rather than memory it allocated.
type rss struct{ peak, file int64 }

// resetPeak resets the kernel's high-water mark of the operator's RSS (VmHWM) to what it holds
// now, so that the next memory reading peaks from here.
func (op *operator) resetPeak(b *testing.B) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", op.cmd.Process.Pid), []byte("5"), 0); err != nil {
		b.Fatal(err)
	}
}

func (op *operator) memory(b *testing.B) rss {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", op.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	var m rss
	for _, line := range strings.Split(string(status), "\n") {
		key, value, _ := strings.Cut(line, ":")
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
		switch {
		case key != "VmHWM" && key != "RssFile":
			continue
		case err != nil:
			b.Fatalf("%s in /proc/PID/status: %v", key, err)
		case key == "VmHWM":
			m.peak = kb << 10
		default:
			m.file = kb << 10
		}
	}
	if m.peak == 0 {
		b.Fatal("no VmHWM in /proc/PID/status")
	}
	return m
}

func (op *operator) stop(b *testing.B) {
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.exited:
	case <-time.After(time.Minute):
		b.Fatal("the operator did not stop within a minute of SIGTERM")
	}
}

// patience is how long the harness waits for n watches to be swept or reconciled: ten minutes,
// or 10 ms a watch, a fifth of the API server's pace here, whichever is longer.
func patience(n int) time.Duration { return max(10*time.Minute, time.Duration(n)*10*time.Millisecond) }

// waitReconciled waits until the operator's metrics count n reconciles of the controller.
func waitReconciled(b *testing.B, metricsAddr string, n int, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if reconciles(metricsAddr) >= n {
			return
		}
		time.Sleep(scrapeInterval / 3)
	}
	b.Fatalf("the restarted operator did not reconcile %d watches within %v", n, within)
}

func reconciles(metricsAddr string) int {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, `controller_runtime_reconcile_total{controller="credentialwatch"`) {
			if f := strings.Fields(line); len(f) == 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				total += int(v)
			}
		}
	}
	return total
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// profile writes, into dir, the operator's resident memory each second (rss-PID.tsv: seconds since
// its start, VmRSS) and its heap profile every ten seconds (heap-PID-SECONDS.pb.gz, for go tool
// pprof), until it exits. Building a profile allocates in the operator: BENCHMARKS.md's figures
// are from runs without it.
func profile(op *operator, pprofAddr, dir string) {
	began := time.Now()
	pid := op.cmd.Process.Pid
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("rss-%d.tsv", pid)))
	if err != nil {
		return
	}
	defer f.Close()
	var profiled time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-op.done:
			return
		case <-tick.C:
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				fmt.Fprintf(f, "%.0f\t%s\n", time.Since(began).Seconds(), strings.TrimSpace(v))
			}
		}
		if time.Since(profiled) < 10*time.Second {
			continue
		}
		profiled = time.Now()
		resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap")
		if err != nil {
			continue
		}
		heap, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("heap-%d-%04.0f.pb.gz", pid, time.Since(began).Seconds())), heap, 0o600)
		}
	}
}
