//! PostgreSQL's side of exports read a page at a time and of runs stored together.

use super::{connection_lost, try_store, Pg, COLUMNS};
use crate::rows::{NewRun, RunFilter, StoredRun};
use crate::{StoreError, Stored};

impl Pg {
    /// [`crate::rows::span`] here.
    pub fn span(&self, f: &RunFilter) -> Result<Option<(i64, i64)>, StoreError> {
        let limit = f.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let sql = "SELECT min(id), max(id) FROM (SELECT id FROM runs \
             WHERE ($1::text IS NULL OR label = $1) AND ($2::text IS NULL OR repeat_group = $2) \
             ORDER BY id DESC LIMIT $3) AS newest";
        let rows = self.query(sql, &[&f.label, &f.group, &limit])?;
        let r = rows.first();
        let get = |i| r.and_then(|r| r.try_get::<_, Option<i64>>(i).ok().flatten());
        Ok(get(0).zip(get(1)))
    }

    /// [`crate::rows::page`] here.
    pub fn page(
        &self,
        f: &RunFilter,
        after: i64,
        last: i64,
        n: u32,
    ) -> Result<Vec<StoredRun>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS}, result_json FROM runs \
             WHERE ($1::text IS NULL OR label = $1) AND ($2::text IS NULL OR repeat_group = $2) \
             AND id > $3 AND id <= $4 ORDER BY id LIMIT $5"
        );
        self.query(&sql, &[&f.label, &f.group, &after, &last, &i64::from(n)])?
            .iter()
            .map(|r| self.stored_from(r))
            .collect()
    }

    /// Stores runs in one transaction (each its own savepoint within it): one commit for
    /// the lot. A connection found lost is opened again and the whole batch tried once more,
    /// safe by the run keys as [`Pg::store_run`] is.
    pub(crate) fn store_runs(&mut self, runs: &[NewRun<'_>]) -> Result<Vec<Stored>, StoreError> {
        if self.client.get_mut().is_closed() {
            self.reconnect()?;
        }
        let attempt = |client: &mut postgres::Client| -> Result<Vec<Stored>, postgres::Error> {
            let mut tx = client.transaction()?;
            let mut out = Vec::with_capacity(runs.len());
            for run in runs {
                out.push(try_store(&mut tx, run)?);
            }
            tx.commit()?;
            Ok(out)
        };
        let result = match attempt(self.client.get_mut()) {
            Err(e) if connection_lost(&e) => {
                self.reconnect()?;
                attempt(self.client.get_mut())
            }
            other => other,
        };
        result.map_err(|e| self.err(&e))
    }
}
