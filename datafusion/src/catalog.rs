//! [`SqliteSchema`]: every table of one SQLite file as a DataFusion schema, and [`register`],
//! which makes it a session's default schema.
//!
//! The file's table list is read once; a table is opened ([`SqliteTable::open`]) the first time
//! a query names it, and kept for the session. Names match as SQLite matches them, ASCII
//! case-insensitively: DataFusion lower-cases unquoted identifiers (`lineitem` for `LINEITEM`)
//! and keeps quoted ones (`"LINEITEM"`), and both find the table. A table corescan cannot scan
//! (a `WITHOUT ROWID` or virtual table) is listed, and naming it in a query is corescan's error.
//!
//! Layering: above [`crate::table`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::catalog::SchemaProvider;
use datafusion::datasource::TableProvider;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::context::SessionContext;
use engine::{Placement, ScanOptions};
use partitioner::schema::read_schema;
use partitioner::PageFile;

use crate::error::Error;
use crate::table::{SqliteTable, TableOptions};

/// The tables of one file (see the module docs).
#[derive(Debug)]
pub struct SqliteSchema {
    path: PathBuf,
    placement: Placement,
    options: ScanOptions,
    table_options: TableOptions,
    /// The tables' names as the schema spells them.
    tables: Vec<String>,
    /// Tables opened so far, by lower-cased name.
    opened: Mutex<HashMap<String, Arc<SqliteTable>>>,
}

impl SqliteSchema {
    /// Reads the table list of `path`; its tables will be scanned with executors placed by
    /// `placement` and `options` over the default settings.
    pub fn open(
        path: impl AsRef<Path>,
        placement: Placement,
        options: ScanOptions,
    ) -> Result<Self, Error> {
        Self::open_with(path, placement, options, TableOptions::default())
    }

    /// [`SqliteSchema::open`], its tables opened with `table_options`.
    pub fn open_with(
        path: impl AsRef<Path>,
        placement: Placement,
        options: ScanOptions,
        table_options: TableOptions,
    ) -> Result<Self, Error> {
        let path = path.as_ref().to_path_buf();
        let file = PageFile::open(&path)?;
        let tables = read_schema(&file)?
            .into_iter()
            .filter(|e| e.kind == "table")
            .map(|e| e.name)
            .collect::<Vec<String>>();
        if let Some(o) = table_options
            .types
            .iter()
            .find(|o| !tables.iter().any(|t| t.eq_ignore_ascii_case(&o.table)))
        {
            return Err(Error::Unsupported {
                path,
                table: o.table.clone(),
                column: o.column.clone(),
                reason: "no such table (in a type override)".into(),
            });
        }
        Ok(SqliteSchema {
            path,
            placement,
            options,
            table_options,
            tables,
            opened: Mutex::new(HashMap::new()),
        })
    }

    /// The tables' names as the schema spells them.
    pub fn table_list(&self) -> &[String] {
        &self.tables
    }

    /// Table `name` (ASCII case-insensitive), opened on first use; `None` if the file has no
    /// such table.
    pub fn get(&self, name: &str) -> Result<Option<Arc<SqliteTable>>, Error> {
        let Some(spelled) = self.tables.iter().find(|t| t.eq_ignore_ascii_case(name)) else {
            return Ok(None);
        };
        let key = spelled.to_ascii_lowercase();
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = opened.get(&key) {
            return Ok(Some(Arc::clone(t)));
        }
        let table = Arc::new(SqliteTable::open_with(
            &self.path,
            spelled,
            self.placement.clone(),
            self.options,
            self.table_options.clone(),
        )?);
        opened.insert(key, Arc::clone(&table));
        Ok(Some(table))
    }
}

#[async_trait]
impl SchemaProvider for SqliteSchema {
    fn table_names(&self) -> Vec<String> {
        self.tables.iter().map(|t| t.to_ascii_lowercase()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>, DataFusionError> {
        match self.get(name) {
            Ok(t) => Ok(t.map(|t| t as Arc<dyn TableProvider>)),
            Err(e) => Err(e.into_datafusion()),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.tables.iter().any(|t| t.eq_ignore_ascii_case(name))
    }
}

/// Makes every table of `path` a table of `ctx`'s default schema (replacing that schema), its
/// scans placed by `placement` with `options` over the default settings.
pub fn register(
    ctx: &SessionContext,
    path: impl AsRef<Path>,
    placement: Placement,
    options: ScanOptions,
) -> Result<(), Error> {
    register_with(ctx, path, placement, options, TableOptions::default())
}

/// [`register`], the tables opened with `table_options`.
pub fn register_with(
    ctx: &SessionContext,
    path: impl AsRef<Path>,
    placement: Placement,
    options: ScanOptions,
    table_options: TableOptions,
) -> Result<(), Error> {
    let schema = Arc::new(SqliteSchema::open_with(
        path,
        placement,
        options,
        table_options,
    )?);
    let state = ctx.state();
    let names = &state.config_options().catalog;
    let catalog = ctx
        .catalog(&names.default_catalog)
        .ok_or_else(|| Error::Session(format!("no catalog {:?}", names.default_catalog)))?;
    catalog
        .register_schema(&names.default_schema, schema)
        .map_err(|e| Error::Session(e.to_string()))?;
    Ok(())
}
