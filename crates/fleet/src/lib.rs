//! Test plans over many wirerate agents (pScheduler's job, in small): a plan file names the
//! agents (`wirerate serve --allow-third-party` on each host) and a matrix of pairs; every
//! test is a third-party test (the agent on FROM tests towards TO); the tests of a plan run
//! are rows of a PostgreSQL work queue that any number of controllers share; every result
//! is stored in the results database with the plan's label and pair.
//!
//! Promises:
//! - A test runs once, however many controllers work the plan; a controller that dies
//!   loses its claims when their lease expires, and another takes them over.
//! - A host takes part in one test at a time (its throughput slot), across all plans.
//! - A test that fails (agent down, refused, a broken stream) is recorded with its reason,
//!   and the rest of the plan goes on.
//!
//! [`plan`] and [`schedule`] are pure; [`queue`] speaks SQL; [`runner`] opens sockets and
//! threads; [`rounds`] runs a plan round after round on its schedule.

#![forbid(unsafe_code)]

pub mod plan;
pub mod queue;
pub mod rounds;
pub mod runner;
pub mod schedule;

pub use plan::Plan;

/// Why a plan could not be read, queued or run.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("plan: {0}")]
    Plan(String),
    #[error("plan queue: {0}")]
    Queue(String),
    #[error("results database: {0}")]
    Store(String),
}
