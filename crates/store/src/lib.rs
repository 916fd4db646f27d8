//! Results history of wirerate, kept in SQLite.
