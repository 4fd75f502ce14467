// Package controllers holds credwatch's reconcilers. A reconcile runs an ordered list of named
// steps of one signature and writes status once; what to decide lives in internal/policy, what to
// say in internal/notify/compose, and Azure is reached through clients bound to one identity and
// one target (internal/azure/clients), so that nothing here holds a credential.
package controllers
