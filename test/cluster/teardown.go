package cluster

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockName keeps two runs (a test and `make demo-cluster`, say) from removing each other's
// cluster: an abstract Unix socket, which only one process can hold, leaves no file behind, and
// is let go when its process ends, however it ends.
const lockName = "@credwatch-test-cluster"

func takeLock() (net.Listener, error) {
	l, err := net.Listen("unix", lockName)
	if err != nil {
		return nil, fmt.Errorf("another test cluster is running on this machine (%s is held): stop it first: %w", lockName, err)
	}
	return l, nil
}

func releaseLock(l net.Listener) { _ = l.Close() }

// Down stops the daemons, the kubelets first so that they do not restart what is being stopped,
// and removes everything the cluster made. It may be called more than once, and from a signal.
func (c *Cluster) Down() error {
	c.downOnce.Do(func() {
		signal.Stop(c.signal)
		close(c.down)
		c.mu.Lock()
		c.stopping = true
		procs := slices.Clone(c.procs)
		for _, l := range c.relays {
			_ = l.Close()
		}
		c.mu.Unlock()
		// The kubelets first, so that they do not restart what is being stopped.
		for _, p := range procs {
			if strings.HasSuffix(p.name, "-kubelet") {
				p.stop(10 * time.Second)
			}
		}
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(10 * time.Second)
		}
		c.downErr = sweep(c.dir)
		releaseLock(c.lock)
	})
	return c.downErr
}

// Sweep removes what a killed run left, as Up does first.
func Sweep() error {
	lock, err := takeLock()
	if err != nil {
		return err
	}
	defer releaseLock(lock)
	return sweep(Dir)
}

// sweep removes what a run made, whether it stopped cleanly or was killed: the processes left in
// its cgroups (containerd's shims and their containers outlive containerd), the mounts under dir
// (pods' volumes, overlay snapshots, network namespaces), the network, what the daemons wrote
// outside dir, the kernel settings the kubelets changed, the cgroups, and dir.
func sweep(dir string) error {
	if err := rootsOwn(dir); err != nil {
		return err
	}
	killed := errors.Join(killNamed(dir), killCgroups())
	unmounted := unmountUnder(dir)
	errs := []error{killed, unmounted, removeNetwork(), removeHostFiles(dir), restoreSysctls(dir), removeCgroups()}
	// A mount left under dir would let RemoveAll reach through it into what it mounts.
	if killed != nil || unmounted != nil || mountedUnder(dir) {
		return errors.Join(append(errs, fmt.Errorf("%s is kept: mounts or processes remain under it", dir))...)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// rootsOwn refuses a folder that root did not make: what the harness reads there as root (the
// kernel settings to restore, the folders it made) must be what it wrote.
func rootsOwn(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || !fi.IsDir() || st.Uid != 0 {
		return fmt.Errorf("%s is not a folder of root's: it is left alone, and no cluster starts until whoever made it removes it", dir)
	}
	return nil
}

// killNamed kills the processes whose command line names a path under dir: what a test started
// beside the cluster with its files there (the registry, mailpit) and that outlived it, as a
// Ctrl-C leaves them. The cgroups hold the cluster's own.
func killNamed(dir string) error {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return err
	}
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == self {
			continue
		}
		if cmdline, err := os.ReadFile(p); err == nil && strings.Contains(string(cmdline), dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// mountedUnder says whether anything is mounted under dir.
func mountedUnder(dir string) bool {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	return err != nil || strings.Contains(string(mounts), " "+dir+"/")
}

// unmountUnder unmounts every mount point under dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	_ = f.Close()
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Folders outside Dir that the daemons write to whatever they are configured with: the kubelets
// link their containers' logs in /var/log/containers and put the device manager's socket in
// /var/lib/kubelet/device-plugins; containerd's shims listen in /run/containerd/s; the CNI library
// caches results in /var/lib/cni/results. sweep removes what this harness's daemons wrote there,
// and a folder that did not exist before the run.
const (
	containerLogLinks = "/var/log/containers"
	devicePlugins     = "/var/lib/kubelet/device-plugins"
	shimSockets       = "/run/containerd/s"
	cniResults        = "/var/lib/cni/results"
)

// hostFolders are the folders above, each after the folders it is in, as they are made, and
// what iptables and `ip netns` make on first use: iptables's lock file, and /run/netns, which
// `ip netns add` mounts on itself.
var hostFolders = []string{containerLogLinks, "/var/lib/kubelet", devicePlugins, "/run/containerd", shimSockets, "/var/lib/cni", cniResults, xtablesLock, netnsFolder}

const (
	xtablesLock = "/run/xtables.lock"
	netnsFolder = "/run/netns"
)

// HostState is what a run must leave on the machine as it found it, outside the names it owns:
// the folders the daemons write to and what they hold, and the kernel settings the kubelets
// change.
func HostState() []string {
	var state []string
	for _, f := range hostFolders {
		entries, err := os.ReadDir(f)
		if _, statErr := os.Stat(f); statErr == nil {
			state = append(state, f)
		}
		if err == nil {
			for _, e := range entries {
				state = append(state, filepath.Join(f, e.Name()))
			}
		}
	}
	for _, k := range kubeletSysctls {
		v, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		state = append(state, k+"="+strings.TrimSpace(string(v)))
	}
	return state
}

// removeHostFiles removes what the run's daemons wrote outside dir, and the folders of
// hostFolders that did not exist before it.
func removeHostFiles(dir string) error {
	s, err := readSaved(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // the run stopped before it started anything
	}
	if err != nil {
		return err
	}
	var errs []error
	remove := func(path string) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if entries, err := os.ReadDir(containerLogLinks); err == nil {
		for _, e := range entries {
			link := filepath.Join(containerLogLinks, e.Name())
			if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, dir+"/") {
				remove(link)
			}
		}
	}
	for socket, sandboxes := range sandboxIDs(dir) {
		for _, id := range sandboxes {
			// A shim's socket is named by the hash of containerd's socket, the namespace and
			// the sandbox, which is how containerd finds it again.
			remove(filepath.Join(shimSockets, fmt.Sprintf("%x", sha256.Sum256([]byte(filepath.Join(socket, "k8s.io", id))))))
			results, _ := filepath.Glob(filepath.Join(cniResults, "*-"+id+"-*"))
			for _, r := range results {
				remove(r)
			}
		}
	}
	if !s.Existed["/var/lib/kubelet"] {
		remove(filepath.Join(devicePlugins, "kubelet.sock"))
	}
	if !s.Existed[netnsFolder] {
		if entries, err := os.ReadDir(netnsFolder); err == nil && len(entries) == 0 {
			_ = syscall.Unmount(netnsFolder, syscall.MNT_DETACH)
		}
	}
	for i := len(hostFolders) - 1; i >= 0; i-- {
		if !s.Existed[hostFolders[i]] {
			_ = os.Remove(hostFolders[i]) // only if empty: something else may have written there since
		}
	}
	return errors.Join(errs...)
}

// sandboxIDs are the pod sandboxes of each node's containerd, by its socket.
func sandboxIDs(dir string) map[string][]string {
	ids := map[string][]string{}
	nodes, _ := filepath.Glob(filepath.Join(dir, "*", "containerd"))
	for _, n := range nodes {
		entries, _ := os.ReadDir(filepath.Join(n, "root", "io.containerd.grpc.v1.cri", "sandboxes"))
		for _, e := range entries {
			socket := filepath.Join(n, "containerd.sock")
			ids[socket] = append(ids[socket], e.Name())
		}
	}
	return ids
}

// saved is what the host had before a run, for sweep to put back.
type saved struct {
	Sysctls map[string]string
	// Existed says which of hostFolders existed.
	Existed map[string]bool
}

// kubeletSysctls are the kernel settings every kubelet sets at start (its "kernel tunables").
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func savedFile(dir string) string { return filepath.Join(dir, "host.json") }

// saveHost records the kernel settings the kubelets will change, and which of hostFolders exist.
func saveHost(dir string) error {
	s := saved{Sysctls: map[string]string{}, Existed: map[string]bool{}}
	for _, k := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return err
		}
		s.Sysctls[k] = strings.TrimSpace(string(v))
	}
	for _, f := range hostFolders {
		_, err := os.Stat(f)
		s.Existed[f] = err == nil
	}
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(savedFile(dir), data, 0o600)
}

func readSaved(dir string) (saved, error) {
	var s saved
	data, err := os.ReadFile(savedFile(dir))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(data, &s)
}

func restoreSysctls(dir string) error {
	s, err := readSaved(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// Only the settings the kubelets change, and only to a number, whatever the file says.
	var errs []error
	for _, k := range kubeletSysctls {
		v, ok := s.Sysctls[k]
		if !ok {
			continue
		}
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			errs = append(errs, fmt.Errorf("not restoring %s to %q: not a number", k, v))
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644))
	}
	return errors.Join(errs...)
}

// Leftovers lists what a run left on the machine: network namespaces, links, cgroups, mounts,
// processes and files of the harness's names. Empty after Down.
func Leftovers() []string {
	var left []string
	for _, ns := range hostNetns() {
		left = append(left, "network namespace "+ns)
	}
	for _, l := range hostLinks() {
		left = append(left, "link "+l)
	}
	hs, _ := hierarchies()
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, cgroupName)); err == nil {
			left = append(left, "cgroup "+filepath.Join(h, cgroupName))
		}
	}
	if mountedUnder(Dir) {
		left = append(left, "mounts under "+Dir)
	}
	if _, err := os.Stat(Dir); err == nil {
		left = append(left, "folder "+Dir)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if cmdline, err := os.ReadFile(p); err == nil && strings.Contains(string(cmdline), Dir) {
			left = append(left, "process "+strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "\x00", " "))
		}
	}
	return left
}
