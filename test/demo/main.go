// Command demo shows credwatch at work without Azure or a cluster: it starts a local control
// plane (the kube-apiserver and etcd the tests use), the Microsoft Graph, Entra ID and Resource
// Manager fakes seeded with a few service principals, a real SMTP server and Slack's test server,
// runs the operator against them, applies CredentialWatches, and shows what a person would see:
// kubectl get cw, the events, the alerts that arrived, the metrics. `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	once := flag.Bool("once", false, "show what happened and stop, instead of running until Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, os.Stdout, *once); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
