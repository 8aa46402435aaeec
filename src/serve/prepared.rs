//! Prepared statements: the SQL and its bound parameters, kept under a random handle until
//! the client closes it. ADBC and JDBC prepare every statement they run, so a handle lives
//! for one statement in practice; the count is bounded so that clients that never close
//! cannot grow the server without limit.

use std::collections::HashMap;
use std::sync::Mutex;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{ParamValues, ScalarValue};
use tonic::Status;

/// Prepared statements kept at once (all clients together).
const MAX_PREPARED: usize = 4096;

/// One prepared statement.
#[derive(Clone)]
pub(super) struct Prepared {
    pub(super) sql: String,
    /// The values bound by the last `DoPut`, in placeholder order (`$1`, `$2`, ...).
    pub(super) parameters: Option<ParamValues>,
}

/// The prepared statements of a server.
#[derive(Default)]
pub(super) struct PreparedStatements {
    statements: Mutex<HashMap<Vec<u8>, Prepared>>,
}

impl PreparedStatements {
    /// Keeps `sql`; returns its new handle.
    pub(super) fn create(&self, sql: String) -> Result<Vec<u8>, Status> {
        let mut statements = self.lock();
        if statements.len() >= MAX_PREPARED {
            return Err(Status::resource_exhausted(format!(
                "{MAX_PREPARED} prepared statements are open: close some \
                 (ClosePreparedStatement) before preparing more"
            )));
        }
        let mut handle = [0u8; 16];
        getrandom::getrandom(&mut handle)
            .map_err(|e| Status::internal(format!("no random handle: {e}")))?;
        let handle: Vec<u8> = handle
            .iter()
            .flat_map(|b| format!("{b:02x}").into_bytes())
            .collect();
        statements.insert(
            handle.clone(),
            Prepared {
                sql,
                parameters: None,
            },
        );
        Ok(handle)
    }

    pub(super) fn get(&self, handle: &[u8]) -> Result<Prepared, Status> {
        self.lock()
            .get(handle)
            .cloned()
            .ok_or_else(|| unknown(handle))
    }

    /// Binds the values of the first row of `batch` (ADBC sends one row, columns "0", "1",
    /// ... in placeholder order).
    pub(super) fn bind(&self, handle: &[u8], batch: Option<&RecordBatch>) -> Result<(), Status> {
        let parameters = match batch {
            None => None,
            Some(batch) => Some(first_row(batch)?),
        };
        let mut statements = self.lock();
        let prepared = statements.get_mut(handle).ok_or_else(|| unknown(handle))?;
        prepared.parameters = parameters;
        Ok(())
    }

    pub(super) fn close(&self, handle: &[u8]) -> Result<(), Status> {
        self.lock()
            .remove(handle)
            .map(|_| ())
            .ok_or_else(|| unknown(handle))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Prepared>> {
        self.statements.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn unknown(handle: &[u8]) -> Status {
    Status::not_found(format!(
        "no prepared statement '{}' (closed, or never prepared here)",
        String::from_utf8_lossy(&handle[..handle.len().min(64)])
    ))
}

/// The values of a one-row batch, as positional parameters.
fn first_row(batch: &RecordBatch) -> Result<ParamValues, Status> {
    if batch.num_rows() != 1 {
        return Err(Status::invalid_argument(format!(
            "parameters are bound one row at a time; {} rows were sent",
            batch.num_rows()
        )));
    }
    let values = (batch.columns().iter())
        .map(|column| ScalarValue::try_from_array(column, 0))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Status::invalid_argument(format!("a parameter value: {e}")))?;
    Ok(ParamValues::List(
        values.into_iter().map(Into::into).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, StringArray};

    use super::*;

    #[test]
    fn handles_bind_one_row_and_close() {
        let store = PreparedStatements::default();
        let handle = store.create("SELECT $1, $2".into()).unwrap();
        assert_eq!(handle.len(), 32);
        let batch = RecordBatch::try_from_iter([
            ("0", Arc::new(Int64Array::from(vec![7])) as _),
            ("1", Arc::new(StringArray::from(vec!["a"])) as _),
        ])
        .unwrap();
        store.bind(&handle, Some(&batch)).unwrap();
        let Some(ParamValues::List(values)) = store.get(&handle).unwrap().parameters else {
            panic!("no parameters bound");
        };
        assert_eq!(values.len(), 2);
        let two = batch.slice(0, 0);
        let err = store.bind(&handle, Some(&two)).unwrap_err();
        assert!(err.message().contains("0 rows"), "{err}");
        store.close(&handle).unwrap();
        assert_eq!(
            store.get(&handle).err().unwrap().code(),
            tonic::Code::NotFound
        );
        assert!(store.close(b"nope").is_err());
    }
}
