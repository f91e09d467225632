//! Tests against the local control plane built from upstream's Go modules (`make e2e`): real
//! kube-apiserver, kube-controller-manager, kube-scheduler, kwok, JobSet's and Trainer's
//! controllers, and trainguard registered from deploy/. Built only with the `e2e` feature, so
//! `make test` stays cluster-free; `make e2e` starts the plane, runs these one at a time, and
//! stops it.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a panic is its failure report")]

mod cluster;
mod controller;
mod installed;
mod kinds;
mod kueue;
mod leadership;
mod node_loss;
mod oracle_replay;
mod policy;
mod real_node;
mod validate;
mod webhook;
