//! [`SqliteSchema`]: every table of one SQLite file as a DataFusion schema, and [`register`],
//! which makes it a session's default schema.
//!
//! The file is opened once, in one snapshot (SQLite's read locks on a live database, as a reader
//! takes them), held as long as the schema: every table of it, and every scan of every table, reads
//! that committed state, so a join of two tables sees them as one SQLite transaction would,
//! whatever a live writer commits meanwhile (register the file again to see later commits; the
//! held snapshot keeps a checkpoint from resetting the log past it, as any open reader does).
//! The table list is read once; a table is opened ([`SqliteTable::open_in`]) the first time a
//! query names it, and kept for the session. Names match as SQLite matches them, ASCII
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
use partitioner::create_table::parse_create_table;
use partitioner::schema::read_schema;
use partitioner::PageFile;

use crate::error::Error;
use crate::table::{SqliteTable, TableOptions};

/// The tables of one file, or of several (see the module docs).
#[derive(Debug)]
pub struct SqliteSchema {
    path: PathBuf,
    placement: Placement,
    options: ScanOptions,
    table_options: TableOptions,
    /// The file, open in the snapshot every table is read in (one file only).
    file: Option<Arc<PageFile>>,
    /// Over several files: each table's files, in the listed order, by lower-cased name.
    files: HashMap<String, Vec<PathBuf>>,
    /// The tables' names as the schema spells them (in the first file holding each).
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
        let file = open_settled(&path)?;
        let entries: Vec<_> = read_schema(&file)?
            .into_iter()
            .filter(|e| e.kind == "table")
            .collect();
        // Each type override names a table and a column the file has: checked here, before
        // any query, so that a misspelt option is never silently ignored.
        for o in &table_options.types {
            let unknown = |what: &str| Error::Unsupported {
                path: path.clone(),
                table: o.table.clone(),
                column: o.column.clone(),
                reason: format!("no such {what} (in a type override)"),
            };
            let entry = entries
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(&o.table))
                .ok_or_else(|| unknown("table"))?;
            let columns = entry
                .sql
                .as_deref()
                .and_then(|sql| parse_create_table(sql).ok())
                .map(|def| def.columns)
                .unwrap_or_default();
            if !columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&o.column))
            {
                return Err(unknown("column"));
            }
        }
        let tables = entries.into_iter().map(|e| e.name).collect::<Vec<String>>();
        Ok(SqliteSchema {
            path,
            placement,
            options,
            table_options,
            file: Some(Arc::new(file)),
            files: HashMap::new(),
            tables,
            opened: Mutex::new(HashMap::new()),
        })
    }

    /// The tables of several files: a table any of them holds is one table, the union of its
    /// rows over the files that hold it (in the listed order; [`SqliteTable::open_files`]).
    /// Each file's table list is read here (and the file closed again); each scan reads every
    /// file in its own snapshot, so the tables of one query are not read in one committed
    /// state of each file as they are over one file. One path is [`SqliteSchema::open_with`].
    pub fn open_files(
        paths: &[PathBuf],
        placement: Placement,
        options: ScanOptions,
        table_options: TableOptions,
    ) -> Result<Self, Error> {
        let [first, ..] = paths else {
            return Err(Error::Session("no database file".into()));
        };
        if paths.len() == 1 {
            return Self::open_with(first, placement, options, table_options);
        }
        let mut tables: Vec<String> = Vec::new();
        let mut files: HashMap<String, Vec<PathBuf>> = HashMap::new();
        for path in paths {
            let file = open_settled(path)?;
            for entry in read_schema(&file)?
                .into_iter()
                .filter(|e| e.kind == "table")
            {
                let key = entry.name.to_ascii_lowercase();
                let holders = files.entry(key).or_default();
                if holders.is_empty() {
                    tables.push(entry.name);
                }
                holders.push(path.clone());
            }
        }
        if let Some(o) = table_options
            .types
            .iter()
            .find(|o| !files.contains_key(&o.table.to_ascii_lowercase()))
        {
            return Err(Error::Unsupported {
                path: first.clone(),
                table: o.table.clone(),
                column: o.column.clone(),
                reason: "no such table in any of the files (in a type override)".into(),
            });
        }
        Ok(SqliteSchema {
            path: first.clone(),
            placement,
            options,
            table_options,
            file: None,
            files,
            tables,
            opened: Mutex::new(HashMap::new()),
        })
    }

    /// Whether the file is read without SQLite's locks (no `-shm` index to lock, a file
    /// system without locks), so that a writer could change it during a query: a caller then
    /// checks [`SqliteSchema::check_unchanged`] after the query before trusting its answer.
    pub fn needs_verification(&self) -> bool {
        // Over several files each file is checked as its scan ends.
        self.file
            .as_ref()
            .is_some_and(|f| f.read_snapshot().needs_verification())
    }

    /// After a query: fails with the file's `Changed` error when it is read without SQLite's
    /// locks and changed since the schema was opened (the query may have read two versions;
    /// open the schema again and rerun it). `Ok` at once under SQLite's locks.
    pub fn check_unchanged(&self) -> Result<(), Error> {
        match &self.file {
            Some(f) => Ok(f.check_unchanged()?),
            None => Ok(()),
        }
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
        let table = Arc::new(match &self.file {
            Some(file) => SqliteTable::open_in(
                &self.path,
                spelled,
                Some(Arc::clone(file)),
                self.placement.clone(),
                self.options,
                self.table_options.clone(),
            )?,
            None => SqliteTable::open_files(
                self.files.get(&key).map_or(&[][..], Vec::as_slice),
                spelled,
                self.placement.clone(),
                self.options,
                self.table_options.clone(),
            )?,
        });
        opened.insert(key, Arc::clone(&table));
        Ok(Some(table))
    }
}

/// `path` opened in a snapshot, tried again (up to [`engine::MAX_ATTEMPTS`] times) while the
/// database changes under the opening: a live writer's commit while the log is read where
/// SQLite's locks could not be used (the reader then takes the log privately, as SQLite's
/// recovery does).
fn open_settled(path: &Path) -> Result<PageFile, Error> {
    let mut attempt = 1;
    loop {
        match PageFile::open(path) {
            Err(e) if e.is_change() && attempt < engine::MAX_ATTEMPTS => attempt += 1,
            other => return Ok(other?),
        }
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
/// scans placed by `placement` with `options` over the default settings; returns the schema
/// (see [`SqliteSchema::check_unchanged`]).
pub fn register(
    ctx: &SessionContext,
    path: impl AsRef<Path>,
    placement: Placement,
    options: ScanOptions,
) -> Result<Arc<SqliteSchema>, Error> {
    register_with(ctx, path, placement, options, TableOptions::default())
}

/// [`register_with`] over several files (a table is the union of its rows over the files that
/// hold it: [`SqliteSchema::open_files`]).
pub fn register_files(
    ctx: &SessionContext,
    paths: &[PathBuf],
    placement: Placement,
    options: ScanOptions,
    table_options: TableOptions,
) -> Result<Arc<SqliteSchema>, Error> {
    let schema = Arc::new(SqliteSchema::open_files(
        paths,
        placement,
        options,
        table_options,
    )?);
    install(ctx, schema)
}

/// Makes `schema` `ctx`'s default schema.
fn install(ctx: &SessionContext, schema: Arc<SqliteSchema>) -> Result<Arc<SqliteSchema>, Error> {
    let state = ctx.state();
    let names = &state.config_options().catalog;
    let catalog = ctx
        .catalog(&names.default_catalog)
        .ok_or_else(|| Error::Session(format!("no catalog {:?}", names.default_catalog)))?;
    catalog
        .register_schema(&names.default_schema, Arc::clone(&schema) as _)
        .map_err(|e| Error::Session(e.to_string()))?;
    Ok(schema)
}

/// [`register`], the tables opened with `table_options`.
pub fn register_with(
    ctx: &SessionContext,
    path: impl AsRef<Path>,
    placement: Placement,
    options: ScanOptions,
    table_options: TableOptions,
) -> Result<Arc<SqliteSchema>, Error> {
    let schema = Arc::new(SqliteSchema::open_with(
        path,
        placement,
        options,
        table_options,
    )?);
    install(ctx, schema)
}
