//! Scheduler tests that need code: property tests over random snapshots, comparisons of two
//! solves, options no case file sets and internal functions. The cases that are an input and
//! the placement it must give are data, `fixtures/scheduling/*.yaml`, run by `nodewright-api`'s
//! `scheduling_cases` test.

mod deleting;
mod explain;
mod properties;
mod repack;
mod topology;
