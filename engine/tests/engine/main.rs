//! Engine integration tests, by topic. Files are generated at test time under Cargo's
//! target temp dir (a disk-backed filesystem, so O_DIRECT works there).

mod damaged;
mod eval;
mod faults;
mod fixture;
mod fuzz;
mod notices;
mod settings;
