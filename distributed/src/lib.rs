//! # corescan-distributed: corescan scans as the leaves of a distributed DataFusion plan
//!
//! For files spread over several machines (tenant databases on many hosts, logs on the node
//! that wrote them), queries run on [datafusion-distributed], DataFusion's distributed
//! execution library, with corescan reading each file where it lies:
//!
//! - a **worker** ([`CorescanWorker`], `corescan worker --listen ADDR --data DIR`) serves the
//!   SQLite files under one directory: the distributed engine's worker service runs the query
//!   fragments sent to it, each corescan scan thread-per-core on the worker's CPUs exactly as a
//!   local scan, and a catalog endpoint on the same port says which files and tables it holds
//!   ([`catalog`]);
//! - the **coordinator** ([`Cluster`], `corescan sql --workers HOST:PORT,... "SQL"`) asks the
//!   workers for their catalogs, registers every table (the union over the files holding it;
//!   the same relative path on several workers is one replicated file), plans with DataFusion
//!   and datafusion-distributed, and ships each file's scan to a worker that holds it: no
//!   table file crosses the network, only the scans' Arrow batches and the joins' and
//!   aggregations' exchanges;
//! - **one codec** ([`CorescanCodec`]) carries a corescan scan (files, projection, pushed
//!   filter, limit) across the network; a worker resolves its paths under its directory and
//!   refuses anything else ([`data_dir`]).
//!
//! What a worker trusts: the coordinator's plans, as far as datafusion-distributed's protocol
//! goes (no authentication, no encryption: bind workers to loopback or a private network),
//! but never a path: it reads only the SQLite files under its directory, and a fragment whose
//! leaves are anything but corescan scans and the engine's own exchanges is refused.
//!
//! ## Layout, bottom to top
//!
//! [`error`], [`channels`] (gRPC channels with bounded waits), [`data_dir`], [`definition`];
//! [`catalog`]; [`codec`]; [`worker`] and [`cluster`].
//!
//! [datafusion-distributed]: https://github.com/datafusion-contrib/datafusion-distributed
#![deny(missing_docs)]

pub mod catalog;
pub mod channels;
pub mod cluster;
pub mod codec;
pub mod data_dir;
pub mod definition;
pub mod error;
pub mod worker;

pub use catalog::{WorkerCatalog, CATALOG_ACTION};
pub use cluster::{Cluster, WorkerInfo};
pub use codec::{CorescanCodec, ScanNode};
pub use data_dir::DataDir;
pub use error::Error;
pub use worker::{CorescanWorker, WorkerConfig};
