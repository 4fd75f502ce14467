// Package msgraph reads and rotates credentials in Microsoft Graph with msgraph-sdk-go. It is the only
// package that imports the SDK, whose size makes it slow to compile, and it turns SDK errors into
// azerr.Error so that nothing else needs to know the SDK's types.
package msgraph
