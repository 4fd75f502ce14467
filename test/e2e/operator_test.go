package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The operator's binary, built once for the package's tests, as a user builds it.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// operatorBinary builds ./cmd the first time a test asks for it.
func operatorBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "credwatch-e2e-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "credwatch")
		build := exec.Command("go", "build", "-o", built.path, "./cmd")
		build.Dir = repoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func repoRoot() string {
	root, _ := filepath.Abs("../..")
	return root
}

// needsControlPlane skips under -short, and fails without the envtest binaries.
func needsControlPlane(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the operator against envtest: skipped under -short")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
}

// kubectlFor returns kubectl on kubeconfig, run from the repository's root; it fails the test
// when kubectl does.
func kubectlFor(t *testing.T, kubeconfig string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// awaitEstablished waits up to 30 s until the API server serves each of crds. kubectl wait is
// not used: it fails at once on a CRD whose status has no conditions yet, which a large CRD just
// applied may not have.
func awaitEstablished(t *testing.T, kubeconfig string, crds ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, crd := range crds {
		for {
			cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "crd", crd, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			out, err := cmd.CombinedOutput()
			if err == nil && strings.TrimSpace(string(out)) == "True" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established within 30s: %v %s", crd, err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// startOperator starts bin with args and env, its output into logs; the test's end kills it if
// it still runs. exited tells how it ended.
func startOperator(t *testing.T, bin string, args, env []string, logs *bytes.Buffer) (op *exec.Cmd, exited chan error) {
	t.Helper()
	op = exec.Command(bin, args...)
	op.Env = append(os.Environ(), env...)
	op.Stdout, op.Stderr = logs, logs
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	done := make(chan struct{})
	go func() {
		exited <- op.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = op.Process.Kill()
			<-done
		}
	})
	return op, exited
}

// refusePulls has the registry refuse the pulls of a pod on each node, for want of credentials,
// as kubelets report it: the nodes, a pod on each waiting on the image, and each kubelet's event.
func refusePulls(t *testing.T, kubectl func(...string) string, dir, namespace string, nodes []string) {
	t.Helper()
	var objs strings.Builder
	for i, node := range nodes {
		fmt.Fprintf(&objs, `---
apiVersion: v1
kind: Node
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Pod
metadata: {name: api-%[2]d, namespace: %[3]s}
spec:
  nodeName: %[1]s
  containers: [{name: api, image: "myacr.azurecr.io/shop/api:1.4"}]
`, node, i, namespace)
	}
	apply(t, kubectl, dir, "pods.yaml", objs.String())
	for i := range nodes {
		// What the node's kubelet reports of the pod: its one container waiting on the pull.
		kubectl("patch", "pod", "-n", namespace, fmt.Sprintf("api-%d", i), "--subresource=status", "--type=merge", "-p",
			`{"status":{"containerStatuses":[{"name":"api","image":"myacr.azurecr.io/shop/api:1.4","imageID":"","ready":false,"restartCount":0,`+
				`"state":{"waiting":{"reason":"ErrImagePull","message":"failed to authorize: 401 Unauthorized"}}}]}}`)
	}
	objs.Reset()
	now := time.Now().UTC().Format(time.RFC3339)
	for i, node := range nodes {
		fmt.Fprintf(&objs, `---
apiVersion: v1
kind: Event
metadata: {name: api-%[2]d.pull, namespace: %[4]s}
involvedObject: {kind: Pod, namespace: %[4]s, name: api-%[2]d, apiVersion: v1}
reason: Failed
type: Warning
message: 'Failed to pull image "myacr.azurecr.io/shop/api:1.4": failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized'
source: {component: kubelet, host: %[1]s}
firstTimestamp: %[3]s
lastTimestamp: %[3]s
count: 1
`, node, i, now, namespace)
	}
	apply(t, kubectl, dir, "pulls.yaml", objs.String())
}

// apply writes manifest to dir/name and applies it.
func apply(t *testing.T, kubectl func(...string) string, dir, name, manifest string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl("apply", "-f", p)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
