//! Links the `corescan` binary position-dependent (`-no-pie`) on Linux.
//!
//! A position-independent executable is relocated by the dynamic loader at every start: this
//! one carries about 40,000 relative relocations (vtables, panic locations, string tables),
//! and applying them writes, and so copies, every page of its 700 KiB of relocated data. That
//! was 0.8 ms of each start here (`corescan --version` 2.9 -> 2.1 ms; an index seek answered
//! in 9.3 -> 7.8 ms, hyperfine, 40 runs), where `sqlite3` answers the seek in 2.5 ms. The
//! code is still compiled position-independent; only the link fixes the binary's own address
//! (ClickHouse links its server the same way). The shared libraries it loads (libc, hwloc)
//! stay randomized. Test binaries link as cargo links them.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
