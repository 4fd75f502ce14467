// Package aksfleet is the aksFleet target kind: it lists the AKS clusters of a tenant's
// subscriptions, reads the credentials of the service principals they sign in with, evaluates
// them against the clock, says so in status, events and its channels' messages, and keeps one
// aksCluster watch per cluster when the fleet asks for them. Azure, the API server and delivery
// are reached through the narrow interfaces of Fleet, which the reconciler provides.
package aksfleet
