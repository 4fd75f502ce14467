// Package target is what every kind of target shares with the reconciler that dispatches to it:
// how a failure becomes a watch's Ready reason, how a condition is written, and the narrow edge
// through which a kind raises events. Each kind lives in a package below this one
// (internal/target/aksfleet, ...), owning its reads, its evaluation, its wording and its alerts;
// docs/architecture.md says how to add one.
package target
