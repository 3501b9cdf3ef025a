//! cargo fuzz target `page`: see `checks::page`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::page(data));
