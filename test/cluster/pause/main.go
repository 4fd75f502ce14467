// Command pause is the sandbox image's process for the test cluster's nodes: it holds a pod's
// namespaces open and does nothing until it is told to stop, as registry.k8s.io/pause does.
// It is built here because no image can be pulled on the machines the tests run on.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
