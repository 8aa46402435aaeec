//! The Flight SQL service: each call of the protocol mapped onto [`Queries`], the prepared
//! statements and the catalog. The token was checked before a call gets here (`auth.rs`).

use std::pin::Pin;
use std::sync::Arc;

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionCancelQueryRequest, ActionCancelQueryResult, ActionClosePreparedStatementRequest,
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, CommandGetCatalogs,
    CommandGetDbSchemas, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables,
    CommandPreparedStatementQuery, CommandPreparedStatementUpdate, CommandStatementQuery,
    CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt, SqlInfo,
    TicketStatementQuery,
};
use arrow_flight::{
    Action, ActionType, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus,
    FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, IpcMessage,
    SchemaAsIpc, Ticket,
};
use datafusion::arrow::array::{Array, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema};
use datafusion::arrow::ipc::writer::IpcWriteOptions;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ParamValues;
use datafusion::prelude::SessionContext;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use super::catalog;
use super::prepared::PreparedStatements;
use super::query::{Queries, QueryStream};
use super::ServeSettings;

type DoGetStream = <FlightSqlEndpoint as FlightService>::DoGetStream;

/// Bytes of the random id before the statement in a statement's ticket.
const TICKET_ID_BYTES: usize = 16;

/// Flight's action that cancels the answers of a `FlightInfo`.
const CANCEL_FLIGHT_INFO: &str = "CancelFlightInfo";

/// ndfusion's Flight SQL service.
pub(super) struct FlightSqlEndpoint {
    queries: Arc<Queries>,
    prepared: PreparedStatements,
    settings: ServeSettings,
}

impl FlightSqlEndpoint {
    pub(super) fn new(ctx: SessionContext, settings: ServeSettings) -> Self {
        Self {
            queries: Arc::new(Queries::new(ctx, settings.clone())),
            prepared: PreparedStatements::default(),
            settings,
        }
    }

    /// The answer to `sql` for `DoGet` of `ticket` (which a `CancelFlightInfo` names).
    async fn answer(
        &self,
        sql: &str,
        parameters: Option<ParamValues>,
        request: &Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let ticket = request.get_ref().ticket.to_vec();
        let stream = (self
            .queries
            .run(sql, parameters, client(request), Some(ticket)))
        .await?;
        Ok(Response::new(encode(stream)))
    }

    /// Ends the answers being sent to the tickets of a `FlightInfo` a client cancels.
    fn cancel(&self, info: &FlightInfo) -> Result<(), Status> {
        let tickets = (info.endpoint.iter())
            .filter_map(|e| e.ticket.as_ref())
            .map(|t| t.ticket.as_ref());
        match self.queries.cancel(tickets) {
            0 => Err(Status::not_found(
                "the FlightInfo names no answer being sent (it has ended, or its DoGet has \
                 not started)",
            )),
            _ => Ok(()),
        }
    }

    /// Runs a statement to its end; the number of rows it changed (`count`, as DataFusion's
    /// writes report it), 0 for others.
    async fn update(
        &self,
        sql: &str,
        parameters: Option<ParamValues>,
        client: String,
    ) -> Result<i64, Status> {
        let stream = self.queries.run(sql, parameters, client, None).await?;
        let batches: Vec<RecordBatch> = stream.try_collect().await?;
        let count = (batches.iter())
            .filter_map(|b| b.column_by_name("count"))
            .filter_map(|c| c.as_any().downcast_ref::<UInt64Array>())
            .flat_map(|c| c.iter().flatten())
            .sum::<u64>();
        Ok(i64::try_from(count).unwrap_or(i64::MAX))
    }
}

/// The client's address for the log.
fn client<T>(request: &Request<T>) -> String {
    request
        .remote_addr()
        .map_or_else(|| "unknown".into(), |a| a.to_string())
}

/// A result stream as Flight data, batches sent as the plan makes them.
fn encode(stream: QueryStream) -> DoGetStream {
    let schema = stream.schema();
    let batches = stream.map_err(|status| FlightError::Tonic(Box::new(status)));
    Box::pin(
        FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from),
    )
}

/// A batch made at once (the catalog's answers) as Flight data.
fn encode_batch(batch: RecordBatch) -> Response<DoGetStream> {
    let schema = batch.schema();
    let batches = futures::stream::once(async move { Ok(batch) });
    Response::new(Box::pin(
        FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from),
    ))
}

/// The schema the client receives: Flight sends dictionary columns as their values.
fn flight_schema(schema: &Schema) -> Schema {
    fn field(f: &Arc<Field>) -> Arc<Field> {
        Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(flight_type(f.data_type())),
        )
    }
    fn flight_type(t: &DataType) -> DataType {
        match t {
            DataType::Dictionary(_, values) => flight_type(values),
            DataType::List(f) => DataType::List(field(f)),
            DataType::LargeList(f) => DataType::LargeList(field(f)),
            DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
            DataType::Struct(fields) => {
                DataType::Struct(fields.iter().map(field).collect::<Fields>())
            }
            DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
            other => other.clone(),
        }
    }
    let fields: Fields = schema.fields().iter().map(field).collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// A `FlightInfo` of `schema` whose one endpoint's ticket is `ticket`.
fn flight_info(
    schema: &Schema,
    ticket: Vec<u8>,
    descriptor: FlightDescriptor,
) -> Result<Response<FlightInfo>, Status> {
    let endpoint = FlightEndpoint::new().with_ticket(Ticket::new(ticket));
    let info = FlightInfo::new()
        .try_with_schema(&flight_schema(schema))
        .map_err(|e| Status::internal(format!("encoding the answer's schema: {e}")))?
        .with_endpoint(endpoint)
        .with_descriptor(descriptor);
    Ok(Response::new(info))
}

/// The `FlightInfo` of a catalog command: its builder's schema, the command as the ticket.
fn command_info(
    schema: &Schema,
    command: &impl ProstMessageExt,
    request: Request<FlightDescriptor>,
) -> Result<Response<FlightInfo>, Status> {
    flight_info(
        schema,
        command.as_any().encode_to_vec(),
        request.into_inner(),
    )
}

fn ipc_schema(schema: &Schema) -> Result<bytes::Bytes, Status> {
    let message: IpcMessage = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e| Status::internal(format!("encoding a schema: {e}")))?;
    Ok(message.0)
}

fn utf8(bytes: &[u8], what: &str) -> Result<String, Status> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Status::invalid_argument(format!("the {what} is not UTF-8")))
}

/// The parameters of a planned statement, `$1`, `$2`, ... in order.
fn parameter_schema(plan: &datafusion::logical_expr::LogicalPlan) -> Result<Schema, Status> {
    let types = plan
        .get_parameter_types()
        .map_err(|e| super::query::status_of(&e))?;
    let mut named: Vec<(String, Option<DataType>)> = types.into_iter().collect();
    // `$10` after `$9`: by number where the names are numbers.
    named.sort_by_key(|(name, _)| {
        let n = name
            .trim_start_matches('$')
            .parse::<u64>()
            .unwrap_or(u64::MAX);
        (n, name.clone())
    });
    let fields: Vec<Field> = (named.into_iter())
        .map(|(name, t)| Field::new(name, t.unwrap_or(DataType::Null), true))
        .collect();
    Ok(Schema::new(fields))
}

#[tonic::async_trait]
impl FlightSqlService for FlightSqlEndpoint {
    type FlightService = FlightSqlEndpoint;

    /// The credentials were checked (`auth.rs`); the answer carries the bearer the client
    /// sends from now on.
    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let token = self.settings.token.clone().unwrap_or_default();
        let answer = HandshakeResponse {
            protocol_version: 0,
            payload: token.clone().into(),
        };
        let mut response: Response<Pin<Box<dyn Stream<Item = _> + Send>>> =
            Response::new(Box::pin(futures::stream::iter([Ok(answer)])));
        if !token.is_empty() {
            let bearer = MetadataValue::try_from(format!("Bearer {token}"))
                .map_err(|_| Status::internal("the token is not a header value"))?;
            response.metadata_mut().insert("authorization", bearer);
        }
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let plan = self.queries.plan(&query.query).await?;
        let schema = plan.schema().as_arrow().clone();
        // The ticket is a random id and the statement itself: `DoGet` plans and checks it
        // again, so a ticket a client writes itself gains nothing; the id tells this run
        // from other clients' runs of the same statement (`CancelFlightInfo`).
        let mut handle = vec![0u8; TICKET_ID_BYTES];
        getrandom::getrandom(&mut handle)
            .map_err(|e| Status::internal(format!("no random ticket id: {e}")))?;
        handle.extend_from_slice(query.query.as_bytes());
        let ticket = TicketStatementQuery {
            statement_handle: handle.into(),
        };
        flight_info(
            &schema,
            ticket.as_any().encode_to_vec(),
            request.into_inner(),
        )
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let sql = (ticket.statement_handle.get(TICKET_ID_BYTES..))
            .ok_or_else(|| Status::invalid_argument("the ticket is shorter than its id"))?;
        let sql = utf8(sql, "statement")?;
        self.answer(&sql, None, &request).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let plan = self.queries.plan(&query.query).await?;
        let dataset_schema = ipc_schema(&flight_schema(plan.schema().as_arrow()))?;
        let parameter_schema = ipc_schema(&parameter_schema(&plan)?)?;
        let handle = self.prepared.create(query.query)?;
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into(),
            dataset_schema,
            parameter_schema,
        })
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let handle = query.prepared_statement_handle;
        self.prepared.get(&handle)?;
        let data = request.into_inner().map_err(FlightError::from);
        let mut batches = arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(data);
        let mut bound = None;
        while let Some(batch) = batches.next().await {
            let batch = batch.map_err(|e| Status::invalid_argument(format!("parameters: {e}")))?;
            if bound.is_some() {
                return Err(Status::invalid_argument(
                    "parameters are bound one row at a time; several batches were sent",
                ));
            }
            bound = Some(batch);
        }
        self.prepared.bind(&handle, bound.as_ref())?;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle),
        })
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let prepared = self.prepared.get(&query.prepared_statement_handle)?;
        let mut plan = self.queries.plan(&prepared.sql).await?;
        // With its parameters bound, as DoGet runs it: a placeholder's type can change the
        // answer's (`concat(?, 'a')` is Utf8View untyped, Utf8 with a string bound).
        if let Some(parameters) = prepared.parameters {
            plan = super::placeholders::bind(plan, parameters)?;
        }
        let schema = plan.schema().as_arrow().clone();
        flight_info(
            &schema,
            query.as_any().encode_to_vec(),
            request.into_inner(),
        )
    }

    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let prepared = self.prepared.get(&query.prepared_statement_handle)?;
        (self.answer(&prepared.sql, prepared.parameters, &request)).await
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        self.prepared.close(&query.prepared_statement_handle)
    }

    /// Flight SQL's `CancelQuery` (deprecated for `CancelFlightInfo`; older clients send it).
    async fn do_action_cancel_query(
        &self,
        query: ActionCancelQueryRequest,
        _request: Request<Action>,
    ) -> Result<ActionCancelQueryResult, Status> {
        let info = FlightInfo::decode(query.info)
            .map_err(|e| Status::invalid_argument(format!("the FlightInfo to cancel: {e}")))?;
        self.cancel(&info)?;
        // Flight SQL's `CancelResult` (which arrow-flight 58 does not export) numbers its
        // values as Flight's `CancelStatus` does.
        Ok(ActionCancelQueryResult {
            result: CancelStatus::Cancelled.into(),
        })
    }

    /// Flight's own actions Flight SQL does not dispatch: `CancelFlightInfo`.
    async fn do_action_fallback(
        &self,
        request: Request<Action>,
    ) -> Result<Response<<Self as FlightService>::DoActionStream>, Status> {
        let action = request.into_inner();
        if action.r#type != CANCEL_FLIGHT_INFO {
            return Err(Status::invalid_argument(format!(
                "no action '{}' (this server's actions: ListActions)",
                action.r#type
            )));
        }
        let cancel = CancelFlightInfoRequest::decode(action.body)
            .map_err(|e| Status::invalid_argument(format!("{CANCEL_FLIGHT_INFO}: {e}")))?;
        let info = (cancel.info.as_ref())
            .ok_or_else(|| Status::invalid_argument("CancelFlightInfo names no FlightInfo"))?;
        self.cancel(info)?;
        let result = CancelFlightInfoResult::new(CancelStatus::Cancelled);
        let body = arrow_flight::Result::new(result.encode_to_vec());
        Ok(Response::new(Box::pin(futures::stream::iter([Ok(body)]))))
    }

    async fn list_custom_actions(&self) -> Option<Vec<Result<ActionType, Status>>> {
        Some(vec![Ok(ActionType {
            r#type: CANCEL_FLIGHT_INFO.into(),
            description: "Ends the answers being sent for a FlightInfo's tickets.".into(),
        })])
    }

    async fn do_put_statement_update(
        &self,
        command: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.update(&command.query, None, client(&request)).await
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let prepared = self.prepared.get(&query.prepared_statement_handle)?;
        (self.update(&prepared.sql, prepared.parameters, client(&request))).await
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        command_info(&query.into_builder().schema(), &query, request)
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(encode_batch(catalog::catalogs(self.queries.ctx(), query)?))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        command_info(&query.clone().into_builder().schema(), &query, request)
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(encode_batch(catalog::schemas(self.queries.ctx(), query)?))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        command_info(&query.clone().into_builder().schema(), &query, request)
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(encode_batch(
            catalog::tables(self.queries.ctx(), query).await?,
        ))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        command_info(&query.into_builder().schema(), &query, request)
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(encode_batch(catalog::table_types(query)?))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = catalog::sql_info(!self.settings.allow_ddl);
        command_info(&query.clone().into_builder(info).schema(), &query, request)
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let info = catalog::sql_info(!self.settings.allow_ddl);
        let batch = query.into_builder(info).build();
        Ok(encode_batch(batch.map_err(|e| {
            Status::internal(format!("building the SqlInfo answer: {e}"))
        })?))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}
