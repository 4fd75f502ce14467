// Package policy holds the decisions every kind of target shares, as pure functions of a watch's
// spec, its status and the current time: what state a credential is in and when it next changes,
// which credentials renew others, what breaks the hygiene policy, a tenant's view at one instant,
// the rotation's settings, names and windows, schedules and backoffs. What belongs to one kind
// lives with it (internal/target/<kind>); what the alerts owe their channels is
// internal/alerting's. Nothing here does I/O, so every rule is table-tested.
package policy
