//! gRPC channels to workers, with bounded waits: a worker that is not there fails the connect
//! within [`CONNECT_TIMEOUT`], and one that stops answering during a query (a machine gone
//! without closing its connections) is found by HTTP/2 keep-alive pings within
//! [`KEEP_ALIVE_INTERVAL`] + [`KEEP_ALIVE_TIMEOUT`]. A worker process that dies closes its
//! connections, which ends the query at once.
//!
//! Layering: the bottom of the crate, beside [`crate::error`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use datafusion::error::DataFusionError;
use datafusion_distributed::grpc::{create_worker_client, BoxCloneSyncChannel};
use datafusion_distributed::{ChannelResolver, WorkerChannel};
use tonic::transport::{Channel, Endpoint};
use url::Url;

/// How long a connection to a worker may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an open connection is pinged.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// How long a ping may go unanswered before the connection is dropped.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The endpoint for the worker at `url`, with the timeouts above.
pub fn endpoint(url: &str) -> Result<Endpoint, tonic::transport::Error> {
    Ok(Endpoint::from_shared(url.to_string())?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true))
}

/// The distributed engine's channels to workers, one per worker, kept for the session.
#[derive(Debug, Clone, Default)]
pub struct Channels {
    open: Arc<Mutex<HashMap<Url, Channel>>>,
}

#[async_trait]
impl ChannelResolver for Channels {
    async fn get_worker_client_for_url(
        &self,
        url: &Url,
    ) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        let known = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(url)
            .cloned();
        let channel = match known {
            Some(c) => c,
            None => {
                let fail = |what: String| {
                    DataFusionError::Execution(format!("worker {}: {what}", shown(url)))
                };
                let channel = endpoint(url.as_str())
                    .map_err(|e| fail(e.to_string()))?
                    .connect()
                    .await
                    .map_err(|e| {
                        fail(format!(
                            "cannot connect: {}",
                            crate::error::source_chain(&e)
                        ))
                    })?;
                self.open
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(url.clone(), channel.clone());
                channel
            }
        };
        Ok(create_worker_client(BoxCloneSyncChannel::new(channel)))
    }
}

/// `url` as `HOST:PORT`.
pub fn shown(url: &Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        _ => url.to_string(),
    }
}
