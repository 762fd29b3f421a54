//! What several of the command's integration tests share: Karpenter's metric families and the
//! check of a scrape against them ([`parity`]), for `observability.rs` and the cluster suite.

pub mod parity;
