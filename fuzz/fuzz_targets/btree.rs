//! libFuzzer target `btree`: see [`corescan_fuzz::btree`] for the input format and the checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| corescan_fuzz::btree(data));
