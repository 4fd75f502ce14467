// Package pullauth tells apart the two failures behind pods stuck on "unauthorized:
// authentication required" from a registry: the cluster's credential refused (every node that
// pulls fails: an expired service principal secret), and one node's kubelet that disabled its
// credential provider at start-up (that node fails while the others pull). It reads the pull
// events and pod statuses kubelets report and keeps a bounded, per-registry, per-node record of
// the latest refused and successful pull over a sliding window. An event counts only when the
// status of the pod it names, which only that node's kubelet writes, bears it out: anyone may
// create events. Its Watcher lists and watches those events, pods and the cluster's nodes,
// keeping of them only what corroborates events, within bounds, and names the registries whose
// incident changed.
package pullauth
