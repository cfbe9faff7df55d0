// Package cluster is what several rsql instances sharing a Postgres checkpoint store
// (state.PostgresCheckpointStore) agree on without any engine: who is a member and which
// unit of a job is whose.
//
//   - Membership: Join joins under a stable name (InstanceName keeps it in the data
//     directory), Renew renews the lease every tick (joining again if it expired), and
//     Members/Live tell the live members as of the last Refresh.
//   - CatalogSync keeps the engine's catalog and the shared one the same; the engine hands
//     it its catalog as the Catalog interface (a snapshot and a replace), so this package
//     never sees the catalog's types.
//   - Assign divides a job's units ((stage, split) pairs, exec.Unit) among the live members,
//     each stage's evenly and the same on every member; SortUnits, UnitNames and SplitLess
//     order and name them.
//
// Import rule: this package imports exec (units) and state (the shared store), never
// server; server's clusterNode (server/cluster.go, cluster_units.go) owns the units it
// runs, their hand-over and the commits through the shared store, and uses this package
// for the rest. docs/guarantees.md, "Several instances", states what holds.
package cluster
