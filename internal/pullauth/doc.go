// Package pullauth tells apart the two failures behind pods stuck on "unauthorized:
// authentication required" from a registry: the cluster's credential refused (every node that
// pulls fails: an expired service principal secret), and one node's kubelet that disabled its
// credential provider at start-up (that node fails while the others pull). It reads the pull
// events and pod statuses kubelets report and keeps a bounded, per-registry, per-node record of
// the latest refused and successful pull over a sliding window. Its Watcher lists and watches
// those events, pods and the cluster's nodes without keeping them, and names the registries whose
// incident changed.
package pullauth
