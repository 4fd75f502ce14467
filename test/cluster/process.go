package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is a daemon the harness started, its output in a log file of its own.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start starts a daemon in the pids cgroup of group, so that teardown finds it and everything it
// forks (containerd's shims and the containers under them outlive containerd), and in the network
// namespace at netns, or the host's if it is empty. A shell joins the cgroup before the daemon
// starts, so that nothing it forks escapes; nsenter enters only the network namespace, so that
// kubelet and containerd see the same mounts. A daemon is killed if the test process dies.
func (c *Cluster) start(name, group, netns string, argv ...string) (*process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Down has begun (a Ctrl-C while Up runs): nothing more is started behind its back.
	if c.stopping {
		return nil, fmt.Errorf("not starting %s: the cluster is being removed", name)
	}
	if err := makeCgroup(group); err != nil {
		return nil, err
	}
	logFile := filepath.Join(c.dir, "logs", name+".log")
	// Appended to: a restarted daemon's log follows its first run's.
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := []string{"-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", pidsCgroup(group)}
	if netns != "" {
		args = append(args, "nsenter", "--net="+netns, "--")
	}
	cmd := exec.Command("/bin/sh", append(args, argv...)...)
	cmd.Stdout, cmd.Stderr = f, f
	// A process group of its own, so that a Ctrl-C at the terminal reaches only the harness,
	// which stops the daemons in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	for i, old := range c.procs {
		if old.name == name { // a restart: the exited run is no longer the cluster's
			c.procs[i] = p
			return p, nil
		}
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// exited says whether the daemon has stopped, and how.
func (p *process) exited() (bool, string) {
	select {
	case <-p.done:
		return true, p.cmd.ProcessState.String()
	default:
		return false, ""
	}
}

// stop asks the daemon to stop, and kills it if it has not within grace.
func (p *process) stop(grace time.Duration) {
	if done, _ := p.exited(); done {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// LogTails is the last lines of every daemon's log, for a test that failed to show.
func (c *Cluster) LogTails(lines int) string {
	var b strings.Builder
	for _, p := range c.procs {
		data, err := os.ReadFile(p.log)
		if err != nil {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.name, p.log, strings.Join(all, "\n"))
	}
	return b.String()
}
