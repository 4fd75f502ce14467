// Package azerr sorts the failures of Azure's APIs (Microsoft Graph, Resource Manager, Entra ID
// sign-in) into the few kinds that call for different handling, so that the controllers decide
// on kinds and never on an SDK's error types.
package azerr
