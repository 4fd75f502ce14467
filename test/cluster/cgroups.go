package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The harness's processes and every pod of its kubelets live in cgroups under /credwatch, in
// every cgroup v1 hierarchy: the kubelets' cgroup roots are /credwatch/<node>. Teardown kills
// what is left in them and removes them, this run's or a killed run's.
const (
	cgroupFS   = "/sys/fs/cgroup"
	cgroupName = "credwatch"
)

// checkCgroupV1 refuses a machine on the unified hierarchy: the harness places and finds
// processes by the v1 pids hierarchy, which is what the test machines have.
func checkCgroupV1() error {
	if _, err := os.Stat(filepath.Join(cgroupFS, "cgroup.controllers")); err == nil {
		return errors.New("this machine uses cgroup v2; the test cluster supports the cgroup v1 hierarchy of the test machines only")
	}
	if _, err := os.Stat(filepath.Join(cgroupFS, "pids")); err != nil {
		return fmt.Errorf("no cgroup v1 pids hierarchy at %s/pids: %w", cgroupFS, err)
	}
	return nil
}

func pidsCgroup(group string) string { return filepath.Join(cgroupFS, "pids", cgroupName, group) }

// hierarchies are the mount points of the cgroup v1 hierarchies.
func hierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// mountinfo: ID parent major:minor root mountpoint options ... - fstype source super
		fields := strings.Fields(s.Text())
		for i, field := range fields {
			if field == "-" && i+1 < len(fields) && fields[i+1] == "cgroup" {
				out = append(out, fields[4])
			}
		}
	}
	return out, s.Err()
}

// makeCgroup makes /credwatch/<group> in every hierarchy, as the kubelet requires of its cgroup
// root.
func makeCgroup(group string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := os.MkdirAll(filepath.Join(h, cgroupName, group), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// killCgroups kills every process in the pids cgroups under /credwatch until none is left;
// processes may still be forking while the first ones die.
func killCgroups() error {
	root := filepath.Join(cgroupFS, "pids", cgroupName)
	for attempt := 0; attempt < 100; attempt++ {
		pids := cgroupPIDs(root)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("processes still running in %s: %v", root, cgroupPIDs(root))
}

func cgroupPIDs(root string) []int {
	var pids []int
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroups removes /credwatch and the cgroups under it from every hierarchy, deepest first.
func removeCgroups() error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var dirs []string
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, cgroupName), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		// A memory cgroup can stay busy for a moment after its last process was killed.
		err := syscall.Rmdir(d)
		for attempt := 0; errors.Is(err, syscall.EBUSY) && attempt < 50; attempt++ {
			time.Sleep(20 * time.Millisecond)
			err = syscall.Rmdir(d)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
