// Package alerting decides which alerts a watch owes its channels: the schedule of reminders
// before a credential expires and after, the subjects of the ledger in status.alerts, and that
// ledger's only writers. It serves every kind whose watch speaks of one application
// (servicePrincipal, aksCluster, serviceAccountIssuer); the aksFleet kind plans its own
// messages. What an alert says is notify/compose's; alerting/delivery sends it.
package alerting
