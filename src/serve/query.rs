//! One client statement, from SQL to the stream `DoGet` sends: admitted (at most
//! `--max-concurrent-queries` at once), planned in a copy of the server's session and
//! checked ([`policy`](super::policy)), run until its deadline (`--query-timeout`), its
//! batches streamed as the plan makes them, and one log line when it ends.
//!
//! The stream owns the plan's stream, the admission permit and the log line: a client that
//! disconnects or cancels drops it, which stops the scans and returns the query's memory to
//! the pool at once.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ParamValues;
use datafusion::execution::{SendableRecordBatchStream, SessionState, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use futures::{FutureExt, Stream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

use super::cancel::{Registered, Running};
use super::placeholders::{bind, number_placeholders};
use super::{policy, ServeSettings};

/// Characters of a statement a log line shows.
const LOGGED_SQL_CHARS: usize = 200;

/// What statements of all clients share: the server's session, its settings, admission.
pub(super) struct Queries {
    ctx: SessionContext,
    /// What each statement's session starts from.
    client_state: SessionState,
    settings: ServeSettings,
    admission: Option<Arc<Semaphore>>,
    /// The answers being sent, for `CancelFlightInfo`.
    running: Arc<Running>,
}

impl Queries {
    pub(super) fn new(ctx: SessionContext, settings: ServeSettings) -> Self {
        let admission = (settings.max_concurrent_queries).map(|n| Arc::new(Semaphore::new(n)));
        // The table functions that read a location of the caller's choosing, with options of
        // its choosing (`icechunk_log`), are not offered to clients. The catalog and the
        // memory pool stay the server's (shared, not copied).
        let state = ctx.state();
        let mut functions = state.table_functions().clone();
        for kind in crate::table_kinds() {
            for function in (kind.functions)() {
                functions.remove(function.0);
            }
        }
        let client_state = SessionStateBuilder::new_from_existing(state)
            .with_table_functions(functions)
            .build();
        Self {
            ctx,
            client_state,
            settings,
            admission,
            running: Arc::default(),
        }
    }

    /// Ends the answers being sent to `tickets` (a cancelled `FlightInfo`'s); how many.
    pub(super) fn cancel<'a>(&self, tickets: impl IntoIterator<Item = &'a [u8]>) -> usize {
        self.running.cancel(tickets)
    }

    pub(super) fn ctx(&self) -> &SessionContext {
        &self.ctx
    }

    /// A fresh session over the server's tables and memory pool: a client's `SET` stays in
    /// its statement.
    fn statement_context(&self) -> SessionContext {
        SessionContext::new_with_state(self.client_state.clone())
    }

    /// Plans `sql` and checks it may run: the plan whose schema `GetFlightInfo` reports.
    pub(super) async fn plan(&self, sql: &str) -> Result<LogicalPlan, Status> {
        self.plan_in(&self.statement_context(), sql).await
    }

    async fn plan_in(&self, ctx: &SessionContext, sql: &str) -> Result<LogicalPlan, Status> {
        let state = ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        let mut statement = (state.sql_to_statement(sql, &dialect)).map_err(|e| status_of(&e))?;
        number_placeholders(&mut statement)?;
        let plan = (state.statement_to_plan(statement).await).map_err(|e| status_of(&e))?;
        policy::check(&plan, &self.settings)?;
        Ok(plan)
    }

    /// Runs `sql` (with `parameters` bound) for `client`; the stream of its answer, which
    /// a `CancelFlightInfo` naming `ticket` ends.
    pub(super) async fn run(
        &self,
        sql: &str,
        parameters: Option<ParamValues>,
        client: String,
        ticket: Option<Vec<u8>>,
    ) -> Result<QueryStream, Status> {
        let permit = match &self.admission {
            None => None,
            Some(semaphore) => Some(Arc::clone(semaphore).try_acquire_owned().map_err(|_| {
                Status::resource_exhausted(format!(
                    "the server runs at most {} queries at once (--max-concurrent-queries): \
                     try again when one has finished",
                    self.settings.max_concurrent_queries.unwrap_or_default()
                ))
            })?),
        };
        let cancel = ticket.map(|ticket| self.running.register(ticket));
        let log = QueryLog::new(client, sql);
        let deadline = self.settings.query_timeout.map(|t| Instant::now() + t);
        let start = self.start(sql, parameters);
        let stream = match deadline {
            None => start.await,
            Some(at) => match tokio::time::timeout_at(at.into(), start).await {
                Ok(started) => started,
                Err(_) => Err(timed_out(self.settings.query_timeout)),
            },
        };
        let stream = match stream {
            Ok(stream) => stream,
            Err(status) => {
                log.end(&format!("refused or failed: {}", status.message()));
                return Err(status);
            }
        };
        let (stream, schema) = stream;
        Ok(QueryStream {
            schema,
            inner: stream,
            deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at.into()))),
            timeout: self.settings.query_timeout,
            _permit: permit,
            cancel,
            log: Some(log),
            done: false,
        })
    }

    /// The statement's stream, and the schema its answer is sent with: the plan's, which
    /// `GetFlightInfo` reports (the stream's own may differ in what is nullable; a client
    /// such as ADBC refuses an answer whose schema is not the `FlightInfo`'s).
    async fn start(
        &self,
        sql: &str,
        parameters: Option<ParamValues>,
    ) -> Result<(SendableRecordBatchStream, SchemaRef), Status> {
        let ctx = self.statement_context();
        let mut plan = self.plan_in(&ctx, sql).await?;
        if let Some(parameters) = parameters {
            plan = bind(plan, parameters)?;
        }
        let created = policy::created_table(&plan);
        let frame = ctx.execute_logical_plan(plan).await;
        let frame = frame.map_err(|e| status_of(&e))?;
        if let Some(name) = created {
            policy::check_created(&ctx, name, &self.settings).await?;
        }
        let frame_schema = frame.schema().as_arrow().clone();
        let physical = frame.create_physical_plan().await;
        let physical = physical.map_err(|e| status_of(&e))?;
        if self.settings.allowed.restricts_locations() {
            // Tables a client reads were created by the operator, or by a client through
            // the checks above; DataFusion's own file scans are checked file by file.
            crate::cluster::check_served_plan(physical.as_ref(), &self.settings.allowed)
                .map_err(|e| Status::permission_denied(crate::Error::user_message(&e)))?;
        }
        let planned: SchemaRef = Arc::new(frame_schema);
        let stream = datafusion::physical_plan::execute_stream(physical, ctx.task_ctx())
            .map_err(|e| status_of(&e))?;
        let same_types = (planned.fields().len() == stream.schema().fields().len())
            && (planned.fields().iter().zip(stream.schema().fields()))
                .all(|(a, b)| a.data_type() == b.data_type());
        let schema = match same_types {
            true => planned,
            false => stream.schema(),
        };
        Ok((stream, schema))
    }
}

/// A statement's failure as the client sees it: one readable line, with the code that
/// says whose fault it is.
pub(super) fn status_of(error: &datafusion::error::DataFusionError) -> Status {
    use datafusion::error::DataFusionError as E;
    let message = crate::Error::user_message(error);
    match error.find_root() {
        E::SQL(..) | E::Plan(..) | E::SchemaError(..) | E::NotImplemented(..) => {
            Status::invalid_argument(message)
        }
        E::ResourcesExhausted(..) => Status::resource_exhausted(message),
        _ => Status::internal(message),
    }
}

fn timed_out(timeout: Option<Duration>) -> Status {
    Status::deadline_exceeded(format!(
        "the query ran longer than the server's --query-timeout ({} s)",
        timeout.unwrap_or_default().as_secs_f64()
    ))
}

/// An answer being streamed.
pub(super) struct QueryStream {
    schema: SchemaRef,
    inner: SendableRecordBatchStream,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    timeout: Option<Duration>,
    _permit: Option<OwnedSemaphorePermit>,
    /// Its entry among the answers a client may cancel.
    cancel: Option<Registered>,
    log: Option<QueryLog>,
    done: bool,
}

impl QueryStream {
    pub(super) fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn finish(&mut self, outcome: &str) {
        self.done = true;
        if let Some(log) = self.log.take() {
            log.end(outcome);
        }
    }
}

impl Stream for QueryStream {
    type Item = Result<RecordBatch, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(deadline) = self.deadline.as_mut() {
            if deadline.poll_unpin(cx).is_ready() {
                let status = timed_out(self.timeout);
                self.finish("timed out");
                return Poll::Ready(Some(Err(status)));
            }
        }
        let cancelled = (self.cancel.as_mut()).and_then(|c| c.cancelled.as_mut());
        if let Some(Poll::Ready(outcome)) = cancelled.map(|c| c.poll_unpin(cx)) {
            // Fired (a client cancelled) or closed (nobody can any more): polled no more.
            if let Some(cancel) = self.cancel.as_mut() {
                cancel.cancelled = None;
            }
            if outcome.is_ok() {
                self.finish("cancelled (CancelFlightInfo)");
                let status = Status::cancelled("the query was cancelled (CancelFlightInfo)");
                return Poll::Ready(Some(Err(status)));
            }
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(batch))) => {
                if let Some(log) = self.log.as_mut() {
                    log.rows += batch.num_rows() as u64;
                    log.bytes += arrow_bytes(&batch);
                }
                Poll::Ready(Some(Ok(batch)))
            }
            Poll::Ready(Some(Err(e))) => {
                let status = status_of(&e);
                self.finish(&format!("failed: {}", status.message()));
                Poll::Ready(Some(Err(status)))
            }
            Poll::Ready(None) => {
                self.finish("ok");
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for QueryStream {
    fn drop(&mut self) {
        // Dropped before its end: the client went away or cancelled.
        self.finish("cancelled by the client");
    }
}

/// The Arrow bytes of a batch's rows (slices counted as slices, unlike
/// `get_array_memory_size`, which counts a shared buffer for every batch sliced from it).
fn arrow_bytes(batch: &RecordBatch) -> u64 {
    (batch.columns().iter())
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as u64)
        .sum()
}

/// The line a statement leaves on stderr when it ends.
struct QueryLog {
    client: String,
    sql: String,
    started: Instant,
    rows: u64,
    bytes: u64,
}

impl QueryLog {
    fn new(client: String, sql: &str) -> Self {
        let mut shown: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some((cut, _)) = shown.char_indices().nth(LOGGED_SQL_CHARS) {
            shown.truncate(cut);
            shown.push('…');
        }
        Self {
            client,
            sql: shown,
            started: Instant::now(),
            rows: 0,
            bytes: 0,
        }
    }

    fn end(self, outcome: &str) {
        eprintln!(
            "query client={} rows={} bytes={} time={:.3}s outcome={:?} sql={:?}",
            self.client,
            self.rows,
            self.bytes,
            self.started.elapsed().as_secs_f64(),
            outcome,
            self.sql
        );
    }
}
