package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// build compiles the operator, printing a line every hundred packages so a first build that
// takes minutes shows it is moving.
func build(ctx context.Context, out io.Writer, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-v", "-o", bin, "./cmd")
	cmd.Dir = repoRoot()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for n := 1; sc.Scan(); n++ {
			lines = append(lines, sc.Text())
			if n%100 == 0 {
				fmt.Fprintf(out, "    ... %d packages compiled\n", n)
			}
		}
	}()
	err := cmd.Wait()
	_ = pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("go build ./cmd: %w\n%s", err, strings.Join(lines, "\n"))
	}
	return nil
}

// startOperator runs the operator binary; the function it returns stops it as Kubernetes would,
// with SIGTERM and then, after the grace period, SIGKILL.
func startOperator(bin string, args, env []string, logFile string) (func(), error) {
	log, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = log.Close()
	}, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// repoRoot is the repository the demo runs in: `go run ./test/demo` starts there.
func repoRoot() string {
	wd, _ := os.Getwd()
	for dir := wd; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err == nil {
			return dir
		}
	}
	return wd
}

func kubectl(out io.Writer, kubeconfig string, args ...string) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(out, "  (kubectl: %v)\n", err)
	}
}

func printMetrics(out io.Writer, url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "credwatch_credential_expiration") || strings.HasPrefix(l, "credwatch_graph_requests_total") ||
			strings.HasPrefix(l, "credwatch_aks_cluster_info") ||
			strings.HasPrefix(l, "credwatch_watch_ready_status") && strings.HasSuffix(l, " 1") {
			lines = append(lines, "  "+l)
		}
	}
	sort.Strings(lines)
	fmt.Fprintln(out, strings.Join(lines, "\n"))
	return sc.Err()
}
