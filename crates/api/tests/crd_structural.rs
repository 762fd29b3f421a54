//! The CRDs nodewright prints pass the API server's create-time checks as the offline checker
//! models them: structural schemas, compilable patterns, CEL rules that parse and type-check,
//! printer columns and names that fit together.
//!
//! Cost findings are reported but not asserted: the checker's cost model charges nested
//! comprehensions over bounded lists (the EC2NodeClass `networkInterfaces` uniqueness rules,
//! at most 150 items) far above what the API server's estimator does, so it is not yet a
//! reliable judge of the budget.

use nodewright_api::{crd, schema_check};

#[test]
fn every_generated_crd_is_structural_with_valid_cel() {
    for (name, crd) in crd::all() {
        let (cost, problems): (Vec<String>, Vec<String>) = schema_check::check_structural(&crd)
            .into_iter()
            .partition(|p| p.contains("estimated rule cost"));
        for c in &cost {
            eprintln!("{name}: cost estimate: {c}");
        }
        assert!(problems.is_empty(), "{name}:\n{}", problems.join("\n"));
    }
}
