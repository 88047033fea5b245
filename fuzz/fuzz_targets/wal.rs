//! libFuzzer target `wal`: see [`corescan_fuzz::wal`] for the input format and the checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| corescan_fuzz::wal(data));
