//! Offline checks that stand in for a Kubernetes API server: whether a CRD would be accepted
//! ([`check_structural`]) and whether an object would be accepted by a CRD's schema
//! ([`validate_object`], [`validate_against_crd`]), `x-kubernetes-validations` CEL rules included.

mod cel_env;

#[cfg(test)]
mod cel_env_tests;
