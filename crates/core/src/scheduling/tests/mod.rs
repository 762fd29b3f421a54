//! Scheduler tests: one module per constraint kind (positive and negative cases, the negative
//! ones checking the reason text), plus property tests over random snapshots.

mod constraints;
mod explain;
mod properties;
mod repack;
mod topology;
