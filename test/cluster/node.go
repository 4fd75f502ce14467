package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Node is one of the cluster's nodes: a network namespace of its own with a containerd, a kubelet
// and a kube-proxy in it.
type Node struct {
	// Name is the node's name in the API.
	Name string
	// IP is the node's address on the bridge.
	IP string
	// PodCIDR holds the addresses of the node's pods.
	PodCIDR     string
	index       int
	dir         string
	kubelet     *process
	kubeletArgs []string
}

// Dir is the node's folder, where a test writes the files its kubelet is given, such as a
// credential provider's configuration.
func (n *Node) Dir() string { return n.dir }

// Socket is the node's containerd socket, for ctr.
func (n *Node) Socket() string { return filepath.Join(n.dir, "containerd", "containerd.sock") }

func (c *Cluster) newNode(i int) (*Node, error) {
	n := &Node{Name: nodeName(i), IP: nodeIP(i), PodCIDR: podCIDR(i), index: i, dir: filepath.Join(c.dir, nodeName(i))}
	for _, d := range []string{"containerd", "cni", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	return n, writeCNI(filepath.Join(n.dir, "cni"), i)
}

// startNode starts node n's containerd, imports the images into it, and starts its kubelet and
// kube-proxy.
func (c *Cluster) startNode(ctx context.Context, n *Node) error {
	if err := c.startContainerd(ctx, n); err != nil {
		return err
	}
	for _, img := range c.cfg.Images {
		if _, err := n.Ctr("images", "import", "--no-unpack", img); err != nil {
			return fmt.Errorf("importing %s into %s: %w", img, n.Name, err)
		}
	}
	if err := c.startKubelet(ctx, n); err != nil {
		return err
	}
	return c.startKubeProxy(n)
}

// startContainerd starts the node's containerd with every path of its own (root, state, socket,
// runc's state, the CNI configuration and the pods' network namespaces), so that two run side by
// side and teardown finds all they made under the node's folder.
func (c *Cluster) startContainerd(ctx context.Context, n *Node) error {
	dir := filepath.Join(n.dir, "containerd")
	conf := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Plugins this harness does not use, among them "opt", which would write to /opt/containerd.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  netns_mounts_under_state_dir = true
  # The test machines' root lacks CAP_SYS_RESOURCE, without which runc cannot give a container an
  # oom_score_adj below containerd's own (the kubelet asks -998 for a sandbox): keep them at it.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[5]q
    conf_dir = %[6]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    Root = %[7]q
  # Where a registry's hosts.toml says how to reach it (HostsDir): the registries of the tests
  # are on the host, whatever name their images carry.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[8]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.Socket(), c.cfg.Pause, cniBinDir,
		filepath.Join(n.dir, "cni", "net.d"), filepath.Join(dir, "runc"), c.HostsDir())
	file := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		return err
	}
	if _, err := c.start(n.Name+"-containerd", n.Name, netnsPath(n.index), "containerd", "--config", file); err != nil {
		return err
	}
	return c.poll(ctx, n.Name+"'s containerd to answer", func() (bool, error) {
		_, err := run("ctr", "--address", n.Socket(), "version")
		return err == nil, nil
	})
}

// startKubelet starts the node's kubelet with a client certificate of the node's own, as a
// bootstrapped kubelet has, in the cgroup root /credwatch/<node>, its files under the node's
// folder, and the kernel settings the harness restores at teardown already set.
func (c *Cluster) startKubelet(ctx context.Context, n *Node) error {
	kubeconfig, err := c.componentKubeconfig(n.Name+"-kubelet", "system:node:"+n.Name, []string{"system:nodes"})
	if err != nil {
		return err
	}
	dir := filepath.Join(n.dir, "kubelet")
	resolv := filepath.Join(n.dir, "resolv.conf")
	// Pods resolve nothing: every address a test gives them is an IP address, and no other
	// server is to be asked.
	if err := os.WriteFile(resolv, []byte("options ndots:0\n"), 0o644); err != nil {
		return err
	}
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /%[3]s/%[4]s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[5]s
podLogsDir: %[6]q
resolvConf: %[7]q
serializeImagePulls: false
# The machine's disk is shared with everything else on it: no eviction for disk, none for memory
# short of the end.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.IP, c.pki.caFile(), cgroupName, n.Name, n.Socket(), filepath.Join(n.dir, "pod-logs"), resolv)
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		return err
	}
	n.kubeletArgs = []string{c.asset("kubelet"), "--config=" + file, "--kubeconfig=" + kubeconfig,
		"--root-dir=" + dir, "--cert-dir=" + filepath.Join(dir, "pki"), "--hostname-override=" + n.Name, "--node-ip=" + n.IP}
	if c.cfg.KubeletArgs != nil {
		n.kubeletArgs = append(n.kubeletArgs, c.cfg.KubeletArgs(n)...)
	}
	return c.runKubelet(ctx, n)
}

// devicePluginSocket is where every kubelet serves its device manager, whatever its root folder:
// one path for all the nodes' kubelets, each of which removes the file and binds it anew as it
// starts. Two doing so at once fail one of them ("address already in use"), and it exits.
var devicePluginSocket = filepath.Join(devicePlugins, "kubelet.sock")

// runKubelet starts the node's kubelet, and waits until it has bound its device manager's socket,
// so that the next kubelet started does not race it for the file.
func (c *Cluster) runKubelet(ctx context.Context, n *Node) error {
	before, _ := os.Stat(devicePluginSocket)
	var err error
	if n.kubelet, err = c.start(n.Name+"-kubelet", n.Name, netnsPath(n.index), n.kubeletArgs...); err != nil {
		return err
	}
	return c.poll(ctx, n.Name+"'s kubelet to serve its device manager", func() (bool, error) {
		now, err := os.Stat(devicePluginSocket)
		// A new file: a freed inode may be reused at once, its time is new.
		return err == nil && (before == nil || !os.SameFile(before, now) || !now.ModTime().Equal(before.ModTime())), nil
	})
}

// RestartKubelet stops the node's kubelet and starts it again with the same flags, as a node
// agent does after it rewrote the kubelet's files (AKS after a credential reset), and returns
// once it runs. Its pods keep running meanwhile; the kubelet reads its credential provider's
// files and config afresh.
func (c *Cluster) RestartKubelet(n *Node) error {
	n.kubelet.stop(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.runKubelet(ctx, n)
}

// startKubeProxy starts the node's kube-proxy in iptables mode: the Services' rules are in the
// node's network namespace, which teardown deletes with them.
func (c *Cluster) startKubeProxy(n *Node) error {
	kubeconfig, err := c.componentKubeconfig(n.Name+"-kube-proxy", "system:kube-proxy", nil)
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The conntrack table's size and timeouts are the machine's, not the node's to change.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, kubeconfig, clusterCIDR, n.Name)
	file := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		return err
	}
	_, err = c.start(n.Name+"-kube-proxy", n.Name, netnsPath(n.index), c.asset("kube-proxy"), "--config="+file)
	return err
}

// Ctr runs containerd's client against the node's containerd, in the namespace the CRI uses.
func (n *Node) Ctr(args ...string) (string, error) {
	out, err := run("ctr", append([]string{"--address", n.Socket(), "--namespace", "k8s.io"}, args...)...)
	return strings.TrimSpace(out), err
}
