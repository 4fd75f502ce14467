// Package cluster starts a Kubernetes cluster of real nodes on the test machine, for the tests
// that need what envtest lacks: kubelets, a container runtime and pods. Everything is built from
// the pinned Kubernetes release (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kubelet, kube-proxy) or taken from the machine's Debian packages (containerd, runc, the CNI
// plugins, iptables); nothing is downloaded when it runs, and no address is contacted but
// loopback and the cluster's own network.
//
// Each node is a network namespace on one bridge, with its own containerd (root, state, socket),
// kubelet and kube-proxy. Everything the harness makes is named so that a later run finds it:
// the folder Dir, the network namespaces credwatch-*, the links cw-*, the cgroups /credwatch. Up
// first removes what a killed run left; Down removes all of it, also after a failure or a Ctrl-C.
//
// It needs root, a cgroup v1 hierarchy (the test machines' kind), and the binaries `make
// cluster` builds and installs.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Dir holds everything a cluster writes: certificates, etcd's data, each node's containerd,
// kubelet and pods, and the daemons' logs. It is fixed so that a run finds what a killed one left,
// and in a folder only root may write to, so that no other user can make it first and have root
// read their files there (the daemons' configuration, the kernel settings to restore).
const Dir = "/var/lib/credwatch-cluster"

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// Config says what to start.
type Config struct {
	// Assets is the folder of the Kubernetes binaries `make cluster` builds: etcd,
	// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy.
	Assets string
	// Nodes is how many nodes to start; 2 if zero.
	Nodes int
	// Images are image archives imported into every node's containerd before its kubelet starts.
	Images []string
	// Pause is the sandbox image, one of Images.
	Pause string
	// KubeletArgs adds flags to a node's kubelet.
	KubeletArgs func(n *Node) []string
	// Timeout bounds Up; two minutes if zero.
	Timeout time.Duration
}

// Cluster is a running cluster.
type Cluster struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig for Config, for helm and kubectl.
	Kubeconfig string
	// Issuer is the issuer of the service-account tokens the API server signs.
	Issuer string
	// Nodes are the nodes, in the order they were started.
	Nodes []*Node

	cfg    Config
	dir    string
	pki    *pki
	saKey  string
	etcd   string
	procs  []*process
	lock   net.Listener
	signal chan os.Signal
	// mu guards procs and stopping, which a signal's Down reads while Up may still be starting.
	mu       sync.Mutex
	stopping bool
	relays   []net.Listener
	// down is closed when Down starts, which ends the wait for a signal.
	down     chan struct{}
	downOnce sync.Once
	downErr  error
}

// Up starts a cluster and waits until every node is Ready. On an error it has already removed
// what it made.
func Up(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if err := preflight(cfg); err != nil {
		return nil, err
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 2
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	lock, err := takeLock()
	if err != nil {
		return nil, err
	}
	if err := sweep(Dir); err != nil {
		releaseLock(lock)
		return nil, fmt.Errorf("removing what an earlier run left: %w", err)
	}
	// Every kubelet serves its device manager at /var/lib/kubelet/device-plugins, whatever its
	// root folder, and removes the sockets there when it starts: a node's own kubelet would lose
	// its device plugins.
	if _, err := os.Stat(devicePlugins); err == nil {
		releaseLock(lock)
		return nil, fmt.Errorf("%s exists: this machine is a Kubernetes node, whose kubelet the test cluster's kubelets would disturb; run it elsewhere", devicePlugins)
	}
	c = &Cluster{cfg: cfg, dir: Dir, lock: lock, Issuer: "https://kubernetes.default.svc.cluster.local", down: make(chan struct{})}
	c.watchSignals()
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("%w\n%s", err, c.LogTails(20)), c.Down())
		}
	}()
	if err := c.setUp(ctx); err != nil {
		return c, err
	}
	return c, c.waitReady(ctx)
}

// setUp makes the folder, the certificates, the network and the nodes' folders, and starts the
// daemons.
func (c *Cluster) setUp(ctx context.Context) error {
	if err := os.Mkdir(c.dir, 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(c.dir, "logs"), 0o755); err != nil {
		return err
	}
	if err := saveHost(c.dir); err != nil {
		return err
	}
	if err := c.makeCredentials(); err != nil {
		return err
	}
	if err := setUpBridge(); err != nil {
		return err
	}
	for i := 0; i < c.cfg.Nodes; i++ {
		if err := setUpNode(i, c.cfg.Nodes); err != nil {
			return err
		}
		n, err := c.newNode(i)
		if err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.startControlPlane(ctx); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := c.startNode(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// makeCredentials makes the CA, the service-account key and the admin's kubeconfig.
func (c *Cluster) makeCredentials() error {
	var err error
	if c.pki, err = newPKI(filepath.Join(c.dir, "pki")); err != nil {
		return err
	}
	if c.saKey, err = c.pki.serviceAccountKey(); err != nil {
		return err
	}
	if c.Kubeconfig, err = c.componentKubeconfig("admin", "credwatch-test-admin", []string{"system:masters"}); err != nil {
		return err
	}
	c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	return err
}

// waitReady waits until every node is Ready and the default namespace's ServiceAccount exists,
// which every pod there needs.
func (c *Cluster) waitReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := c.poll(ctx, "every node to be Ready", func() (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) < len(c.Nodes) {
			return false, nil
		}
		for _, n := range nodes.Items {
			if !nodeReady(n) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	return c.poll(ctx, "the default ServiceAccount", func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

func nodeReady(n corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// poll calls done every 200 ms until it says true, ctx ends, or a daemon exits.
func (c *Cluster) poll(ctx context.Context, what string, done func() (bool, error)) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		for _, p := range c.procs {
			if exited, how := p.exited(); exited {
				return fmt.Errorf("waiting for %s: %s exited (%s)", what, p.name, how)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// HostsDir is the nodes' containerd registry configuration folder: a registry's
// <name>/hosts.toml there says where its images are pulled from and which CA it is trusted by.
func (c *Cluster) HostsDir() string { return filepath.Join(c.dir, "registry-hosts") }

// CAFile is the cluster's CA certificate, which signs ServingCert's certificates.
func (c *Cluster) CAFile() string { return c.pki.caFile() }

// ServingCert writes a serving certificate for a server a test runs on the host for the nodes
// or pods to reach (at HostIP), signed by the cluster's CA, and returns its files.
func (c *Cluster) ServingCert(name string, ips []net.IP, dnsNames ...string) (certFile, keyFile string, err error) {
	return c.pki.issue(name, identity{name: name, ips: ips, dns: dnsNames})
}

func (c *Cluster) asset(name string) string { return filepath.Join(c.cfg.Assets, name) }

// preflight says what is missing before anything is made.
func preflight(cfg Config) error {
	if os.Geteuid() != 0 {
		return errors.New("the test cluster needs root (network namespaces, mounts, cgroups); the test machines run as root")
	}
	if err := checkCgroupV1(); err != nil {
		return err
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(cfg.Assets, b)); err != nil {
			missing = append(missing, filepath.Join(cfg.Assets, b))
		}
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "iptables", "conntrack", "nsenter", "mount"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		missing = append(missing, filepath.Join(cniBinDir, "bridge"))
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %v: run `make cluster`, which builds the Kubernetes binaries and installs containerd, runc, the CNI plugins and iptables", missing)
	}
	return nil
}

// watchSignals runs Down on SIGINT or SIGTERM before the process ends, which a test's cleanup
// would not.
func (c *Cluster) watchSignals() {
	c.signal = make(chan os.Signal, 1)
	signal.Notify(c.signal, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-c.signal:
			fmt.Fprintf(os.Stderr, "cluster: %v: removing the test cluster\n", s)
			_ = c.Down()
			// As a shell reports a process ended by the signal: 130 for SIGINT, 143 for SIGTERM.
			os.Exit(128 + int(s.(syscall.Signal)))
		case <-c.down:
		}
	}()
}
