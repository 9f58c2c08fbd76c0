#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lockstep_fuzz::federation(data));
