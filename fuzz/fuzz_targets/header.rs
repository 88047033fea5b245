//! libFuzzer target `header`: see [`corescan_fuzz::header`] for the input format and the checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| corescan_fuzz::header(data));
