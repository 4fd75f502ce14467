package cluster

import (
	"errors"
	"io"
	"net"
)

// Expose relays connections to HostIP:<port> to target, a server a test runs on the machine's
// loopback (mailpit, slacktest), so that pods reach it; it stops at Down. It returns the
// address pods connect to.
func (c *Cluster) Expose(target string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(HostIP, "0"))
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.relays = append(c.relays, l)
	c.mu.Unlock()
	go func() {
		for {
			in, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			go relay(in, target)
		}
	}()
	return l.Addr().String(), nil
}

// relay copies both ways between in and a new connection to target, until either side ends.
func relay(in net.Conn, target string) {
	defer func() { _ = in.Close() }()
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer func() { _ = out.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}
