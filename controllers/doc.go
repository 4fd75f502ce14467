// Package controllers holds credwatch's reconcilers. They sequence named steps and write status
// once per reconcile; what to decide lives in internal/policy and how to talk to Azure lives
// behind the small interfaces declared here.
package controllers
