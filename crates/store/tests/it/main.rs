//! The store's tests, in one test binary: SQLite (`store`), PostgreSQL (`pg`), a writer
//! killed mid-write (`crash`), and the checks both backends share (`shared`).

mod shared;

mod crash;
mod pg;
mod store;
