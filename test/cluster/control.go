package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const apiPort = 6443

// APIServer is the API server's address, on the nodes' bridge.
func APIServer() string { return "https://" + net.JoinHostPort(HostIP, strconv.Itoa(apiPort)) }

// startControlPlane starts etcd, the API server, the controller manager and the scheduler, the
// way kubeadm configures them: client certificates for every component, Node and RBAC
// authorization, NodeRestriction, and service-account tokens signed with the cluster's key.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	if err := c.startEtcd(); err != nil {
		return err
	}
	if err := c.startAPIServer(); err != nil {
		return err
	}
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	for _, component := range []string{"kube-controller-manager", "kube-scheduler"} {
		if err := c.startComponent(component); err != nil {
			return err
		}
	}
	return nil
}

// startEtcd starts etcd on loopback, where any user of the machine could reach it: it talks only
// TLS and only to clients and peers with a certificate of the cluster's CA, as kubeadm's etcd
// does. Whoever could write to it could make themselves cluster admin, and the nodes run pods as
// the machine's root.
func (c *Cluster) startEtcd() error {
	cert, key, err := c.pki.issue("etcd", identity{name: "etcd", ips: []net.IP{net.ParseIP("127.0.0.1")}, dns: []string{"localhost"}})
	if err != nil {
		return err
	}
	client, peer := freePort(), freePort()
	clientURL, peerURL := "https://127.0.0.1:"+client, "https://127.0.0.1:"+peer
	c.etcd = clientURL
	_, err = c.start("etcd", "control-plane", "", c.asset("etcd"),
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--cert-file="+cert, "--key-file="+key, "--client-cert-auth", "--trusted-ca-file="+c.pki.caFile(),
		"--peer-cert-file="+cert, "--peer-key-file="+key, "--peer-client-cert-auth", "--peer-trusted-ca-file="+c.pki.caFile(),
		// A test cluster's data is thrown away: fsync would only make it slower.
		"--unsafe-no-fsync")
	return err
}

func (c *Cluster) startAPIServer() error {
	cert, key, err := c.pki.issue("kube-apiserver", identity{
		name: "kube-apiserver",
		ips:  []net.IP{net.ParseIP(HostIP), net.ParseIP(kubernetesServiceIP), net.ParseIP("127.0.0.1")},
		dns:  []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
	})
	if err != nil {
		return err
	}
	// The API server's own client certificate for the kubelets' APIs (logs, exec), in the group
	// the kubelets' webhook authorization lets do everything, as kubeadm's is.
	kubeletCert, kubeletKey, err := c.pki.issue("apiserver-kubelet-client", identity{name: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}})
	if err != nil {
		return err
	}
	etcdCert, etcdKey, err := c.pki.issue("apiserver-etcd-client", identity{name: "kube-apiserver-etcd-client"})
	if err != nil {
		return err
	}
	_, err = c.start("kube-apiserver", "control-plane", "", c.asset("kube-apiserver"),
		"--etcd-servers="+c.etcd, "--etcd-cafile="+c.pki.caFile(), "--etcd-certfile="+etcdCert, "--etcd-keyfile="+etcdKey,
		"--bind-address="+HostIP, "--advertise-address="+HostIP, "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+cert, "--tls-private-key-file="+key, "--client-ca-file="+c.pki.caFile(),
		"--kubelet-client-certificate="+kubeletCert, "--kubelet-client-key="+kubeletKey,
		"--service-account-key-file="+c.saKey, "--service-account-signing-key-file="+c.saKey,
		"--service-account-issuer="+c.Issuer,
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--profiling=false")
	return err
}

// waitAPIServer waits until the API server is ready and has made its default RBAC, which every
// component's client needs.
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return c.poll(ctx, "the API server to be ready", func() (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// startComponent starts the controller manager or the scheduler with a client certificate of
// its own name, which the API server's default RBAC binds to its role.
func (c *Cluster) startComponent(name string) error {
	kubeconfig, err := c.componentKubeconfig(name, "system:"+name, nil)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=" + freePort(),
	}
	if name == "kube-controller-manager" {
		args = append(args,
			// Each controller signs in as its own ServiceAccount, as on every real cluster, so
			// that RBAC is exercised as users meet it.
			"--use-service-account-credentials=true",
			"--service-account-private-key-file="+c.saKey,
			// Published in every namespace as kube-root-ca.crt, which in-cluster clients trust.
			"--root-ca-file="+c.pki.caFile())
	}
	_, err = c.start(name, "control-plane", "", append([]string{c.asset(name)}, args...)...)
	return err
}

// componentKubeconfig writes a kubeconfig for a client certificate of user in groups.
func (c *Cluster) componentKubeconfig(file, user string, groups []string) (string, error) {
	cert, key, err := c.pki.issue(file, identity{name: user, groups: groups})
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["credwatch"] = &clientcmdapi.Cluster{Server: APIServer(), CertificateAuthority: c.pki.caFile()}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["credwatch"] = &clientcmdapi.Context{Cluster: "credwatch", AuthInfo: user}
	cfg.CurrentContext = "credwatch"
	path := filepath.Join(c.dir, file+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// freePort is a port nothing listens on now, on loopback.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("no free port on loopback: %v", err))
	}
	defer func() { _ = l.Close() }()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
