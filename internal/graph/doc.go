// Package graph is what the rest of credwatch knows of Microsoft Graph: the credentials of an
// application and its service principal, as plain values. The SDK-backed client lives in
// graph/msgraph, the only package that imports msgraph-sdk-go, which takes minutes to compile;
// everything else depends on this small package and builds in seconds.
package graph
