//! Metric names of the code graph and localization: graph builds and `locate` answers, each
//! described in [`describe`] (subsystem `ctxd_query_`, as the dashboards read them).

/// Histogram: seconds spent loading and building the code graph of an index version.
pub const GRAPH_BUILD_SECONDS: &str = "ctxd_query_graph_build_duration_seconds";
/// Histogram: seconds spent answering a localization (`locate`) request.
pub const LOCATE_SECONDS: &str = "ctxd_query_locate_duration_seconds";

/// Registers every metric of this crate with its description (the `# HELP` line of a scrape)
/// and creates at zero the series the dashboards and alert rules read. Called by the binary
/// once the recorder is installed.
pub fn describe() {
    metrics::describe_histogram!(
        GRAPH_BUILD_SECONDS,
        "Seconds spent loading and building the code graph of an index version (once per version)."
    );
    metrics::describe_histogram!(LOCATE_SECONDS, "Seconds spent answering a localization (locate) request.");
}
