//! Arrow Flight: the index's snapshots and search results as Arrow record batches.
//!
//! * `list_flights` lists one flight per snapshot (version) of the chunks table: descriptor
//!   path `["chunks", "<version>"]`, the row count, the table's schema, `app_metadata` JSON
//!   `{"version","timestamp","tags"}`, and a ticket that streams that version.
//! * `do_get` takes a JSON ticket, either
//!   - a search: `{"query": "...", "k": 10, "mode": "routed|hybrid|vector|bm25", "as_of": 12 | "tag"}`
//!     (the body of `POST /v1/search`) → one batch of results: `path, start_line, end_line,
//!     symbol, kind, language, score, content`; or
//!   - a table: `{"table": "chunks", "as_of": 12 | "tag"}` (latest without `as_of`) → every
//!     row of that version (vectors included), streamed batch by batch.
//! * `get_flight_info` answers for a `["chunks", "<version>"]` path or a JSON search command.
//!
//! Everything else is `unimplemented`. Bad tickets are `invalid_argument` with the reason.

use std::pin::Pin;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, RecordBatch, StringArray, UInt32Array};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest,
    HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use tonic::{Request, Response, Status, Streaming};

use ctxd_index::scope::SourceScope;
use ctxd_search::error::SearchError;
use ctxd_search::search::{SearchRequest, SearchResponse, ValidSearch};
use ctxd_search::searcher::Searcher;

type Stream<T> = Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The Flight service over one index.
#[derive(Clone)]
pub struct FlightApi {
    searcher: Arc<Searcher>,
    /// The configured source names (`source` in tickets is checked against them).
    access: ctxd_search::sources::LiveAccess,
    /// The process's admission gate, shared with HTTP (none: searches are not gated).
    gate: Option<Arc<crate::admission::Admission>>,
}

impl FlightApi {
    /// A Flight service answering from `searcher` (and its index).
    pub fn new(searcher: Arc<Searcher>) -> Self {
        Self { searcher, access: Default::default(), gate: None }
    }

    /// The same service passing searches through `gate` (the HTTP routes' gate): beyond its
    /// slots and queue a search gets `UNAVAILABLE` with `retry-after: 1` in its metadata.
    pub fn with_gate(mut self, gate: Arc<crate::admission::Admission>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// A search's answer: from the answer cache without queueing (as `POST /v1/search`), else
    /// once the gate lets it run.
    async fn search(&self, req: &ValidSearch) -> Result<SearchResponse, Status> {
        let answer = crate::admission::search(self.gate.as_ref(), &self.searcher, req).await.map_err(|refused| {
            let mut s = Status::unavailable(refused.message);
            let retry = tonic::metadata::MetadataValue::from_static(crate::admission::RETRY_AFTER_SECS);
            s.metadata_mut().insert("retry-after", retry);
            s
        })?;
        answer.map_err(status)
    }

    /// The same service checking `source` in tickets against the configured source names.
    pub fn with_access(mut self, access: ctxd_search::sources::LiveAccess) -> Self {
        self.access = access;
        self
    }

    /// The sources a ticket reads: its `source` narrowed to the caller's token (the
    /// interceptor put the [`crate::auth::Caller`] on the request).
    fn scope<T>(
        &self,
        request: &Request<T>,
        requested: Option<&SourceScope>,
        git_ref: Option<&str>,
    ) -> Result<Option<SourceScope>, Status> {
        let allowed = request.extensions().get::<crate::auth::Caller>().and_then(|c| c.sources.as_ref());
        self.access.get().resolve(requested, git_ref, allowed).map_err(|e| {
            if e.is_forbidden() {
                Status::permission_denied(e.to_string())
            } else {
                Status::invalid_argument(e.to_string())
            }
        })
    }

    /// Whether the caller reads only some sources (then whole-table counts are not shown).
    fn limited<T>(request: &Request<T>) -> bool {
        request.extensions().get::<crate::auth::Caller>().is_some_and(|c| c.sources.is_some())
    }

    /// The tonic service, to add to a server.
    pub fn into_server(self) -> FlightServiceServer<Self> {
        FlightServiceServer::new(self)
    }
}

/// Serves Flight on `listener` until `shutdown` resolves (requiring `auth` when set).
pub async fn serve(
    listener: tokio::net::TcpListener,
    api: FlightApi,
    auth: Option<crate::auth::Auth>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let service = FlightServiceServer::with_interceptor(api, crate::auth::flight_interceptor(auth));
    tonic::transport::Server::builder().add_service(service).serve_with_incoming_shutdown(incoming, shutdown).await
}

/// Schema of a search result batch.
pub fn results_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("start_line", DataType::UInt32, false),
        Field::new("end_line", DataType::UInt32, false),
        Field::new("symbol", DataType::Utf8, true),
        Field::new("kind", DataType::Utf8, true),
        Field::new("language", DataType::Utf8, false),
        Field::new("score", DataType::Float32, false),
        Field::new("content", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, true),
    ]))
}

/// Search results as one record batch.
pub fn results_batch(resp: &SearchResponse) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let r = &resp.results;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(r.iter().map(|x| x.path.as_str()))),
        Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.start_line))),
        Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.end_line))),
        Arc::new(StringArray::from_iter(r.iter().map(|x| x.symbol.as_deref()))),
        Arc::new(StringArray::from_iter(r.iter().map(|x| x.kind.as_deref()))),
        Arc::new(StringArray::from_iter_values(r.iter().map(|x| x.language.as_str()))),
        Arc::new(Float32Array::from_iter_values(r.iter().map(|x| x.score))),
        Arc::new(StringArray::from_iter_values(r.iter().map(|x| x.content.as_str()))),
        Arc::new(StringArray::from_iter(r.iter().map(|x| (!x.source.is_empty()).then_some(x.source.as_str())))),
    ];
    RecordBatch::try_new(results_schema(), cols)
}

fn status(e: SearchError) -> Status {
    if e.is_client_error() {
        Status::invalid_argument(e.to_string())
    } else {
        Status::internal(e.to_string())
    }
}

fn index_status(e: ctxd_index::error::IndexError) -> Status {
    match e {
        ctxd_index::error::IndexError::Snapshot { .. } => Status::invalid_argument(e.to_string()),
        other => Status::internal(other.to_string()),
    }
}

/// A `do_get` ticket.
enum TicketRequest {
    Search(SearchRequest),
    Table { as_of: Option<String>, source: Option<SourceScope>, git_ref: Option<String> },
}

fn parse_ticket(bytes: &[u8]) -> Result<TicketRequest, Status> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| Status::invalid_argument(format!("ticket is not JSON: {e}")))?;
    if let Some(table) = value.get("table") {
        if table != "chunks" {
            return Err(Status::invalid_argument(format!("unknown table {table}: only \"chunks\"")));
        }
        let as_of = match value.get("as_of") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(Status::invalid_argument(format!("as_of must be a version or a tag, got {other}")))
            }
        };
        if let Some(extra) = value
            .as_object()
            .and_then(|o| o.keys().find(|k| !["table", "as_of", "source", "ref"].contains(&k.as_str())))
        {
            return Err(Status::invalid_argument(format!("unknown ticket field '{extra}'")));
        }
        let source = ctxd_search::sources::from_args(&value).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let git_ref =
            ctxd_search::sources::ref_from_args(&value).map_err(|e| Status::invalid_argument(e.to_string()))?;
        return Ok(TicketRequest::Table { as_of, source, git_ref });
    }
    let req: SearchRequest = serde_json::from_value(value)
        .map_err(|e| Status::invalid_argument(format!("ticket is neither a search nor a table request: {e}")))?;
    Ok(TicketRequest::Search(req))
}

impl FlightApi {
    async fn snapshot_info(&self, s: &ctxd_index::snapshots::Snapshot, schema: &Schema) -> Result<FlightInfo, Status> {
        let ticket = serde_json::json!({ "table": "chunks", "as_of": s.version }).to_string();
        let meta = serde_json::json!({ "version": s.version, "timestamp": s.timestamp, "tags": s.tags }).to_string();
        let mut info = FlightInfo::new()
            .try_with_schema(schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_descriptor(FlightDescriptor::new_path(vec!["chunks".into(), s.version.to_string()]))
            .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket)))
            .with_total_records(s.rows as i64);
        info.app_metadata = meta.into();
        Ok(info)
    }
}

#[tonic::async_trait]
impl FlightService for FlightApi {
    type HandshakeStream = Stream<HandshakeResponse>;
    type ListFlightsStream = Stream<FlightInfo>;
    type DoGetStream = Stream<FlightData>;
    type DoPutStream = Stream<PutResult>;
    type DoActionStream = Stream<arrow_flight::Result>;
    type ListActionsStream = Stream<ActionType>;
    type DoExchangeStream = Stream<FlightData>;

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented("handshake: no authentication is configured"))
    }

    async fn list_flights(&self, request: Request<Criteria>) -> Result<Response<Self::ListFlightsStream>, Status> {
        let limited = Self::limited(&request);
        let index = self.searcher.index();
        let schema = index.schema().await.map_err(index_status)?;
        let snaps = index.snapshots().list().await.map_err(index_status)?;
        let mut infos = Vec::with_capacity(snaps.len());
        for s in &snaps {
            let mut info = self.snapshot_info(s, &schema).await?;
            if limited {
                // The whole table's row count is not this caller's to know.
                info.total_records = -1;
            }
            infos.push(Ok(info));
        }
        Ok(Response::new(stream::iter(infos).boxed()))
    }

    async fn get_flight_info(&self, request: Request<FlightDescriptor>) -> Result<Response<FlightInfo>, Status> {
        let limited = Self::limited(&request);
        let desc = request.into_inner();
        let index = self.searcher.index();
        if let [table, version] = desc.path.as_slice() {
            let version: u64 = version
                .parse()
                .map_err(|_| Status::invalid_argument(format!("{table}/{version}: not a version number")))?;
            let schema = index.schema().await.map_err(index_status)?;
            let snaps = index.snapshots().list().await.map_err(index_status)?;
            let s = snaps
                .iter()
                .find(|s| s.version == version)
                .ok_or_else(|| Status::not_found(format!("no version {version}")))?;
            let mut info = self.snapshot_info(s, &schema).await?;
            if limited {
                info.total_records = -1;
            }
            return Ok(Response::new(info));
        }
        if !desc.cmd.is_empty() {
            parse_ticket(&desc.cmd)?;
            let info = FlightInfo::new()
                .try_with_schema(&results_schema())
                .map_err(|e| Status::internal(e.to_string()))?
                .with_descriptor(desc.clone())
                .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(desc.cmd.clone())));
            return Ok(Response::new(info));
        }
        Err(Status::invalid_argument("descriptor: use path [\"chunks\", \"<version>\"] or a JSON search command"))
    }

    async fn poll_flight_info(&self, _: Request<FlightDescriptor>) -> Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented("poll_flight_info"))
    }

    async fn get_schema(&self, _: Request<FlightDescriptor>) -> Result<Response<SchemaResult>, Status> {
        Err(Status::unimplemented("get_schema: see the schema in list_flights / get_flight_info"))
    }

    async fn do_get(&self, request: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        let ticket = parse_ticket(&request.get_ref().ticket)?;
        // A search answered from a superseded version while busy (`server.stale_answer_ms`), or
        // carried across commits that changed none of its files, says so in the response
        // metadata, as `stale_ms` and `carried_ms` do in JSON.
        let (mut stale_ms, mut carried_ms) = (None, None);
        let batches: BoxStream<'static, Result<RecordBatch, FlightError>> = match ticket {
            TicketRequest::Search(mut req) => {
                req.source = self.scope(&request, req.source.as_ref(), req.git_ref.as_deref())?;
                let resp = self.search(&req.check().map_err(status)?).await?;
                (stale_ms, carried_ms) = (resp.stale_ms, resp.carried_ms);
                let batch = results_batch(&resp).map_err(|e| Status::internal(e.to_string()))?;
                stream::iter([Ok(batch)]).boxed()
            }
            TicketRequest::Table { as_of, source, git_ref } => {
                let scope = self.scope(&request, source.as_ref(), git_ref.as_deref())?;
                let index = self.searcher.index();
                let view = match as_of {
                    Some(spec) => {
                        let as_of: ctxd_index::snapshots::AsOf = spec.parse().map_err(index_status)?;
                        let version = index.snapshots().resolve(&as_of).await.map_err(index_status)?;
                        Arc::new(index.snapshots().at(version).await.map_err(index_status)?)
                    }
                    None => index.clone(),
                };
                let rows =
                    view.scoped(scope).await.map_err(index_status)?.reads().scan().await.map_err(index_status)?;
                rows.map_err(|e| FlightError::ExternalError(Box::new(e))).boxed()
            }
        };
        let data = FlightDataEncoderBuilder::new().build(batches).map_err(|e| match e {
            FlightError::Tonic(s) => *s,
            other => Status::internal(other.to_string()),
        });
        let mut response = Response::new(data.boxed());
        for (key, ms) in [("stale-ms", stale_ms), ("carried-ms", carried_ms)] {
            if let Some(ms) = ms.and_then(|ms| tonic::metadata::MetadataValue::try_from(ms.to_string()).ok()) {
                response.metadata_mut().insert(key, ms);
            }
        }
        Ok(response)
    }

    async fn do_put(&self, _: Request<Streaming<FlightData>>) -> Result<Response<Self::DoPutStream>, Status> {
        Err(Status::unimplemented("do_put: the index is written by the daemon's pipeline"))
    }

    async fn do_action(&self, _: Request<Action>) -> Result<Response<Self::DoActionStream>, Status> {
        Err(Status::unimplemented("do_action"))
    }

    async fn list_actions(&self, _: Request<Empty>) -> Result<Response<Self::ListActionsStream>, Status> {
        Ok(Response::new(stream::empty().boxed()))
    }

    async fn do_exchange(&self, _: Request<Streaming<FlightData>>) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented("do_exchange"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn searches_beyond_the_gate_get_unavailable_with_retry_after() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Arc::new(ctxd_index::store::Index::open_or_create(&uri, "m", 8).await.unwrap());
        let searcher = Arc::new(Searcher::new(index, None));
        let limits = crate::admission::AdmissionLimits {
            concurrent: 1,
            queued: 0,
            timeout: std::time::Duration::from_millis(100),
        };
        let gate = Arc::new(crate::admission::Admission::new(limits, searcher.pressure().clone()));
        let api = FlightApi::new(searcher).with_gate(gate.clone());
        let ticket = || Request::new(Ticket::new(br#"{"query":"parse config","k":3,"mode":"bm25"}"#.to_vec()));
        let held = gate.enter().await.expect("the one slot");
        let err = api.do_get(ticket()).await.err().expect("refused while the slot is held");
        assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
        assert!(err.message().contains("server busy"), "{err}");
        assert_eq!(err.metadata().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
        drop(held);
        assert!(api.do_get(ticket()).await.is_ok(), "answered once the slot is free");
    }

    #[test]
    fn tickets_parse_or_explain() {
        assert!(
            matches!(parse_ticket(br#"{"table":"chunks","as_of":3}"#), Ok(TicketRequest::Table { as_of: Some(v), .. }) if v == "3")
        );
        assert!(matches!(
            parse_ticket(br#"{"table":"chunks"}"#),
            Ok(TicketRequest::Table { as_of: None, source: None, .. })
        ));
        assert!(matches!(
            parse_ticket(br#"{"table":"chunks","source":["api"]}"#),
            Ok(TicketRequest::Table { source: Some(s), .. }) if s.names() == ["api"]
        ));
        assert!(
            matches!(parse_ticket(br#"{"query":"x","k":3,"mode":"bm25"}"#), Ok(TicketRequest::Search(r)) if r.k == 3)
        );
        for bad in [&b"nope"[..], br#"{"table":"symbols"}"#, br#"{"table":"chunks","bogus":1}"#, br#"{"quer":"x"}"#] {
            let err = parse_ticket(bad).err().expect("rejected");
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
        }
    }
}
