//! Behaviour of the metadata state machine, through its public API only.
//!
//! One test binary (to keep links few): unit tests of each rule, a naive
//! `BTreeMap` model of the namespace, and property tests of the state
//! machine's contract (atomic failures, deterministic replay, invariants).

mod checkpoints;
mod common;
mod inline;
mod inodes;
mod membership;
mod model;
mod namespace;
mod props;
mod regions;
mod rename;
mod replication;
mod setup;
mod snapshots;
mod txns;
mod under;
mod update;
mod write_modes;
