//! libFuzzer target `record`: see [`corescan_fuzz::record`] for the input format and the checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| corescan_fuzz::record(data));
