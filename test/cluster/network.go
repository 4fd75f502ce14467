package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The cluster's addresses, all in 10.77.0.0/16, which nothing else on the test machines uses:
// the nodes on one bridge with the host at .1, a /24 of pod addresses per node, and the services.
// The host does not forward (net.ipv4.ip_forward stays as it is, 0 on the test machines), so a
// node or pod reaches the host's listeners and the other nodes, and nothing beyond.
const (
	bridgeName = "cw-br0"
	// HostIP is the host's address on the nodes' bridge: where the API server listens and where
	// pods reach the servers a test runs on the host.
	HostIP      = "10.77.0.1"
	nodePrefix  = 24
	clusterCIDR = "10.77.0.0/17"
	serviceCIDR = "10.77.128.0/24"
	// kubernetesServiceIP is the first address of serviceCIDR, which the API server gives the
	// "kubernetes" Service that in-cluster clients reach it by.
	kubernetesServiceIP = "10.77.128.1"
	// netnsPrefix names the network namespaces of the nodes, and linkPrefix the host's links,
	// so that a later run finds what a killed one left.
	netnsPrefix = "credwatch-"
	linkPrefix  = "cw-"
)

func nodeIP(i int) string   { return fmt.Sprintf("10.77.0.%d", 11+i) }
func podCIDR(i int) string  { return fmt.Sprintf("10.77.%d.0/24", 1+i) }
func podGW(i int) string    { return fmt.Sprintf("10.77.%d.1", 1+i) }
func nodeName(i int) string { return fmt.Sprintf("node-%d", 1+i) }
func netnsName(i int) string {
	return netnsPrefix + nodeName(i)
}

// netnsPath is where `ip netns add` mounts a namespace, which nsenter enters.
func netnsPath(i int) string { return filepath.Join("/run/netns", netnsName(i)) }

// run runs a command and returns its output, or an error that quotes it, with the value of a
// --user flag (ctr's user:password) left out.
func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		quoted := slices.Clone(args)
		for i := 1; i < len(quoted); i++ {
			if quoted[i-1] == "--user" {
				quoted[i] = "[redacted]"
			}
		}
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(quoted, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// runAll runs commands in order, stopping at the first that fails.
func runAll(cmds [][]string) error {
	for _, c := range cmds {
		if _, err := run(c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// setUpBridge makes the host's bridge, with the host's address on it.
func setUpBridge() error {
	return runAll([][]string{
		{"ip", "link", "add", bridgeName, "type", "bridge"},
		{"ip", "addr", "add", fmt.Sprintf("%s/%d", HostIP, nodePrefix), "dev", bridgeName},
		{"ip", "link", "set", bridgeName, "up"},
	})
}

// setUpNode makes node i's network namespace, joined to the bridge by a veth pair whose inner end
// is the node's eth0, and routes: the host's to the node's pods, the node's to the other nodes'
// pods. The node forwards, as every Kubernetes node does, between its pods and the bridge.
func setUpNode(i, nodes int) error {
	ns, host := netnsName(i), linkPrefix+nodeName(i)
	inNS := func(args ...string) []string { return append([]string{"ip", "-n", ns}, args...) }
	cmds := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", host, "master", bridgeName, "up"},
		inNS("link", "set", "lo", "up"),
		inNS("addr", "add", fmt.Sprintf("%s/%d", nodeIP(i), nodePrefix), "dev", "eth0"),
		inNS("link", "set", "eth0", "up"),
		// No default route: the cluster's addresses are all a node reaches, through the host
		// (the Services' too, which kube-proxy translates after routing has chosen eth0).
		inNS("route", "add", "10.77.0.0/16", "via", HostIP),
		{"ip", "route", "add", podCIDR(i), "via", nodeIP(i), "dev", bridgeName},
		{"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	for j := 0; j < nodes; j++ {
		if j != i {
			cmds = append(cmds, inNS("route", "add", podCIDR(j), "via", nodeIP(j)))
		}
	}
	return runAll(cmds)
}

// removeNetwork deletes every namespace and link a run made, this one's or a killed one's:
// deleting a namespace deletes the inner end of its veth pair, and with it the outer end, and
// deleting the bridge deletes the host's routes through it.
func removeNetwork() error {
	var errs []string
	for _, ns := range hostNetns() {
		if _, err := run("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// The kernel destroys a deleted namespace's links in the background: a host end may still be
	// listed, and gone by the time it is deleted.
	for _, name := range hostLinks() {
		if _, err := run("ip", "link", "del", name); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err.Error())
		}
	}
	for wait := 0; wait < 100 && len(hostLinks()) > 0; wait++ {
		time.Sleep(50 * time.Millisecond)
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the network: %s", strings.Join(errs, "; "))
	}
	return nil
}

// writeCNI writes node i's CNI configuration: a bridge in the node's namespace with the node's
// pod addresses, and host-local's records kept under dir rather than /var/lib/cni.
func writeCNI(dir string, i int) error {
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "credwatch-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, filepath.Join(dir, "ipam"), podCIDR(i), podGW(i))
	if err := os.MkdirAll(filepath.Join(dir, "net.d"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "net.d", "10-credwatch.conflist"), []byte(conf), 0o644)
}

// hostNetns are the network namespaces of the harness's names.
func hostNetns() []string {
	var names []string
	out, _ := run("ip", "netns", "list")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], netnsPrefix) {
			names = append(names, f[0])
		}
	}
	return names
}

// hostLinks are the host's links of the harness's names.
func hostLinks() []string {
	var names []string
	out, _ := run("ip", "-o", "link", "show")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if strings.HasPrefix(name, linkPrefix) {
				names = append(names, name)
			}
		}
	}
	return names
}
